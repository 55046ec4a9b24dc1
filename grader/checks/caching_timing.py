"""Part 7's cost rule: taking a block costs O(1), whatever the pool's size and however many
blocks are cached.

The measured pool is all cached and idle: it was filled by prompts of fresh tokens, the first
of which starts with a system prompt of `SYSTEM_BLOCKS` blocks, and freed, that one last. The
worker then runs a workload per call (`workloads.prompt_free_rounds`: ROUNDS prompts of the
system prompt and as many fresh tokens, each freed at once), for the candidate and the
reference on pools of the same size, timed by each worker's CPU time (`grader.scoring.timing`).
Every prompt reuses the system prompt's blocks and evicts `SYSTEM_BLOCKS` blocks: an eviction
that scans the cached blocks (a `min` over idle times, a list of them) costs O(cached blocks),
tens of times more on 100 000 blocks than on 1 000. Before that is measured, a probe of
PROBE_ROUNDS prompts on the large pools stops one that is hopelessly slow.

Evidence: the workload returns each prompt's cached count and block table, and this process
replays the contract on the tables it read when it filled the pool (`Evictions`): each prompt
must find the system prompt cached and take exactly the blocks idle longest; as the replay moves
on with every call, a workload that ran on another pool, or replayed an earlier call's answer,
fails the check, "the timed work was not done as asked". The fresh tokens start at a number
drawn here (`secrets`) for every call, so that no prompt of a call was seen before.
"""

import secrets
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.checks.support.expect import int_list
from grader.checks.support.workloads import (
    CALLS_BEFORE,
    LEAST_SECONDS,
    ends_in_the_time,
    function_source,
    replay,
)
from grader.said import said
from grader.sandbox.proxy import Remote, RemoteError, sandbox_of, transcript_of
from grader.sandbox.transcript import commented
from grader.scoring.timing import (
    Timed,
    confirmed_probe,
    growth_ratio,
    implausible,
    judge_ratio,
    time_confirmed,
)

pytestmark = pytest.mark.part("caching")

ROUNDS = 1000
BLOCK_SIZE = 4
SYSTEM_BLOCKS = 4
SYSTEM = list(range(1, SYSTEM_BLOCKS * BLOCK_SIZE + 1))
FILL_BLOCKS = 1000  # blocks per prompt that fills the pool
SMALL_POOL, LARGE_POOL = 1_000, 100_000
SPEED_LIMIT = 5.0  # candidate / reference on the small pool
GROWTH_LIMIT = 3.0  # the candidate's large/small cost over the reference's
HOPELESS = 50.0  # a probe this many times slower than the reference is not timed further
PROBE_ROUNDS = 25
POOLS = {SMALL_POOL: "small", LARGE_POOL: "large"}  # their names in the counterexample
FILL_TOKENS = 1 << 19  # the fill's tokens lie above the system prompt's, below the fresh ones
FIRST_FRESH = 1 << 20  # fresh tokens (and request ids) lie above the system prompt's and the fill's
SPACING = 1 << 30  # between the fresh tokens' starts of a counterexample's timed runs
THIS_FILE = Path(__file__)
CACHED_POOL = (
    "def cached_pool(num_blocks):",
    "    cache = PrefixCache(num_blocks, BLOCK_SIZE)",
    "    fills = range(0, num_blocks, FILL_BLOCKS)",
    "    for start in fills:",
    "        cache.allocate_prompt(start, fill_prompt(start, num_blocks))",
    "    for start in reversed(fills):",
    "        cache.free(start)",
    "    return cache",
    "",
)


def fill_prompt(start: int, num_blocks: int) -> list[int]:
    """The prompt of request `start` that fills blocks `start ..` of the pool: the system prompt
    first where `start` is 0, then tokens of its own, none a fresh token or the system's."""
    size = min(FILL_BLOCKS, num_blocks - start) * BLOCK_SIZE
    first = SYSTEM if start == 0 else []
    own = FILL_TOKENS + start * BLOCK_SIZE
    return first + list(range(own, own + size - len(first)))


@dataclass
class Evictions:
    """The contract replayed on a pool that is all cached and idle: `idle` in the order the
    blocks became idle, `system` the system prompt's blocks (idle last)."""

    system: list[int]
    idle: OrderedDict[int, None]

    def first_misstep(self, evidence: object, rounds: int) -> tuple[str, str, str] | None:
        """What is wrong with a call's evidence, as (what, its code after the call, what that
        must be); None where each prompt found the system prompt cached and took the blocks idle
        longest. The replay moves on as the contract does."""
        counts, tables = evidence if isinstance(evidence, list) and len(evidence) == 2 else (0, 0)
        if not isinstance(counts, list) or not isinstance(tables, list) or len(tables) != rounds:
            return (
                said("it returned {value}", value=str(evidence)[:40]),
                "[len({0}), len({1})]",
                f"[{rounds}] * 2",
            )
        if len(counts) != rounds:
            return said("it returned {count} counts", count=len(counts)), "len({0})", str(rounds)
        for round_, (count, table) in enumerate(zip(counts, tables, strict=True)):
            for block in self.system:
                del self.idle[block]
            taken = [self.idle.popitem(last=False)[0] for _ in range(SYSTEM_BLOCKS)]
            expected = (len(SYSTEM), self.system + taken)
            if (count, table) != expected:
                return (
                    said(
                        "prompt {index} cached {count} tokens in blocks {table}, not "
                        "{tokens} in {expected} (the system prompt's, then the blocks "
                        "idle longest)",
                        index=round_,
                        count=f"{count!r}",
                        table=str(table)[:80],
                        tokens=expected[0],
                        expected=expected[1],
                    ),
                    f"({{0}}[{round_}], {{1}}[{round_}])",
                    repr(expected),
                )
            for block in reversed(expected[1]):
                self.idle[block] = None
        return None


@dataclass
class CachedPool:
    """A cache of `num_blocks` (the candidate's or the reference's), all cached and idle, and the
    contract's replay of it; `asked` the workload's calls so far."""

    cache: Remote
    num_blocks: int
    evictions: Evictions
    asked: list[tuple[int, int]] = field(default_factory=list)  # each call's (first, rounds)

    @property
    def name(self) -> str:
        return POOLS[self.num_blocks]


def cached_pool(submission, num_blocks: int) -> CachedPool:
    """The measured pool: filled by `fill_prompt`s, read back, freed in reverse."""
    transcript = submission.transcript
    cache = submission.module("prefix_cache").PrefixCache(num_blocks, BLOCK_SIZE)
    fills = range(0, num_blocks, FILL_BLOCKS)
    tables = []
    for start in fills:
        cache.allocate_prompt(start, fill_prompt(start, num_blocks))
        tables.append(int_list(transcript, cache.block_table(start), "block_table"))
    idle: OrderedDict[int, None] = OrderedDict()
    for start, table in zip(reversed(fills), reversed(tables), strict=True):
        cache.free(start)
        idle.update(dict.fromkeys(reversed(table)))
    return CachedPool(cache, num_blocks, Evictions(tables[0][:SYSTEM_BLOCKS], idle))


def script(
    transcript,
    pools: list[CachedPool],
    rounds: int = ROUNDS,
    asked: list[tuple[int, int]] | None = None,
) -> None:
    """The counterexample: the workload, `pools` made as the check made them, and the calls
    `asked` before the last on the one pool; without `asked`, what times the workload."""
    replay(
        transcript,
        {"prefix_cache": {"PrefixCache"}},
        [
            *function_source("prompt_free_rounds"),
            *function_source("fill_prompt", THIS_FILE),
            *CACHED_POOL,
            *(() if asked else LEAST_SECONDS),
        ],
        [
            f"FILL_BLOCKS, FILL_TOKENS, BLOCK_SIZE = {FILL_BLOCKS}, {FILL_TOKENS}, {BLOCK_SIZE}",
            f"SYSTEM = {SYSTEM}",
            *(f"{pool.name} = cached_pool({pool.num_blocks})" for pool in pools),
            *(
                [
                    commented(f"for first, rounds in {asked[:-1]}:", CALLS_BEFORE),
                    f"    prompt_free_rounds({pools[0].name}, SYSTEM, first, rounds)",
                    "",
                ]
                if asked and len(asked) > 1
                else []
            ),
            f"first = {asked[-1][0]}"
            if asked
            else f"firsts = itertools.count({FIRST_FRESH}, {SPACING})",
        ],
    )
    if not asked:
        transcript.needs("import itertools")


def run_code(pool: CachedPool, rounds: int = ROUNDS) -> str:
    return f"prompt_free_rounds({pool.name}, SYSTEM, first, {rounds})"


def workload(pool: CachedPool, rounds: int = ROUNDS) -> Timed:
    """The workload on `pool`, its fresh tokens drawn for each call, its evidence checked; where
    it raises or its evidence is wrong, the counterexample reruns the calls up to that one."""
    transcript = transcript_of(pool.cache)

    def ask() -> int:
        return FIRST_FRESH + secrets.randbits(40)

    def run(first: int) -> object:
        pool.asked.append((first, rounds))
        try:
            return pool.cache.workload("prompt_free_rounds", SYSTEM, first, rounds)
        except RemoteError:
            script(transcript, [pool], rounds, pool.asked)
            transcript.fail_in(run_code(pool, rounds))
            raise

    def verify(first: int, evidence: object) -> None:
        misstep = pool.evictions.first_misstep(evidence, rounds)
        if misstep is not None:
            what, got, expected = misstep
            script(transcript, [pool], rounds, pool.asked)
            transcript.define(f"counts, tables = {run_code(pool, rounds)}")
            transcript.fail(got.format("counts", "tables"), expected)
            raise AssertionError(
                said("the timed work was not done as asked: {misstep}", misstep=what)
            )

    return Timed(sandbox_of(pool.cache), ask, run, verify)


def seconds_code(pool: CachedPool, rounds: int = ROUNDS) -> str:
    """The least CPU time of the workload on `pool`, each run with fresh tokens (`firsts`)."""
    return f"least_seconds(lambda: prompt_free_rounds({pool.name}, SYSTEM, next(firsts), {rounds}))"


@pytest.mark.points(1)
@pytest.mark.severity("speed")
def check_prompt_and_free_speed(submission, reference, benchmark, profile, record_benchmark):
    small = cached_pool(submission, SMALL_POOL)
    calls = {
        "reference": workload(cached_pool(reference, SMALL_POOL)),
        "candidate": workload(small),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds,
        fails=lambda best: best["candidate"] > SPEED_LIMIT * best["reference"],
    )  # fmt: skip
    submission.transcript.reset()
    if not implausible(best["candidate"] / best["reference"]):  # flagged: no script shows it
        script(submission.transcript, [small])
        ends_in_the_time(submission.transcript, seconds_code(small), SPEED_LIMIT, best["reference"])
    judge_ratio(
        record_benchmark,
        said("prefix cache prompt/free, {size}-block pool", size=f"{SMALL_POOL:,}"),
        (best["candidate"], best["reference"]),
        SPEED_LIMIT,
        said("the prompt/free workload"),
        lambda ratio: said(
            "{rounds} prompts that reuse a cached system prompt and evict {blocks} "
            "blocks each, and their frees, on a {size}-block pool, take {ratio}x the "
            "reference's time (the limit is {limit}x)",
            rounds=f"{ROUNDS:,}",
            blocks=SYSTEM_BLOCKS,
            size=f"{SMALL_POOL:,}",
            ratio=f"{ratio:.1f}",
            limit=f"{SPEED_LIMIT:.0f}",
        ),
    )


@pytest.mark.points(2)
@pytest.mark.severity("speed")
def check_eviction_cost_does_not_grow_with_the_cache(
    submission, reference, benchmark, profile, record_benchmark
):
    large, reference_large = cached_pool(submission, LARGE_POOL), cached_pool(reference, LARGE_POOL)
    probes = {"c": workload(large, PROBE_ROUNDS), "r": workload(reference_large, PROBE_ROUNDS)}
    probe = confirmed_probe(probes, HOPELESS)
    if probe["c"] > HOPELESS * probe["r"]:
        script(submission.transcript, [large], PROBE_ROUNDS)
        seconds = seconds_code(large, PROBE_ROUNDS)
        ends_in_the_time(submission.transcript, seconds, HOPELESS, probe["r"])
    assert probe["c"] <= HOPELESS * probe["r"], said(
        "prompts that evict cached blocks take over {limit}x the reference's time "
        "with {size} cached blocks: taking a block must not depend on how many are "
        "cached",
        limit=f"{HOPELESS:.0f}",
        size=f"{LARGE_POOL:,}",
    )
    small = cached_pool(submission, SMALL_POOL)
    calls = {
        "candidate small": workload(small),
        "reference large": workload(reference_large),
        "reference small": workload(cached_pool(reference, SMALL_POOL)),
        "candidate large": workload(large),
    }
    best = time_confirmed(
        benchmark, calls, profile.timing_rounds, lambda best: growth_ratio(best) > GROWTH_LIMIT
    )
    growth = best["candidate large"] / best["candidate small"]
    reference_growth = best["reference large"] / best["reference small"]
    submission.transcript.reset()
    if not implausible(best["candidate large"] / best["reference large"]):  # as above
        script(submission.transcript, [small, large])
        seconds = f"{seconds_code(large)} / {seconds_code(small)}"
        ends_in_the_time(submission.transcript, seconds, GROWTH_LIMIT, reference_growth)
    name = said(
        "prefix cache eviction cost growth from {small} to {large} cached blocks "
        "(ratio: the candidate's growth over the reference's)",
        small=f"{SMALL_POOL:,}",
        large=f"{LARGE_POOL:,}",
    )
    judge_ratio(
        record_benchmark,
        name,
        (best["candidate large"], best["reference large"]),
        GROWTH_LIMIT,
        said("the prompt/free workload"),
        lambda _: said(
            "prompts that evict cached blocks cost {growth}x more with {large} cached "
            "blocks than with {small} (the reference: {reference}x): taking a block must "
            "not depend on how many are cached (a scan for the block idle longest?)",
            growth=f"{growth:.1f}",
            large=f"{LARGE_POOL:,}",
            small=f"{SMALL_POOL:,}",
            reference=f"{reference_growth:.1f}",
        ),
        ratio=growth_ratio(best),
    )
