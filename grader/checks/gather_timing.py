"""Part 3's cost rule: the gather and the slot mapping are vectorised, no Python loop over tokens.

The worker runs a fixed workload per call (`worker.gather_rounds`, `worker.slot_mapping_rounds`:
four long, ragged sequences, several rounds) for the candidate and the reference in the same rounds,
timed by each worker's CPU time (`grader.scoring.timing`). A gather that loops over blocks stays
well within its limit; a loop over tokens, in the gather or in the slot mapping, goes well past it
(the figures measured are beside the limits).
"""

import pytest

from grader.checks.support.workloads import (
    LEAST_SECONDS,
    ends_in_the_result,
    ends_in_the_time,
    function_source,
    replay,
)
from grader.sandbox.proxy import RemoteError, sandbox_of
from grader.scoring.timing import Timed, implausible, judge_ratio, time_confirmed
from kernels.reference import cdiv

pytestmark = pytest.mark.part("gather")

BLOCK_SIZE, HEAD_DIM = 16, 16
SEQ_LENS = (8192, 8000, 6001, 5000)
LONG_SEQ_LENS = tuple(
    4 * n for n in SEQ_LENS
)  # the reference's slot mapping costs little per token
GATHER_LIMIT = 15.0  # candidate / reference: a loop over blocks ~4x, over tokens ~70x
SLOT_MAPPING_LIMIT = 8.0  # candidate / reference: a loop over tokens ~20x
# The counterexample's `long_requests`: the same requests, each block table in reverse order.
LONG_REQUESTS = (
    "def long_requests(seq_lens):",
    f"    used = [-(-seq_len // {BLOCK_SIZE}) for seq_len in seq_lens]",
    f"    manager = KVCacheManager(sum(used), {BLOCK_SIZE}, {HEAD_DIM})",
    "    requests, next_block = [], 0",
    "    for i, seq_len in enumerate(seq_lens):",
    "        request = Request(i, seq_len)",
    "        request.block_table = list(range(next_block + used[i] - 1, next_block - 1, -1))",
    "        requests.append(request)",
    "        next_block += used[i]",
    "    return manager, requests",
    "",
)


def long_requests(submission, workload: str, seq_lens: tuple[int, ...], rounds: int) -> Timed:
    """A call of `workload` over requests of `seq_lens` tokens, checking its result. Their block
    tables are given as plain data, as in the gather's other checks: the candidate's prefill and
    allocator (parts 2 and 1) play no part in part 3's timing. Where it raises or gives a wrong
    result, the counterexample runs it once."""
    module = submission.module("kv_cache_manager")
    tables, next_block = [], 0
    for seq_len in seq_lens:
        used = cdiv(seq_len, BLOCK_SIZE)
        tables.append(list(range(next_block + used - 1, next_block - 1, -1)))  # not 0, 1, 2...
        next_block += used
    manager = module.KVCacheManager(next_block, BLOCK_SIZE, HEAD_DIM)
    requests = [module.Request(i, seq_len) for i, seq_len in enumerate(seq_lens)]
    for request, table in zip(requests, tables, strict=True):
        request.block_table = table

    def gather() -> None:
        bumped, shapes = manager.workload(workload, requests, rounds)
        expected = [[n, HEAD_DIM] for n in seq_lens]
        assert shapes == expected, f"get_physical_cache gave shapes {shapes}, not {expected}"
        assert bumped == rounds, "get_physical_cache returned stale rows (a cached result?)"

    def slot_mapping() -> None:
        shapes = manager.workload(workload, requests, rounds)
        expected = [[n] for n in seq_lens]
        assert shapes == expected, f"slot_mapping gave shapes {shapes}, not {expected}"

    def run() -> None:
        try:
            (gather if workload == "gather_rounds" else slot_mapping)()
        except (AssertionError, RemoteError) as error:
            script(submission.transcript, workload, seq_lens)
            shapes = [[n, HEAD_DIM] for n in seq_lens] if workload == "gather_rounds" else None
            expected = repr([float(rounds), shapes] if shapes else [[n] for n in seq_lens])
            ends_in_the_result(submission.transcript, run_code(workload, rounds), expected, error)
            raise

    return Timed(run, sandbox_of(manager))


def script(transcript, workload: str, seq_lens: tuple[int, ...], timed: bool = False) -> None:
    """The counterexample: `workload` on the requests of `seq_lens`, and where it is `timed`,
    what times it."""
    replay(
        transcript,
        {"kv_cache_manager": {"KVCacheManager", "Request"}},
        [
            *function_source(workload),
            *LONG_REQUESTS,
            *(LEAST_SECONDS if timed else ()),
        ],
        [f"manager, requests = long_requests({list(seq_lens)})"],
    )


def run_code(workload: str, rounds: int) -> str:
    return f"{workload}(manager, requests, {rounds})"


def compare(submission, reference, benchmark, profile, limit: float, *workload: object) -> dict:
    """Least CPU seconds per call of the candidate's workload and the reference's, measured
    again before a ratio over `limit` stands; the counterexample of the verdict written."""
    calls = {
        "reference": long_requests(reference, *workload),
        "candidate": long_requests(submission, *workload),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds,
        fails=lambda best: best["candidate"] > limit * best["reference"],
    )  # fmt: skip
    transcript = submission.transcript
    transcript.reset()
    if not implausible(best["candidate"] / best["reference"]):  # flagged: no script shows it
        name, seq_lens, rounds = workload
        script(transcript, name, seq_lens, timed=True)
        seconds = f"least_seconds(lambda: {run_code(name, rounds)})"
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
