"""Decode batches to check a paged-attention kernel on, and how close it must come (the contract's
part 4).

Every pool slot a correct kernel must not read holds NaN: slots past a sequence's length in
its last block, blocks no sequence owns, and the block that padding table entries name. A
stray read turns the output NaN (`0 * NaN` is NaN, so only a masked load keeps it out).

Accuracy is relative, per output row: for each (sequence, head) of a non-empty sequence,
`max |out - ref| / max |ref|` over the head's lanes; a case's error is the largest over its
rows, and must stay within `TOLERANCE[dtype]`. Used by the kit's tests and by the grader.
"""

import math
from dataclasses import dataclass

import torch

TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
# Logits as large as real models' outliers (the grader's `check_large_logits`): unit-variance q
# and k of head dim 32 at scale 40 give scores of standard deviation about 230, from about -500 to
# +600, past where float32's exp overflows (about 88); over three blocks, the max of some
# (sequence, head) rises in a later block by more than that, so a kernel without the running max,
# or one that keeps its first block's, overflows (tests/grader/checks/test_kernel_cases.py).
LARGE_LOGITS = {"seq_lens": [40, 17], "block_size": 16, "seed": 5}
LARGE_LOGITS_SCALE = 40.0


@dataclass(frozen=True)
class Case:
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_tables: torch.Tensor
    seq_lens: torch.Tensor

    @property
    def inputs(self) -> tuple[torch.Tensor, ...]:
        return self.q, self.k_cache, self.v_cache, self.block_tables, self.seq_lens


def shuffled_tables(seq_lens: list[int], block_size: int, seed: int) -> list[list[int]]:
    """Each sequence's blocks, scattered over a shuffled pool, then one padding entry or more
    naming the last block of the pool, which no sequence owns."""
    needed = [math.ceil(n / block_size) for n in seq_lens]
    order = torch.randperm(sum(needed), generator=torch.Generator().manual_seed(seed)).tolist()
    padding = sum(needed)
    width = max(needed) + 1
    tables, start = [], 0
    for count in needed:
        tables.append(order[start : start + count] + [padding] * (width - count))
        start += count
    return tables


def nan_pool(
    shape: tuple[int, ...],
    tables: list[list[int]],
    seq_lens: list[int],
    generator: torch.Generator,
) -> torch.Tensor:
    """A `[num_blocks, block_size, ...]` pool: random rows in the slots the sequences own, NaN
    everywhere else."""
    pool = torch.full(shape, math.nan)
    block_size = shape[1]
    for table, seq_len in zip(tables, seq_lens, strict=True):
        for t in range(seq_len):
            pool[table[t // block_size], t % block_size] = torch.randn(
                shape[2:], generator=generator
            )
    return pool


def make_case(
    seq_lens: list[int],
    *,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 32,
    block_size: int = 8,
    dtype: torch.dtype = torch.float32,
    tables: list[list[int]] | None = None,
    seed: int = 0,
    device: str = "cpu",
) -> Case:
    """A decode batch whose caches hold random rows in the slots the sequences own and NaN in
    every other slot. `tables` defaults to `shuffled_tables`; a block may appear in several
    tables or twice in one (its slots are then owned if any use owns them)."""
    if tables is None:
        tables = shuffled_tables(seq_lens, block_size, seed)
    generator = torch.Generator().manual_seed(seed)
    num_blocks = max(max(table) for table in tables) + 1
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = nan_pool(shape, tables, seq_lens, generator)
    v_cache = nan_pool(shape, tables, seq_lens, generator)
    q = torch.randn(len(seq_lens), num_heads, head_dim, generator=generator)
    return Case(
        q.to(device, dtype),
        k_cache.to(device, dtype),
        v_cache.to(device, dtype),
        torch.tensor(tables, dtype=torch.int32, device=device),
        torch.tensor(seq_lens, dtype=torch.int32, device=device),
    )


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """The largest, over (sequence, head) rows, of `max |out - ref| / max |ref|` in the row."""
    error = (out.double() - ref).abs().amax(dim=-1)
    return (error / ref.abs().amax(dim=-1)).max().item()
