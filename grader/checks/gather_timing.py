"""Part 3's cost rule: the gather and the slot mapping are vectorised, no Python loop over tokens.

The worker runs a workload per call (`worker.gather_rounds`, `worker.slot_mapping_rounds`: four
long, ragged sequences, several rounds, each on fresh block tables) for the candidate and the
reference in the same rounds, timed by each worker's CPU time (`grader.scoring.timing`). A gather
that loops over blocks stays well within its limit; a loop over tokens, in the gather or in the
slot mapping, goes well past it (the figures measured are beside the limits).

Evidence: each round's block tables and the +-1 signs of its sums are drawn in the worker from a
seed this process draws afresh for every call (`secrets`), and the workload returns, per round, a
signed sum over everything the calls returned: of the gathered rows (the pool holds whole numbers
that this process wrote: the sums are exact) or of the slots. This process computes the same sums
from what it asked (`gather_sums`, `slot_sums`); a workload that gathered other rows, fewer
tokens, or an earlier round's result fails the check, "the timed work was not done as asked".
"""

import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from grader.checks.support.workloads import (
    LEAST_SECONDS,
    ends_in_the_time,
    function_source,
    replay,
)
from grader.sandbox.proxy import Remote, RemoteError, Shown, sandbox_of, transcript_of
from grader.scoring.timing import Timed, implausible, judge_ratio, time_confirmed
from kernels.reference import cdiv

pytestmark = pytest.mark.part("gather")

BLOCK_SIZE, HEAD_DIM = 16, 16  # `whole_number_pool` and `LONG_REQUESTS` write them out
SEQ_LENS = (8192, 8000, 6001, 5000)
LONG_SEQ_LENS = tuple(
    4 * n for n in SEQ_LENS
)  # the reference's slot mapping costs little per token
GATHER_LIMIT = 15.0  # candidate / reference: a loop over blocks ~4x, over tokens ~70x
SLOT_MAPPING_LIMIT = 8.0  # candidate / reference: a loop over tokens ~20x
THIS_FILE = Path(__file__)


def whole_number_pool(seed, num_blocks):
    """A pool of `num_blocks` blocks of 16 rows of 16 whole numbers from -4 to 4, drawn from
    `seed`: any signed sum of its rows is exact in float32, whatever order it is added in."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-4, 5, (num_blocks, 16, 16), generator=generator).float()


def long_requests_source(filled: bool) -> tuple[str, ...]:
    """The counterexample's `long_requests`: the manager, its pool written where it is `filled`,
    and the requests (their block tables are the workload's to give)."""
    return (
        "def long_requests(seq_lens, pool_seed):",
        f"    num_blocks = sum(-(-seq_len // {BLOCK_SIZE}) for seq_len in seq_lens)",
        f"    manager = KVCacheManager(num_blocks, {BLOCK_SIZE}, {HEAD_DIM})",
        *(
            ["    manager.physical_kv_cache[...] = whole_number_pool(pool_seed, num_blocks)"]
            if filled
            else []
        ),
        "    return manager, [Request(i, seq_len) for i, seq_len in enumerate(seq_lens)]",
        "",
    )


def gathered(pool: torch.Tensor, blocks: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The first `seq_len` rows of `pool`'s `blocks`, in their order."""
    return pool[blocks].flatten(0, 1)[:seq_len]


def gather_sums(pool: torch.Tensor, seq_lens: tuple[int, ...], seed: int, rounds: int) -> list:
    """What `worker.gather_rounds` must return on `pool`: the same draws, in the same order."""
    generator = torch.Generator().manual_seed(seed)
    token_signs = [
        torch.randint(0, 2, (seq_len,), generator=generator) * 2.0 - 1 for seq_len in seq_lens
    ]
    dim_signs = torch.randint(0, 2, (HEAD_DIM,), generator=generator) * 2.0 - 1
    sums = []
    for order in block_orders(pool.shape[0], generator, rounds):
        total = 0.0
        for signs, blocks in zip(token_signs, tables(order, seq_lens), strict=True):
            total += float(signs @ gathered(pool, blocks, len(signs)) @ dim_signs)
        sums.append(total)
    return sums


def slot_sums(num_blocks: int, seq_lens: tuple[int, ...], seed: int, rounds: int) -> list:
    """What `worker.slot_mapping_rounds` must return: a token's slot is what a gather returns
    from a pool whose every slot holds its own number."""
    numbers = torch.arange(num_blocks * BLOCK_SIZE).view(num_blocks, BLOCK_SIZE)
    generator = torch.Generator().manual_seed(seed)
    token_signs = [
        torch.randint(0, 2, (seq_len,), generator=generator) * 2 - 1 for seq_len in seq_lens
    ]
    sums = []
    for order in block_orders(num_blocks, generator, rounds):
        total = 0
        for signs, blocks in zip(token_signs, tables(order, seq_lens), strict=True):
            total += int((gathered(numbers, blocks, len(signs)) * signs).sum())
        sums.append(total)
    return sums


def block_orders(num_blocks: int, generator: torch.Generator, rounds: int):
    """Each round's permutation of the pool's blocks, drawn as `worker.shuffle_tables` draws it."""
    for _ in range(rounds):
        yield torch.randperm(num_blocks, generator=generator)


def tables(order: torch.Tensor, seq_lens: tuple[int, ...]) -> list[torch.Tensor]:
    """The block tables `worker.shuffle_tables` gives requests of `seq_lens` from `order`."""
    start, blocks = 0, []
    for seq_len in seq_lens:
        used = cdiv(seq_len, BLOCK_SIZE)
        blocks.append(order[start : start + used])
        start += used
    return blocks


@dataclass
class LongRequests:
    """A candidate's (or the reference's) manager and requests of `seq_lens` tokens for one
    workload, and this process's copy of the pool it wrote (None: left as made)."""

    workload: str
    manager: Remote
    requests: list[Remote]
    seq_lens: tuple[int, ...]
    rounds: int
    pool_seed: int
    pool: torch.Tensor | None

    def expected(self, seed: int) -> list:
        """The workload's sums for the call that asked with `seed`."""
        if self.pool is not None:
            return gather_sums(self.pool, self.seq_lens, seed, self.rounds)
        num_blocks = sum(cdiv(seq_len, BLOCK_SIZE) for seq_len in self.seq_lens)
        return slot_sums(num_blocks, self.seq_lens, seed, self.rounds)


def long_requests(submission, workload: str, seq_lens: tuple[int, ...], rounds: int):
    """A manager and requests of `seq_lens` tokens for `workload`, the pool written with whole
    numbers for the gather. Plain data, as in the gather's other checks: the candidate's
    prefill and allocator (parts 2 and 1) play no part in part 3's timing."""
    module = submission.module("kv_cache_manager")
    num_blocks = sum(cdiv(seq_len, BLOCK_SIZE) for seq_len in seq_lens)
    manager = module.KVCacheManager(num_blocks, BLOCK_SIZE, HEAD_DIM)
    requests = [module.Request(i, seq_len) for i, seq_len in enumerate(seq_lens)]
    pool_seed, pool = secrets.randbits(32), None
    if workload == "gather_rounds":
        pool = whole_number_pool(pool_seed, num_blocks)
        code = f"whole_number_pool({pool_seed}, {num_blocks})"
        manager.ref("physical_kv_cache")[...] = Shown(pool, code)
    return LongRequests(workload, manager, requests, seq_lens, rounds, pool_seed, pool)


def timed(setup: LongRequests) -> Timed:
    """The workload on `setup`, its seed drawn for each call, its sums checked; where it raises
    or its sums are wrong, the counterexample runs it once."""
    transcript = transcript_of(setup.manager)

    def run(seed: int) -> object:
        try:
            return setup.manager.workload(setup.workload, setup.requests, seed, setup.rounds)
        except RemoteError:
            script(transcript, setup, seed)
            transcript.fail_in(run_code(setup, seed))
            raise

    def verify(seed: int, sums: object) -> None:
        expected = setup.expected(seed)
        if sums != expected:
            script(transcript, setup, seed)
            transcript.fail(run_code(setup, seed), repr(expected))
            got = str(sums)[:200]
            misstep = (
                f"its signed sums over the rows gathered, round by round, are {got}, not {expected}"
                if setup.pool is not None
                else f"its signed sums over the slots, round by round, are {got}, not {expected}"
            )
            raise AssertionError(f"the timed work was not done as asked: {misstep}")

    return Timed(sandbox_of(setup.manager), lambda: secrets.randbits(32), run, verify)


def script(transcript, setup: LongRequests, seed: int | None = None) -> None:
    """The counterexample: the workload on requests like `setup`'s, and where no `seed` is
    given (a verdict on time), what times it."""
    filled = setup.pool is not None
    replay(
        transcript,
        {"kv_cache_manager": {"KVCacheManager", "Request"}},
        [
            *function_source("shuffle_tables"),
            *function_source(setup.workload),
            *(function_source("whole_number_pool", THIS_FILE) if filled else ()),
            *long_requests_source(filled),
            *(LEAST_SECONDS if seed is None else ()),
        ],
        [f"manager, requests = long_requests({list(setup.seq_lens)}, {setup.pool_seed})"],
    )
    transcript.needs("import torch")


def run_code(setup: LongRequests, seed: int) -> str:
    return f"{setup.workload}(manager, requests, {seed}, {setup.rounds})"


def compare(submission, reference, benchmark, profile, limit: float, *workload: object) -> dict:
    """Least CPU seconds per call of the candidate's workload and the reference's, measured
    again before a ratio over `limit` stands; the counterexample of the verdict written."""
    candidate = long_requests(submission, *workload)
    calls = {"reference": timed(long_requests(reference, *workload)), "candidate": timed(candidate)}
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds,
        fails=lambda best: best["candidate"] > limit * best["reference"],
    )  # fmt: skip
    transcript = submission.transcript
    transcript.reset()
    if not implausible(best["candidate"] / best["reference"]):  # flagged: no script shows it
        script(transcript, candidate)
        seconds = f"least_seconds(lambda: {run_code(candidate, 0)})"
        ends_in_the_time(transcript, seconds, limit, best["reference"])
    return best


@pytest.mark.points(2)
def check_gather_speed(submission, reference, benchmark, profile, record_benchmark):
    workload = ("gather_rounds", SEQ_LENS, 4)
    best = compare(submission, reference, benchmark, profile, GATHER_LIMIT, *workload)
    judge_ratio(
        record_benchmark,
        f"get_physical_cache, {sum(SEQ_LENS):,} tokens in {len(SEQ_LENS)} sequences",
        (best["candidate"], best["reference"]), GATHER_LIMIT, "the gather workload",
        lambda ratio: f"get_physical_cache of {sum(SEQ_LENS):,} tokens takes {ratio:.1f}x the "
        f"reference's time (the limit is {GATHER_LIMIT:.0f}x): gather whole blocks, no Python "
        "loop over tokens",
    )  # fmt: skip


@pytest.mark.points(2)
def check_slot_mapping_speed(submission, reference, benchmark, profile, record_benchmark):
    workload = ("slot_mapping_rounds", LONG_SEQ_LENS, 5)
    best = compare(submission, reference, benchmark, profile, SLOT_MAPPING_LIMIT, *workload)
    judge_ratio(
        record_benchmark,
        f"slot_mapping, {sum(LONG_SEQ_LENS):,} tokens in {len(LONG_SEQ_LENS)} sequences",
        (best["candidate"], best["reference"]), SLOT_MAPPING_LIMIT, "the slot-mapping workload",
        lambda ratio: f"slot_mapping of {sum(LONG_SEQ_LENS):,} tokens takes {ratio:.1f}x the "
        f"reference's time (the limit is {SLOT_MAPPING_LIMIT:.0f}x): compute it with tensor ops "
        "over the whole block table, no Python loop over tokens",
    )  # fmt: skip
