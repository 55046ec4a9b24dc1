"""Part 1's cost rule: allocate and free cost O(n), whatever the pool's size.

The worker runs a workload per call (`worker.allocate_free_rounds`: ROUNDS allocations of 1 to
15 blocks, 8 on average, each followed by a free of the blocks the one before got) on a pool that
holds all its blocks but a random half of its upper three quarters, for the candidate and for the
reference in the same rounds, timed by each worker's CPU time (`grader.scoring.timing`). A free
list that costs O(num_blocks) per call (`list.pop(0)`, a scan from block 0) is tens of times
slower on 200 000 blocks than on 1 000, on any machine.

Evidence: the workload returns every id it handed out, and this process checks them against the
pool it set up (`first_misstep`: each allocation got as many ids as it asked, each free at that
moment). The free blocks are drawn once per pool and the sizes afresh for every call, from seeds
of this process (`secrets`): a workload that ran on another pool, or replayed the ids of an
earlier call, fails the check, "the timed work was not done as asked".
"""

import random
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.checks.support.workloads import (
    LEAST_SECONDS,
    ends_in_the_time,
    function_source,
    replay,
)
from grader.sandbox.proxy import Remote, RemoteError, Shown, sandbox_of, transcript_of
from grader.scoring.timing import Timed, implausible, judge_ratio, least, time_confirmed, time_once

pytestmark = pytest.mark.part("allocator")

# ROUNDS makes the reference's workload (a few ms of CPU) some 40 times a request's own cost to
# the worker: a workload replaced by one that does nothing is then flagged as implausibly fast
# (`timing.IMPLAUSIBLE_SPEEDUP`) with a wide margin, should its evidence hold.
ROUNDS = 1000
SMALL_POOL, LARGE_POOL = 1_000, 200_000
SPEED_LIMIT = 5.0  # candidate / reference on the small pool
GROWTH_LIMIT = 3.0  # the candidate's large/small cost over the reference's
HOPELESS = 100.0  # a probe this many times slower than the reference is not timed further
PROBE_ROUNDS = 4
POOLS = {SMALL_POOL: "small", LARGE_POOL: "large"}  # their names in the counterexample
THIS_FILE = Path(__file__)


def free_ids_of(seed, num_blocks):
    """The blocks a pool of `num_blocks` keeps free for the workload, in the order they are
    freed: a random half of the blocks from `num_blocks // 4` up (a scan from block 0 passes a
    quarter of the pool first), drawn from `seed`."""
    return random.Random(seed).sample(range(num_blocks // 4, num_blocks), num_blocks // 2)


def allocation_sizes(seed, rounds):
    """`rounds` (even) allocation sizes from 1 to 15, in pairs that add up to 16, in an order
    drawn from `seed`: every call does the same work, in an order its worker cannot know."""
    draw = random.Random(seed)
    sizes = []
    for _ in range(rounds // 2):
        spread = draw.randrange(8)
        sizes += [8 - spread, 8 + spread]
    draw.shuffle(sizes)
    return sizes


def first_misstep(free, sizes, handed):
    """What is wrong with `handed`, what `allocate_free_rounds(allocator, sizes)` returned on a
    pool whose free blocks are the set `free`: None where each allocation got as many ids as it
    asked, each free at that moment (freed blocks free again)."""
    if not isinstance(handed, list):
        return f"it returned {str(handed)[:40]}, not the list of the ids handed out"
    if len(handed) != sum(sizes):
        return f"it returned {len(handed)} ids, not the {sum(sizes)} the allocations asked for"
    taken, start, previous = set(), 0, []
    for index, size in enumerate(sizes):
        ids = handed[start : start + size]
        start += size
        for block in ids:
            if type(block) is not int or block not in free or block in taken:
                return f"allocation {index} (of {size}) handed out {block!r}, not a free block"
            taken.add(block)
        taken.difference_update(previous)
        previous = ids
    return None


@dataclass
class HeldPool:
    """A candidate's (or the reference's) allocator of `num_blocks` that holds all its blocks
    but `free_ids_of(seed, num_blocks)` for the whole measurement."""

    allocator: Remote
    num_blocks: int
    seed: int
    free: frozenset[int]


def held_pool(submission, num_blocks: int) -> HeldPool:
    """A fresh `HeldPool`: the allocator allocates the whole pool, then frees the blocks drawn
    from a new seed."""
    seed = secrets.randbits(32)
    free_ids = free_ids_of(seed, num_blocks)
    allocator = submission.module("block_allocator").BlockAllocator(num_blocks)
    allocator.allocate(num_blocks)
    allocator.free(Shown(free_ids, f"free_ids_of({seed}, {num_blocks})"))
    return HeldPool(allocator, num_blocks, seed, frozenset(free_ids))


HELD_POOL = (
    "def held_pool(num_blocks, seed):",
    "    allocator = BlockAllocator(num_blocks)",
    "    allocator.allocate(num_blocks)",
    "    allocator.free(free_ids_of(seed, num_blocks))",
    "    return allocator",
    "",
)


def script(transcript, pools: list[HeldPool], sizes_seed: int, rounds: int, timed: bool) -> None:
    """The counterexample: the workload and the check's plain functions, each of `pools` set up
    as the check set it up, the sizes drawn from `sizes_seed`, and where it is `timed`, what
    times the workload."""
    replay(
        transcript,
        {"block_allocator": {"BlockAllocator"}},
        [
            *function_source("allocate_free_rounds"),
            *function_source("free_ids_of", THIS_FILE),
            *HELD_POOL,
            *function_source("allocation_sizes", THIS_FILE),
            *(() if timed else function_source("first_misstep", THIS_FILE)),
            *(LEAST_SECONDS if timed else ()),
        ],
        [
            *(
                f"{POOLS[pool.num_blocks]} = held_pool({pool.num_blocks}, {pool.seed})"
                for pool in pools
            ),
            f"sizes = allocation_sizes({sizes_seed}, {rounds})",
        ],
    )
    transcript.needs("import random")


def run_code(pool: HeldPool) -> str:
    return f"allocate_free_rounds({POOLS[pool.num_blocks]}, sizes)"


def seconds_code(pool: HeldPool) -> str:
    return f"least_seconds(lambda: {run_code(pool)})"


def workload(pool: HeldPool, rounds: int = ROUNDS) -> Timed:
    """The workload on `pool`, its sizes drawn for each call, its evidence checked; where it
    raises or its evidence is wrong, the counterexample runs it once."""
    transcript = transcript_of(pool.allocator)

    def ask() -> tuple[int, list[int]]:
        seed = secrets.randbits(32)
        return seed, allocation_sizes(seed, rounds)

    def run(asked: tuple[int, list[int]]) -> object:
        seed, sizes = asked
        try:
            return pool.allocator.workload("allocate_free_rounds", sizes)
        except RemoteError:
            script(transcript, [pool], seed, rounds, timed=False)
            transcript.fail_in(run_code(pool))
            raise

    def verify(asked: tuple[int, list[int]], handed: object) -> None:
        seed, sizes = asked
        misstep = first_misstep(pool.free, sizes, handed)
        if misstep is not None:
            script(transcript, [pool], seed, rounds, timed=False)
            free = f"set(free_ids_of({pool.seed}, {pool.num_blocks}))"
            transcript.fail(f"first_misstep({free}, sizes, {run_code(pool)})", "None")
            raise AssertionError(f"the timed work was not done as asked: {misstep}")

    return Timed(sandbox_of(pool.allocator), ask, run, verify)


@pytest.mark.points(2)
def check_allocate_and_free_speed(submission, reference, benchmark, profile, record_benchmark):
    calls = {
        "reference": workload(held_pool(reference, SMALL_POOL)),
        "candidate": workload(small := held_pool(submission, SMALL_POOL)),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds,
        fails=lambda best: best["candidate"] > SPEED_LIMIT * best["reference"],
    )  # fmt: skip
    speed = best["candidate"] / best["reference"]
    submission.transcript.reset()
    if not implausible(speed):  # flagged for review, which no script shows
        script(submission.transcript, [small], 0, ROUNDS, timed=True)
        seconds = seconds_code(small)
        ends_in_the_time(submission.transcript, seconds, SPEED_LIMIT, best["reference"])
    judge_ratio(
        record_benchmark, f"allocate/free, {SMALL_POOL:,}-block pool",
        (best["candidate"], best["reference"]), SPEED_LIMIT, "the allocate/free workload",
        lambda ratio: f"{ROUNDS:,} allocations of 1 to 15 blocks and their frees, on a "
        f"{SMALL_POOL:,}-block pool, take {ratio:.1f}x the reference's time (the limit is "
        f"{SPEED_LIMIT:.0f}x)",
    )  # fmt: skip


@pytest.mark.points(3)
def check_cost_does_not_grow_with_the_pool(
    submission, reference, benchmark, profile, record_benchmark
):
    large = held_pool(submission, LARGE_POOL)
    reference_large = held_pool(reference, LARGE_POOL)
    probes = {"c": workload(large, PROBE_ROUNDS), "r": workload(reference_large, PROBE_ROUNDS)}
    probe = time_once(probes)
    if probe["c"] > HOPELESS * probe["r"]:  # confirmed before it stands, like every verdict
        probe = least([probe, time_once(probes)])
    if probe["c"] > HOPELESS * probe["r"]:
        script(submission.transcript, [large], 0, PROBE_ROUNDS, timed=True)
        ends_in_the_time(submission.transcript, seconds_code(large), HOPELESS, probe["r"])
    assert probe["c"] <= HOPELESS * probe["r"], (
        f"allocations and frees on a {LARGE_POOL:,}-block pool take over {HOPELESS:.0f}x the "
        "reference's time: the cost must not depend on num_blocks"
    )
    small = held_pool(submission, SMALL_POOL)
    calls = {
        "candidate small": workload(small),
        "reference large": workload(reference_large),
        "reference small": workload(held_pool(reference, SMALL_POOL)),
        "candidate large": workload(large),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds, lambda best: growth_ratio(best) > GROWTH_LIMIT
    )
    growth = best["candidate large"] / best["candidate small"]
    reference_growth = best["reference large"] / best["reference small"]
    submission.transcript.reset()
    if not implausible(best["candidate large"] / best["reference large"]):  # as above
        script(submission.transcript, [small, large], 0, ROUNDS, timed=True)
        seconds = f"{seconds_code(large)} / {seconds_code(small)}"
        ends_in_the_time(submission.transcript, seconds, GROWTH_LIMIT, reference_growth)
    name = (
        f"allocate/free cost growth from {SMALL_POOL:,} to {LARGE_POOL:,} blocks "
        "(ratio: the candidate's growth over the reference's)"
    )
    judge_ratio(
        record_benchmark, name, (best["candidate large"], best["reference large"]),
        GROWTH_LIMIT, "the allocate/free workload",
        lambda _: f"allocations and frees cost {growth:.1f}x more on {LARGE_POOL:,} blocks than "
        f"on {SMALL_POOL:,} (the reference: {reference_growth:.1f}x): the cost must not depend "
        "on num_blocks (a list.pop(0) or a scan over the pool?)",
        ratio=growth_ratio(best),
    )  # fmt: skip


def growth_ratio(best: dict[str, float]) -> float:
    """The candidate's cost growth from the small pool to the large one, over the reference's."""
    growth = best["candidate large"] / best["candidate small"]
    return growth / (best["reference large"] / best["reference small"])
