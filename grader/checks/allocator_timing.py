"""Part 1's cost rule: allocate and free cost O(n), whatever the pool's size.

The worker runs a workload per call (`workloads.allocate_free_rounds`: ROUNDS allocations of 1 to
15 blocks, 8 on average, each followed by a free of the blocks the one before got) on pools in
two states (`STATES`): nearly full, FEW blocks free anywhere in it, and nearly empty, FEW blocks
held. The candidate and the reference run in the same rounds, timed by each worker's CPU time
(`grader.scoring.timing`), and a check is judged on the state where the candidate does worst. A
cost that grows with the free blocks (`list.pop(0)`) shows on the nearly empty pool, one that
grows with the held blocks, or with the pool over the free blocks (a scan from block 0 or from a
cursor, in Python, for the next free block), on the nearly full one: tens of times slower on
200 000 blocks than on 1 000, on any machine. Before the pools are made, a probe on a pool whose
first half the allocator took (cheap to make whatever the allocator) stops one that is hopelessly
slow: making a nearly empty pool frees nearly 200 000 blocks.

Evidence: the workload returns the ids each allocation handed out, and this process checks them
against the pool it set up (`first_misstep`: each allocation got as many ids as it asked, each
free at that moment). The free blocks are drawn once per pool and the sizes afresh for every
call, from seeds of this process (`secrets`): a workload that ran on another pool, or replayed
the ids of an earlier call, fails the check, "the timed work was not done as asked". Wrong ids
that the allocator's own methods hand out again, called from this process on the pool made
afresh, are its results, not other work (`timing.ResultsDiffer`).
"""

import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.checks.support.expect import int_list
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
    any_implausible,
    confirmed_probe,
    growth_calls,
    growth_ratio,
    growths,
    judge_states,
    speed_ratio,
    state_timings,
    time_states,
    worst_state,
)

pytestmark = pytest.mark.part("allocator")

# ROUNDS makes the reference's workload (a few ms of CPU) far more than a request's own cost to
# the worker, so that the ratio is the allocator's.
ROUNDS = 500
SMALL_POOL, LARGE_POOL = 1_000, 200_000
FEW = 64  # blocks free in a nearly full pool, held in a nearly empty one: 30 at most are in use
# The states of the measured pools, by their names in the counterexample and in calls' names.
STATES = {"full": said("nearly full"), "empty": said("nearly empty")}
SPEED_LIMIT = 5.0  # candidate / reference on the small pool
GROWTH_LIMIT = 3.0  # the candidate's large/small cost over the reference's
HOPELESS = 100.0  # a probe this many times slower than the reference is not timed further
PROBE_ROUNDS = 4
POOLS = {SMALL_POOL: "small", LARGE_POOL: "large"}  # their names in the counterexample
THIS_FILE = Path(__file__)


def free_ids_of(seed, num_blocks, count):
    """The `count` blocks a pool of `num_blocks` keeps free for the workload, in the order they
    are freed, drawn from `seed` anywhere in the pool: where they are most of it, the others
    are drawn and these are in order (a draw of each would cost a tenth of a second)."""
    draw = random.Random(seed)
    if 2 * count <= num_blocks:
        return draw.sample(range(num_blocks), count)
    held = set(draw.sample(range(num_blocks), num_blocks - count))
    return [block for block in range(num_blocks) if block not in held]


def free_count(state: str, num_blocks: int) -> int:
    """How many blocks a pool of `num_blocks` in `state` keeps free."""
    return FEW if state == "full" else num_blocks - FEW


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
    if not isinstance(handed, list) or len(handed) != len(sizes):
        return said(
            "it returned {value}, not a list of the ids of each allocation", value=str(handed)[:40]
        )
    taken, previous = set(), set()
    for index, (size, ids) in enumerate(zip(sizes, handed, strict=True)):
        if not isinstance(ids, list) or len(ids) != size:
            return said(
                "allocation {index} (of {size}) handed out {ids}",
                index=index,
                size=size,
                ids=str(ids)[:40],
            )
        plain = set(map(type, ids)) <= {int}  # before a set of them: a list is not hashable
        fresh = set(ids) if plain else set()
        if not (plain and len(fresh) == size and fresh <= free and fresh.isdisjoint(taken)):
            block = next(
                block
                for at, block in enumerate(ids)
                if type(block) is not int
                or block not in free
                or block in taken
                or block in ids[:at]
            )
            return said(
                "allocation {index} (of {size}) handed out {block}, not a free block",
                index=index,
                size=size,
                block=f"{block!r}",
            )
        taken |= fresh
        taken -= previous
        previous = fresh
    return None


HELD_POOL = (
    "def held_pool(num_blocks, count, seed):",
    "    allocator = BlockAllocator(num_blocks)",
    "    allocator.allocate(num_blocks)",
    "    free_ids = free_ids_of(seed, num_blocks, count)",
    "    allocator.free(free_ids)",
    "    return allocator, set(free_ids)",
    "",
)
HALF_HELD_POOL = (
    "def half_held_pool(num_blocks):",
    "    allocator = BlockAllocator(num_blocks)",
    "    held = allocator.allocate(num_blocks // 2)",
    "    return allocator, set(range(num_blocks)) - set(held)",
    "",
)


@dataclass
class HeldPool:
    """An allocator of `num_blocks` (the candidate's or the reference's) whose `free` blocks are
    all it has free for the whole measurement: `free_ids_of(seed, num_blocks, ...)` of its
    `state`, or where `seed` is None (the probe's pool) what the allocator left after taking half
    the pool. `asked` holds the seeds of the workload's calls so far."""

    allocator: Remote
    num_blocks: int
    free: frozenset[int]
    seed: int | None
    remake: Callable[[], Remote]  # the same allocator made again
    state: str = ""  # "full" or "empty"; "" for the probe's pool
    asked: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        if self.seed is None:
            return POOLS[self.num_blocks]
        return f"{POOLS[self.num_blocks]}_{self.state}"

    def code(self, seed: int | None) -> str:
        """What makes the same pool in the counterexample, its free blocks drawn from `seed`
        (`HELD_POOL`, `HALF_HELD_POOL`)."""
        if self.seed is None:
            return f"half_held_pool({self.num_blocks})"
        return f"held_pool({self.num_blocks}, {len(self.free)}, {seed})"


def held_pool(submission, num_blocks: int, state: str, seed: int) -> HeldPool:
    """A measured pool in `state`: the allocator allocates all its blocks, then frees
    `free_ids_of(seed, num_blocks, free_count(state, num_blocks))`."""
    transcript = submission.transcript
    transcript.needs("import random")
    for line in function_source("free_ids_of", THIS_FILE):
        transcript.define(line)
    count = free_count(state, num_blocks)
    free_ids = free_ids_of(seed, num_blocks, count)
    allocator = submission.module("block_allocator").BlockAllocator(num_blocks)
    allocator.allocate(num_blocks)
    allocator.free(Shown(free_ids, f"free_ids_of({seed}, {num_blocks}, {count})"))

    def remake() -> Remote:
        return held_pool(submission, num_blocks, state, seed).allocator

    return HeldPool(allocator, num_blocks, frozenset(free_ids), seed, remake, state)


def half_held_pool(submission, num_blocks: int) -> HeldPool:
    """The probe's pool: the allocator allocates half its blocks, whichever it chooses."""
    allocator = submission.module("block_allocator").BlockAllocator(num_blocks)
    held = int_list(submission.transcript, allocator.allocate(num_blocks // 2), "allocate")
    free = frozenset(range(num_blocks)) - frozenset(held)

    def remake() -> Remote:
        return half_held_pool(submission, num_blocks).allocator

    return HeldPool(allocator, num_blocks, free, None, remake)


def script(
    transcript, pools: list[HeldPool], rounds: int, asked: list[int] | None = None, judged=False
) -> None:
    """The counterexample: the workload and the check's plain functions, `pools` made as the
    check made them, and the calls `asked` before the last on the one pool, with what judges
    their evidence where it is `judged`; without `asked` (a verdict on time: any seeds do), what
    times the workload."""
    replay(
        transcript,
        {"block_allocator": {"BlockAllocator"}},
        [
            *function_source("allocate_free_rounds"),
            *(
                (*function_source("free_ids_of", THIS_FILE), *HELD_POOL)
                if any(pool.seed is not None for pool in pools)
                else ()
            ),
            *(HALF_HELD_POOL if any(pool.seed is None for pool in pools) else ()),
            *function_source("allocation_sizes", THIS_FILE),
            *(function_source("first_misstep", THIS_FILE) if judged else ()),
            *(() if asked else LEAST_SECONDS),
        ],
        [
            *(
                f"{pool.name}, {pool.name}_free = {pool.code(pool.seed if asked else 0)}"
                for pool in pools
            ),
            *earlier_calls(pools[0], rounds, asked),
            f"sizes = allocation_sizes({asked[-1] if asked else 0}, {rounds})",
        ],
    )
    transcript.needs("import random")


def earlier_calls(pool: HeldPool, rounds: int, asked: list[int] | None) -> list[str]:
    """A loop that makes the calls `asked` before the last on `pool`, as the grading did: the
    allocator it leaves is the one the last call found."""
    if not asked or len(asked) < 2:
        return []
    call = f"allocate_free_rounds({pool.name}, allocation_sizes(seed, {rounds}))"
    return [commented(f"for seed in {asked[:-1]}:", CALLS_BEFORE), f"    {call}", ""]


def run_code(pool: HeldPool) -> str:
    return f"allocate_free_rounds({pool.name}, sizes)"


def seconds_code(pool: HeldPool) -> str:
    return f"least_seconds(lambda: {run_code(pool)})"


def workload(pool: HeldPool, rounds: int = ROUNDS) -> Timed:
    """The workload on `pool`, its sizes drawn for each call, its evidence checked; where it
    raises or its evidence is wrong, the counterexample reruns the calls up to that one."""
    transcript = transcript_of(pool.allocator)

    def ask() -> tuple[int, list[int]]:
        seed = secrets.randbits(32)
        return seed, allocation_sizes(seed, rounds)

    def run(asked: tuple[int, list[int]]) -> object:
        seed, sizes = asked
        pool.asked.append(seed)
        try:
            return pool.allocator.workload("allocate_free_rounds", sizes)
        except RemoteError:
            script(transcript, [pool], rounds, pool.asked)
            transcript.fail_in(run_code(pool))
            raise

    def verify(asked: tuple[int, list[int]], handed: object) -> str | None:
        misstep = first_misstep(pool.free, asked[1], handed)
        if misstep is not None:
            script(transcript, [pool], rounds, pool.asked, judged=True)
            misstep_code = f"first_misstep({pool.name}_free, sizes, {run_code(pool)})"
            transcript.fail(misstep_code, "None")
        return misstep

    def again(asked: tuple[int, list[int]]) -> object:
        with transcript.aside():
            allocator = pool.remake()
            for seed in pool.asked[:-1]:
                called_here("allocate_free_rounds", allocator, allocation_sizes(seed, rounds))
            return called_here("allocate_free_rounds", allocator, asked[1])

    return Timed(sandbox_of(pool.allocator), ask, run, verify, again)


@pytest.mark.points(2)
@pytest.mark.severity("speed")
def check_allocate_and_free_speed(submission, reference, benchmark, profile, record_benchmark):
    pools, calls = {}, {}
    for state in STATES:
        seed = secrets.randbits(32)  # the same pool for both
        pools[state] = held_pool(submission, SMALL_POOL, state, seed)
        calls[f"reference, {state}"] = workload(held_pool(reference, SMALL_POOL, state, seed))
        calls[f"candidate, {state}"] = workload(pools[state])
    best = time_states(benchmark, calls, profile.timing_rounds, speed_ratio, SPEED_LIMIT)
    timings = state_timings(
        best,
        lambda state: said(
            "allocate/free, {size}-block pool ({state})",
            size=f"{SMALL_POOL:,}",
            state=STATES[state],
        ),
        speed_ratio,
    )
    worst = worst_state(timings)
    submission.transcript.reset()
    if not any_implausible(timings):  # flagged: no script shows it
        script(submission.transcript, [pools[worst]], ROUNDS)
        reference_seconds = timings[worst].seconds[1]
        ends_in_the_time(
            submission.transcript, seconds_code(pools[worst]), SPEED_LIMIT, reference_seconds
        )
    judge_states(
        record_benchmark,
        timings,
        SPEED_LIMIT,
        said("the allocate/free workload"),
        lambda state, ratio: said(
            "{rounds} allocations of 1 to 15 blocks and their frees, on a {size}-block "
            "pool ({state}), take {ratio}x the reference's time (the limit is {limit}x)",
            rounds=f"{ROUNDS:,}",
            size=f"{SMALL_POOL:,}",
            state=STATES[state],
            ratio=f"{ratio:.1f}",
            limit=f"{SPEED_LIMIT:.0f}",
        ),
    )


@pytest.mark.points(3)
@pytest.mark.severity("speed")
def check_cost_does_not_grow_with_the_pool(
    submission, reference, benchmark, profile, record_benchmark
):
    probed = half_held_pool(submission, LARGE_POOL)
    probes = {
        "c": workload(probed, PROBE_ROUNDS),
        "r": workload(half_held_pool(reference, LARGE_POOL), PROBE_ROUNDS),
    }
    probe = confirmed_probe(probes, HOPELESS)
    if probe["c"] > HOPELESS * probe["r"]:
        script(submission.transcript, [probed], PROBE_ROUNDS)
        ends_in_the_time(submission.transcript, seconds_code(probed), HOPELESS, probe["r"])
    assert probe["c"] <= HOPELESS * probe["r"], said(
        "allocations and frees on a {size}-block pool take over {limit}x the "
        "reference's time: the cost must not depend on num_blocks",
        size=f"{LARGE_POOL:,}",
        limit=f"{HOPELESS:.0f}",
    )
    del probed, probes  # their pools are not measured further: free the workers' memory
    pools, calls = {}, {}
    for state in STATES:
        small_seed, large_seed = secrets.randbits(32), secrets.randbits(32)
        small = held_pool(submission, SMALL_POOL, state, small_seed)
        large = held_pool(submission, LARGE_POOL, state, large_seed)
        pools[state] = [small, large]
        calls |= growth_calls(
            state,
            (workload(small), workload(large)),
            (
                workload(held_pool(reference, SMALL_POOL, state, small_seed)),
                workload(held_pool(reference, LARGE_POOL, state, large_seed)),
            ),
        )
    best = time_states(benchmark, calls, profile.timing_rounds, growth_ratio, GROWTH_LIMIT)
    timings = state_timings(
        best,
        lambda state: said(
            "allocate/free cost growth from {small} to {large} blocks ({state}; ratio: the "
            "candidate's growth over the reference's)",
            small=f"{SMALL_POOL:,}",
            large=f"{LARGE_POOL:,}",
            state=STATES[state],
        ),
        growth_ratio,
        "large",
    )
    worst = worst_state(timings)
    growth = growths(best[worst])
    submission.transcript.reset()
    if not any_implausible(timings):  # as above
        small, large = pools[worst]
        script(submission.transcript, [small, large], ROUNDS)
        seconds = f"{seconds_code(large)} / {seconds_code(small)}"
        ends_in_the_time(submission.transcript, seconds, GROWTH_LIMIT, growth["reference"])
    judge_states(
        record_benchmark,
        timings,
        GROWTH_LIMIT,
        said("the allocate/free workload"),
        lambda state, _: said(
            "allocations and frees cost {growth}x more on {large} blocks than on {small} "
            "({state}; the reference: {reference}x): the cost must not depend on "
            "num_blocks (a list.pop(0), or a scan over the pool?)",
            growth=f"{growth['candidate']:.1f}",
            large=f"{LARGE_POOL:,}",
            small=f"{SMALL_POOL:,}",
            state=STATES[state],
            reference=f"{growth['reference']:.1f}",
        ),
    )
