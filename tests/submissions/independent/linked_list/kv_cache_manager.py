"""Paged KV-cache manager: prefill/decode block allocation, gather, slot mapping, fork + COW.

Every argument check lives in a `_check_*` method that raises before anything is touched, so a
call that raises leaves the manager and the request exactly as they were.
"""

from collections.abc import Collection, Iterator

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


class FreeBlockView(Collection[int]):
    """A live, read-only look at the allocator's free blocks (only its public members used)."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self.allocator = allocator

    def __len__(self) -> int:
        return self.allocator.num_free

    def __contains__(self, block_id: object) -> bool:
        a = self.allocator
        if type(block_id) is bool or not isinstance(block_id, int):
            return False
        if block_id < 0 or block_id >= a.num_blocks:
            return False
        return a.ref_count(block_id) == 0

    def __iter__(self) -> Iterator[int]:
        a = self.allocator
        b = 0
        while b < a.num_blocks:
            if a.ref_count(b) == 0:
                yield b
            b += 1


def blocks_for(num_tokens: int, block_size: int) -> int:
    """How many blocks `num_tokens` tokens occupy (integer ceiling)."""
    return (num_tokens + block_size - 1) // block_size


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        self._check_geometry(num_blocks, block_size, head_dim)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self.allocator = BlockAllocator(num_blocks)
        self._free_view = FreeBlockView(self.allocator)

    @property
    def free_blocks(self) -> Collection[int]:
        return self._free_view

    # -- checks (raise before any state changes) ----------------------------------------------

    @staticmethod
    def _check_geometry(num_blocks: int, block_size: int, head_dim: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if head_dim < 1:
            raise ValueError(f"head_dim must be >= 1, got {head_dim}")

    def _check_not_prefilled(self, req: Request) -> None:
        if len(req.block_table) != 0:
            raise ValueError(f"request {req.request_id} already holds blocks")
        if req.seq_len < 0:
            raise ValueError(f"request {req.request_id} has a negative seq_len")

    def _check_table_matches(self, req: Request) -> None:
        need = blocks_for(req.seq_len, self.block_size)
        if len(req.block_table) != need:
            raise ValueError(
                f"request {req.request_id}: {req.seq_len} tokens need {need} blocks, "
                f"its table has {len(req.block_table)}"
            )

    def _check_blocks_held(self, req: Request) -> None:
        table = req.block_table
        j = 0
        while j < len(table):
            b = table[j]
            if self.allocator.ref_count(b) == 0:
                raise ValueError(f"request {req.request_id} names block {b}, which is free")
            j += 1

    def _check_free_count(self, needed: int) -> None:
        have = self.allocator.num_free
        if needed > have:
            raise RuntimeError(f"OOM: need {needed} block(s), {have} free")

    # -- part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        self._check_not_prefilled(req)
        need = blocks_for(req.seq_len, self.block_size)
        self._check_free_count(need)
        got = self.allocator.allocate(need)
        req.block_table.extend(got)

    def allocate_for_decode(self, req: Request) -> None:
        self._check_table_matches(req)
        pos = req.seq_len
        bs = self.block_size
        if pos % bs == 0:
            # The token opens a fresh logical block.
            self._check_free_count(1)
            fresh = self.allocator.allocate(1)[0]
            req.block_table.append(fresh)
        else:
            j = pos // bs
            old = req.block_table[j]
            if self.allocator.ref_count(old) > 1:
                # Copy-on-write: the last block is shared, give this request its own copy.
                self._check_free_count(1)
                fresh = self.allocator.allocate(1)[0]
                self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[old])
                self.allocator.free([old])
                req.block_table[j] = fresh
        req.seq_len = pos + 1

    def free(self, req: Request) -> None:
        self.allocator.free(req.block_table)
        req.block_table.clear()

    # -- part 3 ------------------------------------------------------------------------------

    def _table_tensor(self, req: Request) -> torch.Tensor:
        need = blocks_for(req.seq_len, self.block_size)
        if len(req.block_table) < need:
            raise ValueError(
                f"request {req.request_id}: {req.seq_len} tokens need {need} blocks, "
                f"its table has {len(req.block_table)}"
            )
        return torch.tensor(req.block_table[:need], dtype=torch.long)

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        ids = self._table_tensor(req)
        picked = self.physical_kv_cache.index_select(0, ids)
        return picked.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        ids = self._table_tensor(req)
        bs = self.block_size
        offsets = torch.arange(bs, dtype=torch.long)
        slots = ids.unsqueeze(1) * bs + offsets.unsqueeze(0)
        return slots.reshape(-1)[: req.seq_len]

    # -- part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        self._check_table_matches(parent)
        self._check_blocks_held(parent)
        child = Request(child_id, parent.seq_len)
        table = parent.block_table
        j = 0
        while j < len(table):
            self.allocator.incref(table[j])
            child.block_table.append(table[j])
            j += 1
        return child
