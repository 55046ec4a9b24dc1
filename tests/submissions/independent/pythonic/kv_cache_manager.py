"""A paged KV cache: requests borrow fixed-size blocks from a shared pool.

Logical block `j` of a request lives in physical block `block_table[j]`, so token `i` sits at
row `i % block_size` of block `block_table[i // block_size]`. The block bookkeeping (free ids
and reference counts) is delegated to `BlockAllocator`; this class adds the per-request rules,
the gather helpers and copy-on-write for forked requests.
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
    """A live, read-only view of the allocator's free ids (no copy is made)."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self._allocator = allocator

    def __len__(self) -> int:
        return self._allocator.num_free

    def __contains__(self, block_id: object) -> bool:
        return (
            isinstance(block_id, int)
            and 0 <= block_id < self._allocator.num_blocks
            and self._allocator.ref_count(block_id) == 0
        )

    def __iter__(self) -> Iterator[int]:
        return (b for b in range(self._allocator.num_blocks) if b in self)


def _blocks_for(tokens: int, block_size: int) -> int:
    """How many blocks of `block_size` rows hold `tokens` rows."""
    return -(-tokens // block_size)


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if head_dim < 1:
            raise ValueError(f"head_dim must be >= 1, got {head_dim}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self.allocator = BlockAllocator(num_blocks)
        self._free_view = FreeBlockView(self.allocator)

    # -- derived values --------------------------------------------------------------------

    @property
    def free_blocks(self) -> Collection[int]:
        return self._free_view

    @property
    def num_free(self) -> int:
        return self.allocator.num_free

    @property
    def flat_cache(self) -> torch.Tensor:
        """The pool seen as one row per slot: `[num_blocks * block_size, head_dim]`."""
        return self.physical_kv_cache.view(-1, self.head_dim)

    def _needed(self, req: Request) -> int:
        return _blocks_for(req.seq_len, self.block_size)

    def _table_tensor(self, req: Request) -> torch.Tensor:
        """The blocks that hold `req`'s tokens, as an int64 tensor."""
        return torch.tensor(req.block_table[: self._needed(req)], dtype=torch.long)

    # -- part 2 ----------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        if req.block_table:
            raise ValueError(f"request {req.request_id} already holds blocks")
        req.block_table.extend(self.allocator.allocate(self._needed(req)))

    def allocate_for_decode(self, req: Request) -> None:
        if len(req.block_table) != self._needed(req):
            raise ValueError(
                f"request {req.request_id} holds {len(req.block_table)} blocks "
                f"for {req.seq_len} tokens"
            )
        position = req.seq_len
        if position % self.block_size == 0:
            (fresh,) = self.allocator.allocate(1)
            req.block_table.append(fresh)
        elif self.allocator.ref_count(last := req.block_table[-1]) > 1:
            (fresh,) = self.allocator.allocate(1)
            self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[last])
            self.allocator.free([last])
            req.block_table[-1] = fresh
        req.seq_len = position + 1

    def free(self, req: Request) -> None:
        self.allocator.free(req.block_table)
        req.block_table.clear()

    # -- part 3 ----------------------------------------------------------------------------

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        blocks = self.physical_kv_cache.index_select(0, self._table_tensor(req))
        return blocks.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        offsets = torch.arange(self.block_size, dtype=torch.long)
        slots = self._table_tensor(req).unsqueeze(1) * self.block_size + offsets
        return slots.reshape(-1)[: req.seq_len]

    # -- part 6 ----------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        if any(self.allocator.ref_count(b) == 0 for b in parent.block_table):
            raise ValueError(f"request {parent.request_id} holds a block that is free")
        child = Request(child_id, parent.seq_len)
        for block_id in parent.block_table:
            self.allocator.incref(block_id)
        child.block_table = list(parent.block_table)
        return child
