"""Paged KV-cache manager: block tables for requests over a shared pool, with fork and COW."""

from collections.abc import Collection
from dataclasses import dataclass, field

import torch

from .block_allocator import BlockAllocator


class Request:
    """One sequence: its id, how many tokens it holds, and where they live. Given: keep as is.

    `seq_len` starts at `prompt_len` and grows by one per decoded token. `block_table` starts
    empty; `allocate_for_prefill` fills it.
    """

    def __init__(self, request_id: int, prompt_len: int) -> None:
        if prompt_len < 0:
            raise ValueError(f"prompt_len must be >= 0, got {prompt_len}")
        self.request_id = request_id
        self.seq_len = prompt_len
        self.block_table: list[int] = []

    def __repr__(self) -> str:
        return (
            f"Request(request_id={self.request_id}, seq_len={self.seq_len}, "
            f"block_table={self.block_table})"
        )


def _blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


@dataclass(eq=False)
class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    num_blocks: int
    block_size: int
    head_dim: int
    physical_kv_cache: torch.Tensor = field(init=False, repr=False)
    allocator: BlockAllocator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {self.num_blocks}")
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")
        if self.head_dim < 1:
            raise ValueError(f"head_dim must be >= 1, got {self.head_dim}")
        self.allocator = BlockAllocator(self.num_blocks)
        self.physical_kv_cache = torch.zeros(
            self.num_blocks, self.block_size, self.head_dim, dtype=torch.float32
        )

    @property
    def free_blocks(self) -> Collection[int]:
        return _FreeView(self.allocator)

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks")
        need = _blocks_for(req.seq_len, self.block_size)
        req.block_table.extend(self.allocator.allocate(need))

    def allocate_for_decode(self, req: Request) -> None:
        pos = req.seq_len  # 0-based position of the token being added
        if pos % self.block_size == 0:
            req.block_table.extend(self.allocator.allocate(1))
        else:
            last = req.block_table[-1]
            if self.allocator.ref_count(last) > 1:
                (fresh,) = self.allocator.allocate(1)
                self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[last])
                self.allocator.free([last])
                req.block_table[-1] = fresh
        req.seq_len = pos + 1

    def free(self, req: Request) -> None:
        self.allocator.free(req.block_table)
        req.block_table.clear()

    # Part 3 ------------------------------------------------------------------------------

    def _used_blocks(self, req: Request) -> torch.Tensor:
        used = req.block_table[: _blocks_for(req.seq_len, self.block_size)]
        return torch.tensor(used, dtype=torch.long)

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        rows = self.physical_kv_cache.index_select(0, self._used_blocks(req))
        return rows.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        offsets = torch.arange(self.block_size, dtype=torch.long)
        starts = self._used_blocks(req) * self.block_size
        return (starts[:, None] + offsets).reshape(-1)[: req.seq_len]

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        if any(self.allocator.ref_count(b) == 0 for b in parent.block_table):
            raise ValueError(f"request {parent.request_id} holds a free block")
        child = Request(child_id, parent.seq_len)
        for b in parent.block_table:
            self.allocator.incref(b)
        child.block_table = list(parent.block_table)
        return child


@dataclass(frozen=True)
class _FreeView:
    """A sized, read-only view of the free ids, built on the allocator's public members only."""

    allocator: BlockAllocator

    def __len__(self) -> int:
        return self.allocator.num_free

    def __iter__(self):
        alloc = self.allocator
        return (b for b in range(alloc.num_blocks) if alloc.ref_count(b) == 0)

    def __contains__(self, block_id: object) -> bool:
        alloc = self.allocator
        return (
            isinstance(block_id, int)
            and 0 <= block_id < alloc.num_blocks
            and (alloc.ref_count(block_id) == 0)
        )
