"""Part 7's cost rule: taking a block costs O(1), and a prompt or a decoded token costs what it
touches, whatever the pool's size and however many blocks are cached.

The worker runs a workload per call on pools in two states (`STATES`), for the candidate and the
reference on pools of the same size, timed by each worker's CPU time (`grader.scoring.timing`); a
check is judged on the state where the candidate does worst.
- **Every block cached** and idle, so every take evicts. The pool was filled by
  prompts of fresh tokens, the first of which starts with a system prompt of `SYSTEM_BLOCKS`
  blocks, and freed, that one last. The workload (`workloads.prompt_free_rounds`: ROUNDS prompts
  of the system prompt and as many fresh tokens, each freed at once) reuses the system prompt's
  blocks and evicts `SYSTEM_BLOCKS` blocks a prompt: an eviction that scans the cached blocks (a
  `min` over idle times, a list of them) costs O(cached blocks).
- **Mostly empty**: `CHAINS` chains of `CHAIN_BLOCKS` blocks cached, every other block empty, so
  every take is from the empty blocks. The workload (`workloads.chain_decode_rounds`:
  CHAIN_ROUNDS requests, each of a chain drawn here) asks for a chain's first `HIT_BLOCKS`
  blocks and one token more, decodes the rest of the chain token by token, and frees it: a long
  prompt found cached, then `append_token` taking an empty block at each block's first token
  and filling blocks whose keys are cached already (so they stay uncached and are empty again
  once freed: every call finds the same pool). A search of the empty blocks (a `min` over a set
  of them), or a count of the free blocks on every decoded token, costs O(num_blocks).
Either is tens of times more on 100 000 blocks than on 1 000. Before that is measured, a probe
of a few rounds on the large pools stops one that is hopelessly slow.

Evidence: the workload returns each prompt's cached count and block table. On the pool whose
every block is cached, this process replays the contract on the tables it read when it filled
the pool (`Evictions`): each prompt must find the system prompt cached and take exactly the
blocks idle longest; as the replay moves on with every call, a workload that ran on another
pool, or replayed an earlier call's answer, fails the check, "the timed work was not done as
asked". The fresh tokens start at a number drawn here (`secrets`) for every call, so that no
prompt of a call was seen before. On the mostly empty pool, the chains are drawn here for every
call (`chain_picks`), and each request must find its chain's cached blocks and take empty ones
(`chain_misstep`). Evidence that the cache's own methods give again, called from this process on
the pool made afresh, is its results, not other work (`timing.ResultsDiffer`).
"""

import random
import secrets
from collections import OrderedDict
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
from grader.sandbox.transcript import commented
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

pytestmark = pytest.mark.part("caching")

ROUNDS = 500
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
CHAINS, CHAIN_BLOCKS, HIT_BLOCKS = 8, 32, 16  # the mostly empty pool's cached chains
PROMPT_LEN = HIT_BLOCKS * BLOCK_SIZE + 1  # its prompts: a chain's first HIT_BLOCKS, one token more
CHAIN_ROUNDS = 100  # requests per call on the mostly empty pool (each decodes 63 tokens)
CHAIN_PROBE_ROUNDS = 5
STATES = {"full": said("every block cached"), "empty": said("mostly empty")}
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
CHAIN_POOL = (
    "def chain_pool(num_blocks):",
    "    cache, tables = PrefixCache(num_blocks, BLOCK_SIZE), []",
    "    for request_id, chain in enumerate(chains):",
    "        cache.allocate_prompt(request_id, chain)",
    "        tables.append(list(cache.block_table(request_id)))",
    "        cache.free(request_id)",
    "    return cache, tables",
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


def chain_tokens(chain):
    """The tokens of chain `chain`: CHAIN_BLOCKS blocks of its own."""
    start = chain * CHAIN_BLOCKS * BLOCK_SIZE
    return list(range(start, start + CHAIN_BLOCKS * BLOCK_SIZE))


def chain_picks(seed, rounds):
    """The chain of each of `rounds` requests, drawn from `seed`."""
    return random.Random(seed).choices(range(CHAINS), k=rounds)


def chain_misstep(num_blocks, tables, picks, evidence):
    """What is wrong with `evidence`, what `chain_decode_rounds` returned for `picks` on a pool
    of `num_blocks` whose cached blocks are the chains' `tables`, the others empty: None where
    each request found its chain's first HIT_BLOCKS blocks cached and took empty blocks, one
    for each other block of its chain."""
    counts, got = evidence if isinstance(evidence, list) and len(evidence) == 2 else (0, 0)
    if not isinstance(counts, list) or not isinstance(got, list):
        return said("it returned {value}", value=str(evidence)[:40])
    if len(counts) != len(picks):
        return said("it returned {count} counts", count=len(counts))
    if len(got) != len(picks):
        return said("it returned {count} block tables", count=len(got))
    cached = {block for table in tables for block in table}
    for index, (pick, count, table) in enumerate(zip(picks, counts, got, strict=True)):
        hits = tables[pick][:HIT_BLOCKS]
        if (
            type(count) is not int
            or count != HIT_BLOCKS * BLOCK_SIZE
            or not isinstance(table, list)
            or not set(map(type, table)) <= {int}
            or table[:HIT_BLOCKS] != hits
        ):
            return said(
                "request {index} cached {count} tokens in blocks {table}, not {tokens} in "
                "{hits} (its chain's first blocks)",
                index=index,
                count=repr(count)[:40],
                table=str(table)[:80],
                tokens=HIT_BLOCKS * BLOCK_SIZE,
                hits=hits,
            )
        taken = table[HIT_BLOCKS:]
        empty = [0 <= block < num_blocks and block not in cached for block in taken]
        if len(table) != CHAIN_BLOCKS or not all(empty) or len(set(taken)) != len(taken):
            return said(
                "request {index} took blocks {taken}, not {blocks} distinct empty blocks "
                "(cached blocks: {cached})",
                index=index,
                taken=str(taken)[:80],
                blocks=CHAIN_BLOCKS - HIT_BLOCKS,
                cached=str(sorted(cached))[:80],
            )
    return None


@dataclass
class CachedPool:
    """The pool whose every block is cached: a cache of `num_blocks` (the candidate's or the
    reference's), all cached and idle, and the contract's replay of it; `asked` the workload's
    calls so far."""

    cache: Remote
    num_blocks: int
    evictions: Evictions
    remake: Callable[[], Remote]  # the same cache made again
    asked: list[tuple[int, int]] = field(default_factory=list)  # each call's (first, rounds)
    state = "full"
    rounds = ROUNDS
    probe_rounds = PROBE_ROUNDS

    @property
    def name(self) -> str:
        return POOLS[self.num_blocks]

    def run_code(self, rounds: int) -> str:
        return f"prompt_free_rounds({self.name}, SYSTEM, first, {rounds})"

    def seconds_code(self, rounds: int) -> str:
        """The least CPU time of the workload, each run with fresh tokens (`firsts`)."""
        call = f"prompt_free_rounds({self.name}, SYSTEM, next(firsts), {rounds})"
        return f"least_seconds(lambda: {call})"

    def workload(self, rounds: int) -> Timed:
        """The workload, its fresh tokens drawn for each call, its evidence checked; where it
        raises or its evidence is wrong, the counterexample reruns the calls up to that one."""
        transcript = transcript_of(self.cache)

        def ask() -> int:
            return FIRST_FRESH + secrets.randbits(40)

        def run(first: int) -> object:
            self.asked.append((first, rounds))
            try:
                return self.cache.workload("prompt_free_rounds", SYSTEM, first, rounds)
            except RemoteError:
                cached_script(transcript, [self], rounds, self.asked)
                transcript.fail_in(self.run_code(rounds))
                raise

        def verify(first: int, evidence: object) -> str | None:
            misstep = self.evictions.first_misstep(evidence, rounds)
            if misstep is None:
                return None
            what, got, expected = misstep
            cached_script(transcript, [self], rounds, self.asked)
            transcript.define(f"counts, tables = {self.run_code(rounds)}")
            transcript.fail(got.format("counts", "tables"), expected)
            return what

        def again(first: int) -> object:
            with transcript.aside():
                cache = self.remake()
                for earlier, its_rounds in self.asked[:-1]:
                    called_here("prompt_free_rounds", cache, SYSTEM, earlier, its_rounds)
                return called_here("prompt_free_rounds", cache, SYSTEM, first, rounds)

        return Timed(sandbox_of(self.cache), ask, run, verify, again)


def cached_pool(submission, num_blocks: int) -> CachedPool:
    """The pool whose every block is cached: filled by `fill_prompt`s, read back, freed in
    reverse."""
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

    def remake() -> Remote:
        return cached_pool(submission, num_blocks).cache

    return CachedPool(cache, num_blocks, Evictions(tables[0][:SYSTEM_BLOCKS], idle), remake)


def cached_script(
    transcript, pools: list[CachedPool], rounds: int, asked: list[tuple[int, int]] | None = None
) -> None:
    """The counterexample on pools whose every block is cached: the workload, `pools` made as
    the check made them, and the calls `asked` before the last on the one pool; without `asked`,
    what times the workload."""
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


@dataclass
class ChainPool:
    """The mostly empty pool: a cache of `num_blocks` (the candidate's or the reference's) whose
    cached blocks are the chains' `tables`, the others empty; `asked` the workload's calls so
    far, each its seed and its number of requests."""

    cache: Remote
    num_blocks: int
    tables: list[list[int]]
    remake: Callable[[], Remote]  # the same cache made again
    asked: list[tuple[int, int]] = field(default_factory=list)
    state = "empty"
    rounds = CHAIN_ROUNDS
    probe_rounds = CHAIN_PROBE_ROUNDS

    @property
    def name(self) -> str:
        return POOLS[self.num_blocks]

    def run_code(self) -> str:
        return f"chain_decode_rounds({self.name}, chains, picks, PROMPT_LEN)"

    def seconds_code(self, rounds: int) -> str:
        """The least CPU time of the workload on `rounds` requests."""
        call = f"chain_decode_rounds({self.name}, chains, chain_picks(0, {rounds}), PROMPT_LEN)"
        return f"least_seconds(lambda: {call})"

    def workload(self, rounds: int) -> Timed:
        """The workload, its chains drawn for each call, its evidence checked; where it raises
        or its evidence is wrong, the counterexample reruns the calls up to that one."""
        transcript = transcript_of(self.cache)
        chains = [chain_tokens(chain) for chain in range(CHAINS)]

        def ask() -> tuple[int, list[int]]:
            seed = secrets.randbits(32)
            return seed, chain_picks(seed, rounds)

        def run(asked: tuple[int, list[int]]) -> object:
            seed, picks = asked
            self.asked.append((seed, rounds))
            try:
                return self.cache.workload("chain_decode_rounds", chains, picks, PROMPT_LEN)
            except RemoteError:
                chain_script(transcript, [self], rounds, self.asked)
                transcript.fail_in(self.run_code())
                raise

        def verify(asked: tuple[int, list[int]], evidence: object) -> str | None:
            misstep = chain_misstep(self.num_blocks, self.tables, asked[1], evidence)
            if misstep is not None:
                chain_script(transcript, [self], rounds, self.asked, judged=True)
                code = f"chain_misstep({self.num_blocks}, {self.name}_tables, picks, "
                transcript.fail(f"{code}{self.run_code()})", "None")
            return misstep

        def again(asked: tuple[int, list[int]]) -> object:
            with transcript.aside():
                cache = self.remake()
                for seed, its_rounds in self.asked[:-1]:
                    picks = chain_picks(seed, its_rounds)
                    called_here("chain_decode_rounds", cache, chains, picks, PROMPT_LEN)
                return called_here("chain_decode_rounds", cache, chains, asked[1], PROMPT_LEN)

        return Timed(sandbox_of(self.cache), ask, run, verify, again)


def chain_pool(submission, num_blocks: int) -> ChainPool:
    """The mostly empty pool: each chain asked for as a prompt, its table read, then freed."""
    transcript = submission.transcript
    cache = submission.module("prefix_cache").PrefixCache(num_blocks, BLOCK_SIZE)
    tables = []
    for request_id in range(CHAINS):
        cache.allocate_prompt(request_id, chain_tokens(request_id))
        tables.append(int_list(transcript, cache.block_table(request_id), "block_table"))
        cache.free(request_id)

    def remake() -> Remote:
        return chain_pool(submission, num_blocks).cache

    return ChainPool(cache, num_blocks, tables, remake)


def chain_script(
    transcript,
    pools: list[ChainPool],
    rounds: int,
    asked: list[tuple[int, int]] | None = None,
    judged: bool = False,
) -> None:
    """The counterexample on mostly empty pools: the workload and the check's plain functions,
    `pools` made as the check made them, and the calls `asked` before the last on the one pool,
    with what judges their evidence where it is `judged`; without `asked`, what times the
    workload."""
    replay(
        transcript,
        {"prefix_cache": {"PrefixCache"}},
        [
            *function_source("chain_decode_rounds"),
            *function_source("chain_tokens", THIS_FILE),
            *function_source("chain_picks", THIS_FILE),
            *CHAIN_POOL,
            *(function_source("chain_misstep", THIS_FILE) if judged else ()),
            *(() if asked else LEAST_SECONDS),
        ],
        [
            f"BLOCK_SIZE, CHAINS, CHAIN_BLOCKS, HIT_BLOCKS = {BLOCK_SIZE}, {CHAINS}, "
            f"{CHAIN_BLOCKS}, {HIT_BLOCKS}",
            "PROMPT_LEN = HIT_BLOCKS * BLOCK_SIZE + 1",
            "chains = [chain_tokens(chain) for chain in range(CHAINS)]",
            *(f"{pool.name}, {pool.name}_tables = chain_pool({pool.num_blocks})" for pool in pools),
            *(
                [
                    commented(f"for seed, rounds in {asked[:-1]}:", CALLS_BEFORE),
                    f"    chain_decode_rounds({pools[0].name}, chains, chain_picks(seed, rounds), "
                    "PROMPT_LEN)",
                    "",
                ]
                if asked and len(asked) > 1
                else []
            ),
            *([f"picks = chain_picks({asked[-1][0]}, {rounds})"] if asked else []),
        ],
    )
    transcript.needs("import random")


Pool = CachedPool | ChainPool
# Each state's pool, by its state: the mostly empty one first, cheap to make whatever the cache (a
# cache slow to take an empty block is slow to fill the other), so its probe comes first.
MADE = {"empty": chain_pool, "full": cached_pool}


def script(transcript, pools: list[Pool], rounds: int) -> None:
    """What times the workload on `pools` (all of one state)."""
    if pools[0].state == "full":
        cached_script(transcript, pools, rounds)
    else:
        chain_script(transcript, pools, rounds)


def work_done(state: str, rounds: int) -> str:
    """What the workload of `state` does, `rounds` times, in a check's message."""
    if state == "full":
        return said(
            "{rounds} prompts that reuse a cached system prompt and evict {blocks} blocks each, "
            "and their frees",
            rounds=f"{rounds:,}",
            blocks=SYSTEM_BLOCKS,
        )
    return said(
        "{rounds} prompts of {hits} cached blocks that each decode {tokens} tokens into empty "
        "blocks, and their frees",
        rounds=f"{rounds:,}",
        hits=HIT_BLOCKS,
        tokens=CHAIN_BLOCKS * BLOCK_SIZE - PROMPT_LEN,
    )


@pytest.mark.points(1)
@pytest.mark.severity("speed")
def check_prompt_and_free_speed(submission, reference, benchmark, profile, record_benchmark):
    pools, calls = {}, {}
    for state, made in MADE.items():
        pools[state] = made(submission, SMALL_POOL)
        calls[f"reference, {state}"] = made(reference, SMALL_POOL).workload(pools[state].rounds)
        calls[f"candidate, {state}"] = pools[state].workload(pools[state].rounds)
    best = time_states(benchmark, calls, profile.timing_rounds, speed_ratio, SPEED_LIMIT)
    timings = state_timings(
        best,
        lambda state: said(
            "prefix cache prompts, {size}-block pool ({state})",
            size=f"{SMALL_POOL:,}",
            state=STATES[state],
        ),
        speed_ratio,
    )
    worst = worst_state(timings)
    pool = pools[worst]
    submission.transcript.reset()
    if not any_implausible(timings):  # flagged: no script shows it
        script(submission.transcript, [pool], pool.rounds)
        seconds = pool.seconds_code(pool.rounds)
        ends_in_the_time(submission.transcript, seconds, SPEED_LIMIT, timings[worst].seconds[1])
    judge_states(
        record_benchmark,
        timings,
        SPEED_LIMIT,
        said("the prefix cache's workload"),
        lambda state, ratio: said(
            "{work}, on a {size}-block pool ({state}), take {ratio}x the reference's time (the "
            "limit is {limit}x)",
            work=work_done(state, pools[state].rounds),
            size=f"{SMALL_POOL:,}",
            state=STATES[state],
            ratio=f"{ratio:.1f}",
            limit=f"{SPEED_LIMIT:.0f}",
        ),
    )


def probed(submission, reference, state: str) -> tuple[Pool, Pool]:
    """The candidate's and the reference's large pools in `state`, once a probe of a few rounds
    on each found the candidate's not hopelessly slow."""
    large, reference_large = MADE[state](submission, LARGE_POOL), MADE[state](reference, LARGE_POOL)
    rounds = large.probe_rounds
    probe = confirmed_probe(
        {"c": large.workload(rounds), "r": reference_large.workload(rounds)}, HOPELESS
    )
    if probe["c"] > HOPELESS * probe["r"]:
        script(submission.transcript, [large], rounds)
        ends_in_the_time(submission.transcript, large.seconds_code(rounds), HOPELESS, probe["r"])
    assert probe["c"] <= HOPELESS * probe["r"], said(
        "{work} take over {limit}x the reference's time on a {size}-block pool ({state}): taking "
        "a block must not depend on the pool's size or on how many blocks are cached",
        work=work_done(state, rounds),
        limit=f"{HOPELESS:.0f}",
        size=f"{LARGE_POOL:,}",
        state=STATES[state],
    )
    return large, reference_large


@pytest.mark.points(2)
@pytest.mark.severity("speed")
def check_cost_does_not_grow_with_the_pool(
    submission, reference, benchmark, profile, record_benchmark
):
    pools, calls = {}, {}
    for state, made in MADE.items():
        large, reference_large = probed(submission, reference, state)
        small = made(submission, SMALL_POOL)
        pools[state] = [small, large]
        calls |= growth_calls(
            state,
            (small.workload(small.rounds), large.workload(small.rounds)),
            (
                made(reference, SMALL_POOL).workload(small.rounds),
                reference_large.workload(small.rounds),
            ),
        )
    best = time_states(benchmark, calls, profile.timing_rounds, growth_ratio, GROWTH_LIMIT)
    timings = state_timings(
        best,
        lambda state: said(
            "prefix cache cost growth from {small} to {large} blocks ({state}; ratio: the "
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
        script(submission.transcript, [small, large], small.rounds)
        seconds = f"{large.seconds_code(large.rounds)} / {small.seconds_code(small.rounds)}"
        ends_in_the_time(submission.transcript, seconds, GROWTH_LIMIT, growth["reference"])
    judge_states(
        record_benchmark,
        timings,
        GROWTH_LIMIT,
        said("the prefix cache's workload"),
        lambda state, _: said(
            "{work} cost {growth}x more on a {large}-block pool than on a {small}-block one "
            "({state}; the reference: {reference}x): taking a block must not depend on the pool's "
            "size or on how many blocks are cached (a scan for the block idle longest, or "
            "for an empty one?)",
            work=work_done(state, pools[state][0].rounds),
            growth=f"{growth['candidate']:.1f}",
            large=f"{LARGE_POOL:,}",
            state=STATES[state],
            small=f"{SMALL_POOL:,}",
            reference=f"{growth['reference']:.1f}",
        ),
    )
