"""Part 3's cost rule: the gather and the slot mapping are vectorised, no Python loop over tokens.

The worker runs a fixed workload per call (`worker.gather_rounds`, `worker.slot_mapping_rounds`:
four long, ragged sequences, several rounds) for the candidate and the reference in the same
rounds. A gather that loops over blocks stays well within its limit; a loop over tokens, in the
gather or in the slot mapping, goes well past it (the figures measured are beside the limits).
"""

import pytest

from grader.timing import assert_plausible, time_interleaved

pytestmark = pytest.mark.part("gather")

BLOCK_SIZE, HEAD_DIM = 16, 16
SEQ_LENS = (8192, 8000, 6001, 5000)
LONG_SEQ_LENS = tuple(
    4 * n for n in SEQ_LENS
)  # the reference's slot mapping costs little per token
GATHER_LIMIT = 15.0  # candidate / reference: a loop over blocks ~4x, over tokens ~70x
SLOT_MAPPING_LIMIT = 8.0  # candidate / reference: a loop over tokens ~20x


def long_requests(submission, workload: str, seq_lens: tuple[int, ...], rounds: int):
    """A call of `workload` over prefilled requests of `seq_lens` tokens, checking its result."""
    module = submission.module("kv_cache_manager")
    num_blocks = sum(-(-seq_len // BLOCK_SIZE) for seq_len in seq_lens)
    manager = module.KVCacheManager(num_blocks, BLOCK_SIZE, HEAD_DIM)
    requests = [module.Request(i, seq_len) for i, seq_len in enumerate(seq_lens)]
    for request in requests:
        manager.allocate_for_prefill(request)

    def gather() -> None:
        bumped, shapes = manager.workload(workload, requests, rounds)
        expected = [[n, HEAD_DIM] for n in seq_lens]
        assert shapes == expected, f"get_physical_cache gave shapes {shapes}, not {expected}"
        assert bumped == rounds, "get_physical_cache returned stale rows (a cached result?)"

    def slot_mapping() -> None:
        shapes = manager.workload(workload, requests, rounds)
        expected = [[n] for n in seq_lens]
        assert shapes == expected, f"slot_mapping gave shapes {shapes}, not {expected}"

    return gather if workload == "gather_rounds" else slot_mapping


def compare(submission, reference, benchmark, profile, *workload: object) -> dict:
    """Best seconds per call of the candidate's workload ("target") and the reference's."""
    return time_interleaved(
        benchmark,
        long_requests(submission, *workload),
        {"reference": long_requests(reference, *workload)},
        profile.timing_rounds,
    )


@pytest.mark.points(2)
def check_gather_speed(submission, reference, benchmark, profile, record_benchmark):
    best = compare(submission, reference, benchmark, profile, "gather_rounds", SEQ_LENS, 4)
    ratio = best["target"] / best["reference"]
    name = f"get_physical_cache, {sum(SEQ_LENS):,} tokens in {len(SEQ_LENS)} sequences"
    record_benchmark(name, best["target"], best["reference"], ratio, GATHER_LIMIT)
    assert_plausible(ratio, "the gather workload")
    assert ratio <= GATHER_LIMIT, (
        f"get_physical_cache of {sum(SEQ_LENS):,} tokens takes {ratio:.1f}x the reference's "
        f"time (the limit is {GATHER_LIMIT:.0f}x): gather whole blocks, no Python loop over tokens"
    )


@pytest.mark.points(2)
def check_slot_mapping_speed(submission, reference, benchmark, profile, record_benchmark):
    workload = ("slot_mapping_rounds", LONG_SEQ_LENS, 5)
    best = compare(submission, reference, benchmark, profile, *workload)
    ratio = best["target"] / best["reference"]
    name = f"slot_mapping, {sum(LONG_SEQ_LENS):,} tokens in {len(LONG_SEQ_LENS)} sequences"
    record_benchmark(name, best["target"], best["reference"], ratio, SLOT_MAPPING_LIMIT)
    assert_plausible(ratio, "the slot-mapping workload")
    assert ratio <= SLOT_MAPPING_LIMIT, (
        f"slot_mapping of {sum(LONG_SEQ_LENS):,} tokens takes {ratio:.1f}x the reference's time "
        f"(the limit is {SLOT_MAPPING_LIMIT:.0f}x): compute it with tensor ops over the whole "
        "block table, no Python loop over tokens"
    )
