"""Paged KV-cache manager: block tables over a shared pool, gather, slot mapping, fork and COW.

Every count here is computed arithmetically from `seq_len` (see `_blocks_for`): a request with
`seq_len` tokens holds exactly `_blocks_for(seq_len, block_size)` blocks, and each method keeps
that equality true on return, or raises before changing anything.
"""

from collections.abc import Collection, Iterator

import torch

from .block_allocator import BlockAllocator


def _blocks_for(tokens: int, block_size: int) -> int:
    """Ceiling division: how many blocks of `block_size` slots hold `tokens` tokens."""
    return -(-tokens // block_size)


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


class _FreeView(Collection[int]):
    """A live, read-only view of the allocator's free ids.

    It relies only on the allocator's public members, so `len()` is O(1) and always equals
    the allocator's current `num_free`.
    """

    def __init__(self, allocator: BlockAllocator) -> None:
        self._allocator = allocator

    def __len__(self) -> int:
        return self._allocator.num_free

    def __contains__(self, block_id: object) -> bool:
        if not isinstance(block_id, int) or not 0 <= block_id < self._allocator.num_blocks:
            return False
        return self._allocator.ref_count(block_id) == 0

    def __iter__(self) -> Iterator[int]:
        for b in range(self._allocator.num_blocks):
            if self._allocator.ref_count(b) == 0:
                yield b


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
        self._free_view = _FreeView(self.allocator)
        # Offsets 0..block_size-1 inside a block, reused by every slot mapping.
        self._offsets = torch.arange(block_size, dtype=torch.long)

    @property
    def free_blocks(self) -> Collection[int]:
        return self._free_view

    def _check_shape(self, req: Request) -> None:
        """Misuse guard: the table must already match the length (the manager's invariant)."""
        if len(req.block_table) != _blocks_for(req.seq_len, self.block_size):
            raise ValueError(
                f"request {req.request_id} holds {len(req.block_table)} blocks for "
                f"{req.seq_len} tokens; was it prefilled?"
            )

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks")
        needed = _blocks_for(req.seq_len, self.block_size)
        # allocate() is all-or-nothing, so a shortage leaves the request untouched.
        req.block_table.extend(self.allocator.allocate(needed))

    def allocate_for_decode(self, req: Request) -> None:
        self._check_shape(req)
        position = req.seq_len  # 0-based slot of the token being added
        if position % self.block_size == 0:
            # The token opens a fresh logical block; nothing shared is written.
            (fresh,) = self.allocator.allocate(1)
            req.block_table.append(fresh)
        else:
            index = position // self.block_size
            current = req.block_table[index]
            if self.allocator.ref_count(current) > 1:
                # Copy-on-write: obtain the copy first, so a shortage changes nothing.
                (fresh,) = self.allocator.allocate(1)
                self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[current])
                self.allocator.free([current])  # still held by the other sharers
                req.block_table[index] = fresh
        # Only count the token once its slot is secured.
        req.seq_len = position + 1

    def free(self, req: Request) -> None:
        self.allocator.free(req.block_table)
        req.block_table.clear()

    # Part 3 ------------------------------------------------------------------------------

    def _table_tensor(self, req: Request) -> torch.Tensor:
        """The blocks that hold the request's tokens, as a LongTensor (padding excluded)."""
        used = _blocks_for(req.seq_len, self.block_size)
        return torch.tensor(req.block_table[:used], dtype=torch.long)

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        blocks = self._table_tensor(req)
        # One gather of whole blocks, flattened to token rows, then the tail trimmed.
        rows = self.physical_kv_cache.index_select(0, blocks)
        return rows.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        blocks = self._table_tensor(req)
        slots = blocks.unsqueeze(1) * self.block_size + self._offsets.unsqueeze(0)
        return slots.reshape(-1)[: req.seq_len]

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        self._check_shape(parent)
        shared = list(parent.block_table)
        for b in shared:
            if self.allocator.ref_count(b) == 0:
                raise ValueError(f"parent {parent.request_id} holds free block {b}")
        child = Request(child_id, parent.seq_len)
        for b in shared:
            self.allocator.incref(b)
        child.block_table = shared
        return child
