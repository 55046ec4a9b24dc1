"""Timing benchmarks of the answer key (`make bench`; `make test` deselects them).

They time, never assert on time: each checks only that what it timed is correct. Figures
beyond the printed table go into `extra_info` (see them with `--benchmark-json=FILE`).
"""

import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from pytest_benchmark.fixture import BenchmarkFixture

from solutions.block_allocator import BlockAllocator
from solutions.kv_cache_manager import KVCacheManager, Request

pytestmark = pytest.mark.bench

SINGLES = 64  # allocate(1) calls per round
BATCH = 64  # blocks in the one allocate(BATCH) call per round
BLOCK_OPS = 2 * (SINGLES + BATCH)  # each block is allocated once and freed once

SEQ_LEN, BLOCK_SIZE, HEAD_DIM = 32_768, 16, 128


def median_s(benchmark: BenchmarkFixture) -> float:
    """The median time of one timed call, from the run that just finished."""
    return benchmark.stats.stats.median


@pytest.mark.benchmark(group="allocator")
@pytest.mark.parametrize("num_blocks", [1_000, 100_000])
def test_allocator_round_trip(benchmark: BenchmarkFixture, num_blocks: int) -> None:
    """From a half-full pool: 64 allocate(1) calls, one allocate(64), then free all 128 blocks.

    The work per round does not depend on `num_blocks`, so neither should ns per block op.
    """
    allocator = BlockAllocator(num_blocks)
    allocator.allocate(num_blocks // 2)
    num_free = allocator.num_free

    def round_trip() -> None:  # leaves the same free set behind, so every round starts alike
        singles = [allocator.allocate(1)[0] for _ in range(SINGLES)]
        batch = allocator.allocate(BATCH)
        allocator.free(singles)
        allocator.free(batch)

    benchmark(round_trip)
    assert allocator.num_free == num_free
    if benchmark.enabled:
        benchmark.extra_info["num_blocks"] = num_blocks
        benchmark.extra_info["ns_per_block_op"] = median_s(benchmark) / BLOCK_OPS * 1e9


@dataclass(frozen=True)
class LongSequence:
    """One request that holds every block of a pool of random data, in random block order."""

    manager: KVCacheManager
    req: Request
    slots: torch.Tensor  # token i's flat slot, from the spec's formula
    expected: torch.Tensor  # [SEQ_LEN, HEAD_DIM]: the request's rows in logical order

    @property
    def rows(self) -> torch.Tensor:
        """The pool as one row per slot: `[num_blocks * block_size, head_dim]`."""
        return self.manager.physical_kv_cache.view(-1, HEAD_DIM)


@pytest.fixture(scope="module")
def long_sequence() -> LongSequence:
    """Built once per module: filling the pool and the reference slots take a while."""
    manager = KVCacheManager(SEQ_LEN // BLOCK_SIZE, BLOCK_SIZE, HEAD_DIM)
    manager.physical_kv_cache.copy_(
        torch.randn(manager.physical_kv_cache.shape, generator=torch.Generator().manual_seed(0))
    )
    req = Request(0, SEQ_LEN)
    manager.allocate_for_prefill(req)
    random.Random(0).shuffle(req.block_table)
    table = req.block_table
    slots = torch.tensor(
        [table[i // BLOCK_SIZE] * BLOCK_SIZE + i % BLOCK_SIZE for i in range(SEQ_LEN)]
    )
    expected = manager.physical_kv_cache.view(-1, HEAD_DIM)[slots]  # a copy
    return LongSequence(manager, req, slots, expected)


GATHERS: dict[str, Callable[[LongSequence], torch.Tensor]] = {
    "get_physical_cache": lambda seq: seq.manager.get_physical_cache(seq.req),
    "slot_mapping+index_select": lambda seq: seq.rows.index_select(
        0, seq.manager.slot_mapping(seq.req)
    ),
    "index_select_baseline": lambda seq: seq.rows.index_select(0, seq.slots),
}


@pytest.mark.benchmark(group="gather")
@pytest.mark.parametrize("name", GATHERS)
def test_gather(benchmark: BenchmarkFixture, long_sequence: LongSequence, name: str) -> None:
    """Gather a 32 768-token sequence (16 MiB of float32 rows) from a shuffled block table.

    `get_physical_cache`, and `slot_mapping` followed by the gather through its
    slots, against a plain `index_select` through slots computed beforehand (same bytes moved).
    """
    out = benchmark(GATHERS[name], long_sequence)
    assert torch.equal(out, long_sequence.expected)
    if benchmark.enabled:
        # Counts the bytes of the output only (the rows read are as many again, plus the indices).
        output_bytes = out.numel() * out.element_size()
        benchmark.extra_info["output_GB_per_s"] = output_bytes / median_s(benchmark) / 1e9
