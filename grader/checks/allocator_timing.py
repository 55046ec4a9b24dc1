"""Part 1's cost rule: allocate and free cost O(n), whatever the pool's size.

The worker runs a fixed workload per call (`worker.allocate_free_rounds`: allocate 8 blocks and
free them, ROUNDS times) on a pool whose other half is held, for the candidate and for the
reference in the same rounds, timed by each worker's CPU time (`grader.scoring.timing`). A free list
that costs O(num_blocks) per call (`list.pop(0)`, a scan from block 0) is tens of times slower
on 200 000 blocks than on 1 000, on any machine.
"""

import pytest

from grader.checks.support.expect import plain_int
from grader.checks.support.workloads import (
    LEAST_SECONDS,
    ends_in_the_result,
    ends_in_the_time,
    function_source,
    replay,
)
from grader.sandbox.proxy import RemoteError, sandbox_of, transcript_of
from grader.scoring.timing import Timed, implausible, judge_ratio, least, time_confirmed, time_once

pytestmark = pytest.mark.part("allocator")

# ROUNDS makes the reference's workload (about 4 ms of CPU) some 40 times a request's own cost to
# the worker: a workload replaced by one that does nothing is then flagged as implausibly fast
# (`timing.IMPLAUSIBLE_SPEEDUP`) with a wide margin. At 300 rounds it was only about ten times
# faster, and under load sometimes not flagged.
BATCH, ROUNDS = 8, 1000
SMALL_POOL, LARGE_POOL = 1_000, 200_000
SPEED_LIMIT = 5.0  # candidate / reference on the small pool
GROWTH_LIMIT = 3.0  # the candidate's large/small cost over the reference's
HOPELESS = 100.0  # a probe this many times slower than the reference is not timed further
PROBE_ROUNDS = 4
POOLS = {SMALL_POOL: "small", LARGE_POOL: "large"}  # their names in the counterexample
HALF_HELD_POOL = (
    "def half_held_pool(num_blocks):",
    "    allocator = BlockAllocator(num_blocks)",
    "    allocator.allocate(num_blocks // 2)",
    "    return allocator",
    "",
)


def half_held_pool(submission, num_blocks: int):
    """An allocator of `num_blocks` whose first half is held for the whole measurement."""
    allocator = submission.module("block_allocator").BlockAllocator(num_blocks)
    allocator.allocate(num_blocks // 2)
    return allocator


def script(transcript, *pools: int, timed: bool = True) -> None:
    """The counterexample: the workload, a half-held allocator of each of `pools`, and where
    it is `timed`, what times the workload."""
    replay(
        transcript,
        {"block_allocator": {"BlockAllocator"}},
        [
            *function_source("allocate_free_rounds"),
            *HALF_HELD_POOL,
            *(LEAST_SECONDS if timed else ()),
        ],
        [f"{POOLS[pool]} = half_held_pool({pool})" for pool in pools],
    )


def run_code(pool: int, rounds: int = ROUNDS) -> str:
    return f"allocate_free_rounds({POOLS[pool]}, {BATCH}, {rounds})"


def seconds_code(pool: int, rounds: int = ROUNDS) -> str:
    return f"least_seconds(lambda: {run_code(pool, rounds)})"


def workload(allocator, pool: int, rounds: int = ROUNDS) -> Timed:
    """The workload on `allocator`, a half-held pool of `pool` blocks; where it raises or hands
    out the wrong count, the counterexample runs it once."""
    transcript = transcript_of(allocator)

    def run() -> None:
        try:
            handed = allocator.workload("allocate_free_rounds", BATCH, rounds)
            assert plain_int(transcript, handed, "the allocate/free workload") == BATCH * rounds
        except (AssertionError, RemoteError) as error:
            script(transcript, pool, timed=False)
            ends_in_the_result(transcript, run_code(pool, rounds), str(BATCH * rounds), error)
            raise

    return Timed(run, sandbox_of(allocator))


@pytest.mark.points(2)
def check_allocate_and_free_speed(submission, reference, benchmark, profile, record_benchmark):
    calls = {
        "reference": workload(half_held_pool(reference, SMALL_POOL), SMALL_POOL),
        "candidate": workload(half_held_pool(submission, SMALL_POOL), SMALL_POOL),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds,
        fails=lambda best: best["candidate"] > SPEED_LIMIT * best["reference"],
    )  # fmt: skip
    ends_in_speed(submission.transcript, best["candidate"] / best["reference"], best["reference"])
    judge_ratio(
        record_benchmark, f"allocate/free, {SMALL_POOL:,}-block pool",
        (best["candidate"], best["reference"]), SPEED_LIMIT, "the allocate/free workload",
        lambda ratio: f"allocate(8) + free on a {SMALL_POOL:,}-block pool takes {ratio:.1f}x "
        f"the reference's time (the limit is {SPEED_LIMIT:.0f}x)",
    )  # fmt: skip


def ends_in_speed(transcript, speed: float, reference_seconds: float) -> None:
    """The counterexample of a verdict on the small pool's time (none where the candidate is
    implausibly fast: flagged for review, which no script shows)."""
    transcript.reset()
    if not implausible(speed):
        script(transcript, SMALL_POOL)
        ends_in_the_time(transcript, seconds_code(SMALL_POOL), SPEED_LIMIT, reference_seconds)


@pytest.mark.points(3)
def check_cost_does_not_grow_with_the_pool(
    submission, reference, benchmark, profile, record_benchmark
):
    large = half_held_pool(submission, LARGE_POOL)
    reference_large = half_held_pool(reference, LARGE_POOL)
    probes = {
        "c": workload(large, LARGE_POOL, PROBE_ROUNDS),
        "r": workload(reference_large, LARGE_POOL, PROBE_ROUNDS),
    }
    probe = time_once(probes)
    if probe["c"] > HOPELESS * probe["r"]:  # confirmed before it stands, like every verdict
        probe = least([probe, time_once(probes)])
    if probe["c"] > HOPELESS * probe["r"]:
        script(submission.transcript, LARGE_POOL)
        seconds = seconds_code(LARGE_POOL, PROBE_ROUNDS)
        ends_in_the_time(submission.transcript, seconds, HOPELESS, probe["r"])
    assert probe["c"] <= HOPELESS * probe["r"], (
        f"allocate(8) + free on a {LARGE_POOL:,}-block pool takes over {HOPELESS:.0f}x the "
        "reference's time: the cost must not depend on num_blocks"
    )
    calls = {
        "candidate small": workload(half_held_pool(submission, SMALL_POOL), SMALL_POOL),
        "reference large": workload(reference_large, LARGE_POOL),
        "reference small": workload(half_held_pool(reference, SMALL_POOL), SMALL_POOL),
        "candidate large": workload(large, LARGE_POOL),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds, lambda best: growth_ratio(best) > GROWTH_LIMIT
    )
    growth = best["candidate large"] / best["candidate small"]
    reference_growth = best["reference large"] / best["reference small"]
    ends_in_growth(submission.transcript, best)
    name = (
        f"allocate/free cost growth from {SMALL_POOL:,} to {LARGE_POOL:,} blocks "
        "(ratio: the candidate's growth over the reference's)"
    )
    judge_ratio(
        record_benchmark, name, (best["candidate large"], best["reference large"]),
        GROWTH_LIMIT, "the allocate/free workload",
        lambda _: f"allocate(8) + free costs {growth:.1f}x more on {LARGE_POOL:,} blocks than "
        f"on {SMALL_POOL:,} (the reference: {reference_growth:.1f}x): the cost must not depend "
        "on num_blocks (a list.pop(0) or a scan over the pool?)",
        ratio=growth_ratio(best),
    )  # fmt: skip


def ends_in_growth(transcript, best: dict[str, float]) -> None:
    """The counterexample of the verdict on the cost's growth (none where the candidate is
    implausibly fast on the large pool: flagged for review, which no script shows)."""
    transcript.reset()
    if not implausible(best["candidate large"] / best["reference large"]):
        script(transcript, SMALL_POOL, LARGE_POOL)
        growth = f"{seconds_code(LARGE_POOL)} / {seconds_code(SMALL_POOL)}"
        reference = best["reference large"] / best["reference small"]
        ends_in_the_time(transcript, growth, GROWTH_LIMIT, reference)


def growth_ratio(best: dict[str, float]) -> float:
    """The candidate's cost growth from the small pool to the large one, over the reference's."""
    growth = best["candidate large"] / best["candidate small"]
    return growth / (best["reference large"] / best["reference small"])
