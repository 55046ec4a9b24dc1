"""Part 3's cost rule: the gather and the slot mapping are vectorised, no Python loop over tokens
(nor, in the slot mapping, over blocks).

The worker runs a workload per call (`workloads.gather_rounds`, `workloads.slot_mapping_rounds`:
four long, ragged sequences, several rounds, each on fresh block tables) for the candidate and the
reference in the same rounds, timed by each worker's CPU time (`grader.scoring.timing`). A gather
that loops over blocks stays well within its limit; a loop over tokens, in the gather or in the
slot mapping, or over blocks in the slot mapping, goes well past it (the figures measured are
beside the limits).

Evidence: each round's block tables, and the weights of its sums, are drawn in the worker from a
seed this process draws afresh for every call (`secrets`); the workload returns the shapes of the
results and, per round, a weighted sum over them: of every token and lane of the rows gathered
(the pool holds whole numbers this process wrote, so the sums are exact), or of a number mixed
from every token's slot. This process computes the same from what it asked
(`LongRequests.expected`): a workload that gathered other rows, fewer tokens, or an earlier
round's result fails the check, "the timed work was not done as asked". Wrong sums that the
manager's own methods give again, called from this process, are its results, not other work
(`timing.ResultsDiffer`).
"""

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from grader.checks.support.workloads import (
    CALLS_BEFORE,
    LEAST_SECONDS,
    called_here,
    ends_in_the_time,
    function_source,
    replay,
)
from grader.said import said
from grader.sandbox.proxy import Remote, RemoteError, sandbox_of, transcript_of
from grader.sandbox.transcript import Shown, commented
from grader.scoring.timing import (
    Timed,
    clearly_passes,
    implausible,
    judge_ratio,
    speed_ratio,
    time_confirmed,
)
from kernels.reference import cdiv

pytestmark = pytest.mark.part("gather")

BLOCK_SIZE, HEAD_DIM = 16, 16
SEQ_LENS = (8192, 8000, 6001, 5000)
LONG_SEQ_LENS = tuple(
    4 * n for n in SEQ_LENS
)  # the reference's slot mapping costs little per token
GATHER_LIMIT = 15.0  # candidate / reference: a loop over blocks ~3x, over tokens ~70x
# candidate / reference: vectorised by position ~2x, a loop over blocks ~10x, over tokens ~12x
SLOT_MAPPING_LIMIT = 5.0
THIS_FILE = Path(__file__)


def whole_number_pool(seed, num_blocks, block_size, head_dim):
    """A pool of whole numbers from -4 to 4, drawn from `seed`: any sum of its rows weighted by
    +-1 is exact in float32 (well under 2**24), whatever order it is added in."""
    generator = torch.Generator().manual_seed(seed)
    shape = (num_blocks, block_size, head_dim)
    return torch.randint(-4, 5, shape, generator=generator).float()


def signs(shape: tuple, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """`workloads.signs`: +1 and -1, drawn as the worker draws them."""
    return torch.randint(0, 2, shape, generator=generator, dtype=dtype) * 2 - 1


def mixed(slots: torch.Tensor) -> torch.Tensor:
    """`workloads.mixed`: a whole number per slot, from all of its bits, as the worker mixes it."""
    x = slots.to(torch.int64) * -0x61C8864680B583EB
    return ((x ^ (x >> 29)) & 0xFFFFF).to(torch.float64)


def block_tables(
    num_blocks: int, seq_lens: tuple[int, ...], generator: torch.Generator
) -> list[torch.Tensor]:
    """One round's block tables, drawn as `workloads.shuffle_tables` draws them."""
    order, start, tables = torch.randperm(num_blocks, generator=generator), 0, []
    for seq_len in seq_lens:
        used = cdiv(seq_len, BLOCK_SIZE)
        tables.append(order[start : start + used])
        start += used
    return tables


def gathered(pool: torch.Tensor, blocks: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The first `seq_len` rows of `pool`'s `blocks`, in their order."""
    return pool[blocks].flatten(0, 1)[:seq_len]


@dataclass
class LongRequests:
    """A manager of `num_blocks` and requests of `seq_lens` tokens for `workload` (`rounds` a
    call), this process's copy of the pool it wrote (the gather's; None: left as made), and the
    seeds of the calls so far."""

    workload: str
    manager: Remote
    requests: list[Remote]
    seq_lens: tuple[int, ...]
    rounds: int
    num_blocks: int
    pool_seed: int
    pool: torch.Tensor | None
    remake: Callable[[], "LongRequests"]  # the same manager and requests made again
    asked: list[int] = field(default_factory=list)

    def expected(self, seed: int) -> list:
        """What the workload must return for the call that asked with `seed`: the same draws,
        in the same order (`workloads.gather_rounds`, `workloads.slot_mapping_rounds`)."""
        generator, num_blocks = torch.Generator().manual_seed(seed), self.num_blocks
        if self.pool is not None:
            pool = self.pool
            weights = [signs((n, HEAD_DIM), generator, torch.float32) for n in self.seq_lens]
        else:  # a token's slot is what a gather returns from a pool of each slot's own number
            pool = torch.arange(num_blocks * BLOCK_SIZE).view(num_blocks, BLOCK_SIZE)
            weights = [signs((n,), generator, torch.float64) for n in self.seq_lens]
        sums = []
        for _ in range(self.rounds):
            tables = block_tables(num_blocks, self.seq_lens, generator)
            total = 0.0
            for weight, blocks in zip(weights, tables, strict=True):
                rows = gathered(pool, blocks, len(weight))
                if self.pool is not None:
                    total += float((weight * rows).sum())
                else:
                    total += float(mixed(rows) @ weight)
            sums.append(total)
        return [[list(weight.shape) for weight in weights], sums]


def long_requests(
    submission, workload: str, seq_lens: tuple[int, ...], rounds: int, pool_seed: int
) -> LongRequests:
    """A manager and requests of `seq_lens` tokens for `workload`, the gather's pool written
    with whole numbers drawn from `pool_seed`. Plain data: the workload gives the block tables,
    and the candidate's prefill and allocator (parts 2 and 1) play no part in part 3's timing."""
    module = submission.module("kv_cache_manager")
    num_blocks = sum(cdiv(seq_len, BLOCK_SIZE) for seq_len in seq_lens)
    manager = module.KVCacheManager(num_blocks, BLOCK_SIZE, HEAD_DIM)
    requests = [module.Request(i, seq_len) for i, seq_len in enumerate(seq_lens)]
    pool = None
    if workload == "gather_rounds":
        pool = whole_number_pool(pool_seed, num_blocks, BLOCK_SIZE, HEAD_DIM)
        transcript = submission.transcript
        for line in function_source("whole_number_pool", THIS_FILE):
            transcript.define(line)
        code = f"whole_number_pool({pool_seed}, {num_blocks}, {BLOCK_SIZE}, {HEAD_DIM})"
        manager.ref("physical_kv_cache")[...] = Shown(pool, code)

    def remake() -> LongRequests:
        return long_requests(submission, workload, seq_lens, rounds, pool_seed)

    return LongRequests(
        workload, manager, requests, seq_lens, rounds, num_blocks, pool_seed, pool, remake
    )


def timed(setup: LongRequests) -> Timed:
    """The workload on `setup`, its seed drawn for each call, its evidence checked; where it
    raises or its evidence is wrong, the counterexample reruns the calls up to that one."""
    transcript = transcript_of(setup.manager)

    def run(seed: int) -> object:
        setup.asked.append(seed)
        try:
            return setup.manager.workload(setup.workload, setup.requests, seed, setup.rounds)
        except RemoteError:
            script(transcript, setup, setup.asked)
            transcript.fail_in(run_code(setup, seed))
            raise

    def verify(seed: int, evidence: object) -> str | None:
        expected = setup.expected(seed)
        if evidence == expected:
            return None
        script(transcript, setup, setup.asked)
        transcript.fail(run_code(setup, seed), repr(expected))
        return misstep(setup.workload, evidence, expected)

    def again(seed: int) -> object:
        with transcript.aside():
            made = setup.remake()
            return called_here(setup.workload, made.manager, made.requests, seed, setup.rounds)

    return Timed(sandbox_of(setup.manager), lambda: secrets.randbits(32), run, verify, again)


def misstep(workload: str, evidence: object, expected: list) -> str:
    """What is wrong with `evidence`, what a call of `workload` returned where `expected` (its
    shapes and sums) was due."""
    pair = isinstance(evidence, list) and len(evidence) == 2
    got_shapes, got_sums = evidence if pair else (evidence, None)
    due_shapes, due_sums = expected
    shapes, sums, gather = str(got_shapes)[:200], str(got_sums)[:200], workload == "gather_rounds"
    if got_shapes != due_shapes:
        if gather:
            return said(
                "get_physical_cache gave shapes {shapes}, not {expected}",
                shapes=shapes,
                expected=due_shapes,
            )
        return said(
            "slot_mapping gave shapes {shapes}, not {expected}", shapes=shapes, expected=due_shapes
        )
    if gather:
        return said(
            "its weighted sums over the rows gathered, round by round, are {got}, not {expected}",
            got=sums,
            expected=due_sums,
        )
    return said(
        "its weighted sums over the slots, round by round, are {got}, not {expected}",
        got=sums,
        expected=due_sums,
    )


def script(transcript, setup: LongRequests, asked: list[int] | None = None) -> None:
    """The counterexample: the workload on requests like `setup`'s, and the calls `asked`
    before the last; without `asked` (a verdict on time: any seeds do), what times it."""
    gather = setup.workload == "gather_rounds"
    pool_seed = setup.pool_seed if asked else 0
    replay(
        transcript,
        {"kv_cache_manager": {"KVCacheManager", "Request"}},
        [
            *function_source("shuffle_tables"),
            *function_source("signs"),
            *function_source("weighed_rounds"),
            *(() if gather else function_source("mixed")),
            *function_source(setup.workload),
            *(function_source("whole_number_pool", THIS_FILE) if gather else ()),
            *long_requests_source(gather),
            *(() if asked else LEAST_SECONDS),
        ],
        [
            f"manager, requests = long_requests({list(setup.seq_lens)}"
            + (f", {pool_seed})" if gather else ")"),
            *earlier_calls(f"{setup.workload}(manager, requests, seed, {setup.rounds})", asked),
        ],
    )
    transcript.needs("import torch")


def long_requests_source(gather: bool) -> tuple[str, ...]:
    """The counterexample's `long_requests`: the manager, its pool written for the gather, and
    the requests (their block tables are the workload's to give)."""
    return (
        f"def long_requests(seq_lens{', pool_seed' if gather else ''}):",
        f"    num_blocks = sum(-(-seq_len // {BLOCK_SIZE}) for seq_len in seq_lens)",
        f"    manager = KVCacheManager(num_blocks, {BLOCK_SIZE}, {HEAD_DIM})",
        *(
            [
                "    manager.physical_kv_cache[...] = whole_number_pool("
                f"pool_seed, num_blocks, {BLOCK_SIZE}, {HEAD_DIM})"
            ]
            if gather
            else []
        ),
        "    return manager, [Request(i, seq_len) for i, seq_len in enumerate(seq_lens)]",
        "",
    )


def earlier_calls(call: str, asked: list[int] | None) -> list[str]:
    """A loop that makes `call` (code that reads `seed`) with each seed `asked` before the last,
    as the grading did: the objects it leaves are those the last call found."""
    if not asked or len(asked) < 2:
        return []
    return [commented(f"for seed in {asked[:-1]}:", CALLS_BEFORE), f"    {call}", ""]


def run_code(setup: LongRequests, seed: int) -> str:
    return f"{setup.workload}(manager, requests, {seed}, {setup.rounds})"


def compare(submission, reference, benchmark, profile, limit: float, *workload: object) -> dict:
    """Least CPU seconds per call of the candidate's workload and the reference's, measured
    again before a ratio over `limit` stands, and no further once it is clearly within it
    (`timing.clearly_passes`); the counterexample of the verdict written."""
    pool_seed = secrets.randbits(32)  # the same pool for both
    candidate = long_requests(submission, *workload, pool_seed)
    reference_requests = long_requests(reference, *workload, pool_seed)
    calls = {"reference": timed(reference_requests), "candidate": timed(candidate)}
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds,
        fails=lambda best: best["candidate"] > limit * best["reference"],
        clear=lambda best: clearly_passes(best, speed_ratio, limit),
    )  # fmt: skip
    transcript = submission.transcript
    transcript.reset()
    if not implausible(best["candidate"] / best["reference"]):  # flagged: no script shows it
        script(transcript, candidate)
        seconds = f"least_seconds(lambda: {run_code(candidate, 0)})"
        ends_in_the_time(transcript, seconds, limit, best["reference"])
    return best


@pytest.mark.points(2)
@pytest.mark.severity("speed")
def check_gather_speed(submission, reference, benchmark, profile, record_benchmark):
    workload = ("gather_rounds", SEQ_LENS, 4)
    best = compare(submission, reference, benchmark, profile, GATHER_LIMIT, *workload)
    judge_ratio(
        record_benchmark,
        said(
            "get_physical_cache, {tokens} tokens in {count} sequences",
            tokens=f"{sum(SEQ_LENS):,}",
            count=len(SEQ_LENS),
        ),
        (best["candidate"], best["reference"]),
        GATHER_LIMIT,
        said("the gather workload"),
        lambda ratio: said(
            "get_physical_cache of {tokens} tokens takes {ratio}x the reference's time "
            "(the limit is {limit}x): gather whole blocks, no Python loop over tokens",
            tokens=f"{sum(SEQ_LENS):,}",
            ratio=f"{ratio:.1f}",
            limit=f"{GATHER_LIMIT:.0f}",
        ),
    )


@pytest.mark.points(2)
@pytest.mark.severity("speed")
def check_slot_mapping_speed(submission, reference, benchmark, profile, record_benchmark):
    workload = ("slot_mapping_rounds", LONG_SEQ_LENS, 5)
    best = compare(submission, reference, benchmark, profile, SLOT_MAPPING_LIMIT, *workload)
    judge_ratio(
        record_benchmark,
        said(
            "slot_mapping, {tokens} tokens in {count} sequences",
            tokens=f"{sum(LONG_SEQ_LENS):,}",
            count=len(LONG_SEQ_LENS),
        ),
        (best["candidate"], best["reference"]),
        SLOT_MAPPING_LIMIT,
        said("the slot-mapping workload"),
        lambda ratio: said(
            "slot_mapping of {tokens} tokens takes {ratio}x the reference's time (the "
            "limit is {limit}x): compute it with tensor ops over the whole block table, "
            "no Python loop over tokens or blocks",
            tokens=f"{sum(LONG_SEQ_LENS):,}",
            ratio=f"{ratio:.1f}",
            limit=f"{SLOT_MAPPING_LIMIT:.0f}",
        ),
    )
