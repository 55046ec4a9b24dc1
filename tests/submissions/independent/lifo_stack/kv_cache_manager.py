"""Paged KV-cache manager: block tables, prefill/decode growth, gather, slot mapping, forks.

The manager sits on top of a `BlockAllocator` and only talks to it through its contract
members, so every allocation rule (all-or-nothing, reference counts) lives in one place.
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


class _FreeBlockView(Collection[int]):
    """A live, read-only view of the allocator's free ids (sized, iterable, searchable)."""

    def __init__(self, allocator: BlockAllocator) -> None:
        """Wrap `allocator`; nothing is copied."""
        self._allocator = allocator

    def __len__(self) -> int:
        """How many blocks are free now."""
        return self._allocator.num_free

    def __iter__(self) -> Iterator[int]:
        """Yield the free ids in increasing order."""
        alloc = self._allocator
        return (b for b in range(alloc.num_blocks) if alloc.ref_count(b) == 0)

    def __contains__(self, item: object) -> bool:
        """Whether `item` is a free block id."""
        if not isinstance(item, int) or not 0 <= item < self._allocator.num_blocks:
            return False
        return self._allocator.ref_count(item) == 0


class KVCacheManager:
    """Owns the physical KV pool and grows each request's block table as it decodes."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        """Build a zeroed pool `[num_blocks, block_size, head_dim]`; ValueError on bad sizes."""
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
        self._allocator = BlockAllocator(num_blocks)
        self._free_view = _FreeBlockView(self._allocator)

    @property
    def free_blocks(self) -> Collection[int]:
        """A sized view of the free block ids."""
        return self._free_view

    # Small private helpers ---------------------------------------------------------------

    def _blocks_for(self, num_tokens: int) -> int:
        """How many blocks `num_tokens` tokens occupy (integer ceiling)."""
        return (num_tokens + self.block_size - 1) // self.block_size

    def _live_table(self, req: Request) -> list[int]:
        """The part of `req.block_table` that its `seq_len` actually uses."""
        return req.block_table[: self._blocks_for(req.seq_len)]

    def _copy_on_write(self, req: Request, logical: int) -> None:
        """Give `req` a private copy of its shared logical block `logical`."""
        old = req.block_table[logical]
        (fresh,) = self._allocator.allocate(1)
        self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[old])
        self._allocator.free([old])
        req.block_table[logical] = fresh

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        """Hand `req` the `ceil(seq_len / block_size)` blocks its prompt fills."""
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks")
        blocks = self._allocator.allocate(self._blocks_for(req.seq_len))
        req.block_table.extend(blocks)

    def allocate_for_decode(self, req: Request) -> None:
        """Make room for one more token, then count it; on failure nothing changes."""
        position = req.seq_len
        if position % self.block_size == 0:
            (block,) = self._allocator.allocate(1)
            req.block_table.append(block)
        else:
            logical = position // self.block_size
            if self._allocator.ref_count(req.block_table[logical]) > 1:
                self._copy_on_write(req, logical)
        req.seq_len = position + 1

    def free(self, req: Request) -> None:
        """Drop one reference from each of `req`'s blocks and empty its table."""
        self._allocator.free(req.block_table)
        req.block_table.clear()

    # Part 3 ------------------------------------------------------------------------------

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        """The request's `[seq_len, head_dim]` rows, gathered whole blocks at a time."""
        index = torch.tensor(self._live_table(req), dtype=torch.long)
        blocks = self.physical_kv_cache.index_select(0, index)
        return blocks.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        """Flat slot of every token: `block * block_size + offset`, as an int64 tensor."""
        table = torch.tensor(self._live_table(req), dtype=torch.long)
        offsets = torch.arange(self.block_size, dtype=torch.long)
        slots = (table.unsqueeze(1) * self.block_size + offsets.unsqueeze(0)).reshape(-1)
        return slots[: req.seq_len].contiguous()

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        """A child request that shares every block of `parent` (one more reference each)."""
        for block in parent.block_table:
            if not 0 <= block < self.num_blocks or self._allocator.ref_count(block) == 0:
                raise ValueError(f"parent block {block} is not allocated")
        child = Request(child_id, parent.seq_len)
        for block in parent.block_table:
            self._allocator.incref(block)
        child.block_table = list(parent.block_table)
        return child
