"""The evidence of the timed workloads: what the worker's workload returns for honest work, this
process computes or accepts (`first_misstep`, `chain_misstep`, `LongRequests.expected`), and what
a workload that did other work returns, it refuses. The workloads run here as the
counterexamples define them (`function_source`), on small contract-abiding objects of this
file."""

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch

from grader.checks import caching_timing
from grader.checks.allocator_timing import (
    FEW,
    STATES,
    allocation_sizes,
    first_misstep,
    free_count,
    free_ids_of,
)
from grader.checks.caching_timing import CHAIN_BLOCKS, CHAINS, PROMPT_LEN, chain_picks, chain_tokens
from grader.checks.gather_timing import LongRequests, whole_number_pool
from grader.checks.support.workloads import function_source
from tests.grader.checks.test_support import WORKER_FUNCTIONS

SEQ_LENS = (40, 17, 5, 33)  # ragged, in a pool of 3 + 2 + 1 + 3 blocks of 16 tokens
NUM_BLOCKS = 9


def worker_functions() -> dict[str, Callable]:
    """The worker's workloads, defined as a counterexample defines them."""
    namespace: dict = {}
    source = (line for name in WORKER_FUNCTIONS for line in function_source(name))
    exec("\n".join(source), namespace)
    return namespace


WORKER = worker_functions()


class ListAllocator:
    """A contract-abiding allocator: a free list, taken from the end (LIFO) or the front."""

    def __init__(self, num_blocks: int, fifo: bool = False) -> None:
        self.free_ids, self.held, self.fifo = list(range(num_blocks)), set(), fifo

    def allocate(self, n: int) -> list[int]:
        if n > len(self.free_ids):
            raise RuntimeError("OOM")
        ids = [self.free_ids.pop(0 if self.fifo else -1) for _ in range(n)]
        self.held.update(ids)
        return ids

    def free(self, ids: list[int]) -> None:
        assert set(ids) <= self.held
        assert len(set(ids)) == len(ids)
        self.held.difference_update(ids)
        self.free_ids.extend(ids)


def held_pool(num_blocks: int, count: int, seed: int, fifo: bool = False) -> ListAllocator:
    """The pool as the check sets it up: all allocated, then `free_ids_of` freed."""
    allocator = ListAllocator(num_blocks, fifo)
    allocator.allocate(num_blocks)
    allocator.free(free_ids_of(seed, num_blocks, count))
    return allocator


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("fifo", [False, True], ids=["lifo", "fifo"])
@pytest.mark.parametrize("num_blocks", [1_000, 20_000])
def test_an_honest_run_on_the_pool_set_up_holds(num_blocks: int, fifo: bool, state: str) -> None:
    count = free_count(state, num_blocks)
    allocator = held_pool(num_blocks, count, seed=3, fifo=fifo)
    free = set(free_ids_of(3, num_blocks, count))
    for seed in (1, 2):  # the pool is the same after each call: every block allocated is freed
        sizes = allocation_sizes(seed, 200)
        assert first_misstep(free, sizes, WORKER["allocate_free_rounds"](allocator, sizes)) is None


def test_the_sizes_are_the_same_work_in_an_order_of_their_seed() -> None:
    first, second = allocation_sizes(1, 1000), allocation_sizes(2, 1000)
    assert first != second
    assert sum(first) == sum(second) == 8 * 1000
    assert len(first) == 1000
    assert set(first) <= set(range(1, 16))


@pytest.mark.parametrize("count", [FEW, 1_000 - FEW], ids=["nearly full", "nearly empty"])
def test_the_free_blocks_are_drawn_anywhere_in_the_pool(count: int) -> None:
    free = free_ids_of(5, 1_000, count)
    assert len(set(free)) == len(free) == count
    assert set(free) <= set(range(1_000))
    assert set(free) != set(free_ids_of(6, 1_000, count))
    spread = sorted(set(range(1_000)) - set(free) if count > 500 else free)
    assert spread[0] < 100  # not a run at one end
    assert spread[-1] > 900


def test_a_nearly_full_pool_keeps_few_blocks_free_and_a_nearly_empty_one_few_held() -> None:
    assert free_count("full", 200_000) == FEW
    assert free_count("empty", 200_000) == 200_000 - FEW


def test_a_run_on_another_pool_is_refused() -> None:
    """The attack: the workload on a 1,000-block pool of its own, not the 20,000-block one."""
    sizes = allocation_sizes(1, 200)
    small = ListAllocator(1_000)
    small.allocate(500)
    handed = WORKER["allocate_free_rounds"](small, sizes)
    misstep = first_misstep(set(free_ids_of(3, 20_000, FEW)), sizes, handed)
    assert misstep is not None
    assert misstep.endswith("not a free block"), misstep


def test_a_replayed_earlier_run_is_refused() -> None:
    """The ids of an earlier call, returned for a call with other sizes."""
    allocator = held_pool(1_000, FEW, seed=3)
    free = set(free_ids_of(3, 1_000, FEW))
    earlier = WORKER["allocate_free_rounds"](allocator, allocation_sizes(1, 200))
    assert first_misstep(free, allocation_sizes(2, 200), earlier) is not None


@pytest.mark.parametrize(
    ("handed", "says"),
    [
        (1600, "it returned 1600, not a list of the ids of each allocation"),
        ([], "it returned [], not a list of the ids of each allocation"),
        ([[]] * 4, "allocation 0 (of 3) handed out []"),
        ([[1, 2, 3], [4], [5, 6], [7, 8]], "allocation 1 (of 5) handed out [4]"),
    ],
)
def test_a_run_that_returns_other_ids_than_asked_is_refused(handed: object, says: str) -> None:
    assert first_misstep(set(range(1, 20)), [3, 5, 2, 2], handed) == says


def test_an_id_handed_out_twice_at_once_is_refused() -> None:
    sizes = [2, 2]
    assert first_misstep({1, 2, 3, 4}, sizes, [[1, 2], [3, 4]]) is None
    assert first_misstep({1, 2, 3, 4}, sizes, [[1, 2], [1, 2]]) == (
        "allocation 1 (of 2) handed out 1, not a free block"
    )  # 1 and 2 are freed only after the second allocation
    assert first_misstep({1, 2, 3, 4}, [2, 2, 2], [[1, 2], [3, 4], [1, 2]]) is None  # reused
    assert first_misstep({1, 2, 3}, [2], [[3, 3]]) == (
        "allocation 0 (of 2) handed out 3, not a free block"
    )
    assert first_misstep({1, 2, 3}, [2], [[1, 2.0]]) == (
        "allocation 0 (of 2) handed out 2.0, not a free block"
    )
    assert first_misstep({1, 2, 3}, [2], [[1, [2]]]) == (
        "allocation 0 (of 2) handed out [2], not a free block"
    )


class PrefixCache:
    """A contract-abiding prefix cache, plainly: a block's key is its request's tokens through
    the block's end; empty blocks on a stack, idle cached ones oldest first (no error rules)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size, self.holders = block_size, [0] * num_blocks
        self.empty = list(range(num_blocks - 1, -1, -1))
        self.idle: dict[int, None] = {}
        self.keys: dict[int, tuple[int, ...]] = {}  # cached block -> key
        self.cache: dict[tuple[int, ...], int] = {}  # key -> block
        self.requests: dict[int, tuple[list[int], list[int]]] = {}  # id -> tokens, table

    @property
    def num_free(self) -> int:
        return len(self.empty) + len(self.idle)

    def take(self) -> int:
        if self.empty:
            block = self.empty.pop()
        else:
            block = next(iter(self.idle))
            del self.idle[block], self.cache[self.keys.pop(block)]
        self.holders[block] = 1
        return block

    def add(self, block: int, key: tuple[int, ...]) -> None:
        if key not in self.cache:
            self.cache[key], self.keys[block] = block, key

    def allocate_prompt(self, request_id: int, tokens: list[int]) -> int:
        size, hits = self.block_size, []
        for end in range(size, len(tokens), size):
            if (block := self.cache.get(tuple(tokens[:end]))) is None:
                break
            hits.append(block)
            self.idle.pop(block, None)
            self.holders[block] += 1
        table = hits + [self.take() for _ in range(-(-len(tokens) // size) - len(hits))]
        for index in range(len(hits), len(tokens) // size):
            self.add(table[index], tuple(tokens[: (index + 1) * size]))
        self.requests[request_id] = (list(tokens), table)
        return len(hits) * size

    def append_token(self, request_id: int, token: int) -> None:
        tokens, table = self.requests[request_id]
        if len(tokens) % self.block_size == 0:
            table.append(self.take())
        tokens.append(token)
        if len(tokens) % self.block_size == 0:
            self.add(table[-1], tuple(tokens))

    def block_table(self, request_id: int) -> list[int]:
        return list(self.requests[request_id][1])

    def free(self, request_id: int) -> None:
        for block in reversed(self.requests.pop(request_id)[1]):
            self.holders[block] -= 1
            if not self.holders[block]:
                if block in self.keys:
                    self.idle[block] = None
                else:
                    self.empty.append(block)


def chain_pool(num_blocks: int) -> tuple[PrefixCache, list[list[int]]]:
    """The mostly empty pool as part 7's check sets it up (`caching_timing.CHAIN_POOL`)."""
    cache, tables = PrefixCache(num_blocks, caching_timing.BLOCK_SIZE), []
    for request_id in range(CHAINS):
        cache.allocate_prompt(request_id, chain_tokens(request_id))
        tables.append(cache.block_table(request_id))
        cache.free(request_id)
    return cache, tables


def chain_run(cache: PrefixCache, seed: int, rounds: int = 20) -> tuple[list[int], list]:
    chains = [chain_tokens(chain) for chain in range(CHAINS)]
    picks = chain_picks(seed, rounds)
    return picks, WORKER["chain_decode_rounds"](cache, chains, picks, PROMPT_LEN)


def test_an_honest_chain_run_finds_its_chains_cached_and_takes_empty_blocks() -> None:
    cache, tables = chain_pool(1_000)
    assert len({block for table in tables for block in table}) == CHAINS * CHAIN_BLOCKS
    for seed in (1, 2):  # the pool is the same after each call: every block taken is empty again
        picks, evidence = chain_run(cache, seed)
        assert caching_timing.chain_misstep(1_000, tables, picks, evidence) is None
        assert cache.num_free == 1_000
    assert chain_picks(1, 20) != chain_picks(2, 20)


def test_a_chain_run_for_other_picks_or_on_another_pool_is_refused() -> None:
    cache, tables = chain_pool(1_000)
    picks, evidence = chain_run(cache, 1)
    other = chain_picks(2, 20)
    assert caching_timing.chain_misstep(1_000, tables, other, evidence).startswith("request ")
    picks, evidence = chain_run(PrefixCache(1_000, caching_timing.BLOCK_SIZE), 1)  # none cached
    assert caching_timing.chain_misstep(1_000, tables, picks, evidence).startswith("request 0 ")


def test_a_chain_run_that_evicts_a_cached_block_is_refused() -> None:
    cache, tables = chain_pool(1_000)
    picks, (counts, taken) = chain_run(cache, 1)
    taken[3][-1] = tables[0][-1]  # a cached block, where empty ones were left
    misstep = caching_timing.chain_misstep(1_000, tables, picks, [counts, taken])
    assert misstep.startswith("request 3 took blocks ")
    assert caching_timing.chain_misstep(1_000, tables, picks, 7) == "it returned 7"


@dataclass
class LoopManager:
    """A contract-abiding gather and slot mapping, a token at a time; `stale` keeps serving the
    first result of each request, `shift` moves every slot."""

    num_blocks: int
    stale: bool = False
    shift: int = 0
    block_size: int = 16
    head_dim: int = 16
    served: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.physical_kv_cache = torch.zeros(self.num_blocks, self.block_size, self.head_dim)

    def slot_mapping(self, req) -> torch.Tensor:
        table, size = req.block_table, self.block_size
        slots = [table[i // size] * size + i % size + self.shift for i in range(req.seq_len)]
        return torch.tensor(slots, dtype=torch.long) % (self.num_blocks * size)

    def get_physical_cache(self, req) -> torch.Tensor:
        rows = self.physical_kv_cache.view(-1, self.head_dim)[self.slot_mapping(req)]
        if self.stale:
            return self.served.setdefault(req.request_id, rows)
        return rows


@dataclass
class Request:
    request_id: int
    seq_len: int
    block_table: list[int] = field(default_factory=list)


def requests() -> list[Request]:
    return [Request(i, seq_len) for i, seq_len in enumerate(SEQ_LENS)]


def long_requests(workload: str, pool: torch.Tensor | None = None) -> LongRequests:
    """The check's record of `SEQ_LENS` requests for `workload` (no worker: no handles)."""
    return LongRequests(workload, None, [], SEQ_LENS, 3, NUM_BLOCKS, 11, pool, remake=None)


def gather_run(manager: LoopManager, seed: int, made: list | None = None) -> list:
    manager.physical_kv_cache[...] = whole_number_pool(11, NUM_BLOCKS, 16, 16)
    return WORKER["gather_rounds"](manager, made or requests(), seed, 3)


def test_an_honest_gather_gives_the_evidence_computed_here_exactly() -> None:
    pool = whole_number_pool(11, NUM_BLOCKS, 16, 16)
    assert pool.eq(pool.round()).all()
    assert pool.abs().max() <= 4
    expected = long_requests("gather_rounds", pool).expected
    for seed in (1, 2):
        assert gather_run(LoopManager(NUM_BLOCKS), seed) == expected(seed)
    assert expected(1) != expected(2)


@pytest.mark.parametrize("wrong", [{"stale": True}, {"shift": 1}], ids=["stale", "shifted"])
def test_a_gather_of_other_rows_gives_other_sums(wrong: dict) -> None:
    pool = whole_number_pool(11, NUM_BLOCKS, 16, 16)
    shapes, sums = gather_run(LoopManager(NUM_BLOCKS, **wrong), 1)
    assert shapes == [[n, 16] for n in SEQ_LENS]
    assert sums != long_requests("gather_rounds", pool).expected(1)[1]


def test_a_gather_of_fewer_tokens_gives_other_shapes() -> None:
    pool = whole_number_pool(11, NUM_BLOCKS, 16, 16)
    fewer = [Request(i, seq_len // 2) for i, seq_len in enumerate(SEQ_LENS)]
    shapes, _ = gather_run(LoopManager(NUM_BLOCKS), 1, fewer)
    assert shapes != long_requests("gather_rounds", pool).expected(1)[0]


def test_an_honest_slot_mapping_gives_the_evidence_computed_here() -> None:
    expected = long_requests("slot_mapping_rounds").expected
    for seed in (1, 2):
        got = WORKER["slot_mapping_rounds"](LoopManager(NUM_BLOCKS), requests(), seed, 3)
        assert got == expected(seed)


def test_a_slot_mapping_of_other_slots_gives_other_sums() -> None:
    shapes, sums = WORKER["slot_mapping_rounds"](LoopManager(NUM_BLOCKS, shift=1), requests(), 1, 3)
    assert shapes == [[n] for n in SEQ_LENS]
    assert sums != long_requests("slot_mapping_rounds").expected(1)[1]


def test_the_tables_of_each_round_are_a_fresh_permutation_of_the_pool() -> None:
    generator = torch.Generator().manual_seed(random.Random(0).randrange(1 << 30))
    manager, made = LoopManager(NUM_BLOCKS), requests()
    tables = []
    for _ in range(3):
        WORKER["shuffle_tables"](manager, made, generator)
        tables.append([block for request in made for block in request.block_table])
        assert [len(request.block_table) for request in made] == [3, 2, 1, 3]
    assert all(sorted(table) == list(range(NUM_BLOCKS)) for table in tables)
    assert len({tuple(table) for table in tables}) > 1


def test_a_chain_run_that_returns_numbers_of_another_type_is_refused() -> None:
    cache, tables = chain_pool(1_000)
    picks, (counts, got) = chain_run(cache, 1)
    misstep = caching_timing.chain_misstep
    assert misstep(1_000, tables, picks, [[*counts[:2], 64.0, *counts[3:]], got]).startswith(
        "request 2 cached 64.0 tokens"
    )
    got[4][0] = float(got[4][0])  # equal to the cached block's id, not an id
    assert misstep(1_000, tables, picks, [counts, got]).startswith("request 4 cached 64 tokens")
    assert misstep(1_000, tables, picks, [counts, got[:-1]]) == "it returned 19 block tables"
