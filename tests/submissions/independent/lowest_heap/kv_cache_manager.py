"""A paged KV-cache manager on top of the lowest-id-first block allocator.

Each live request is registered in a dict keyed by its request id; the block table itself stays
on the `Request` object, which is what callers read. Decoding allocates before it counts, and a
shared last block is copied out (copy-on-write) before the new token lands in it.
"""

from collections.abc import Collection

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


def blocks_for(num_tokens: int, block_size: int) -> int:
    """How many blocks of `block_size` slots hold `num_tokens` tokens."""
    return -(-num_tokens // block_size)


def _check_positive(value: int, name: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_table(req: Request, block_size: int) -> None:
    """ValueError unless `req`'s table has exactly the blocks its length needs."""
    expected = blocks_for(req.seq_len, block_size)
    if len(req.block_table) != expected:
        raise ValueError(
            f"request {req.request_id} has {len(req.block_table)} blocks for "
            f"{req.seq_len} tokens; expected {expected}"
        )


def _used_blocks(req: Request, block_size: int) -> list[int]:
    """The table entries that hold the request's tokens (never any padding past them)."""
    return req.block_table[: blocks_for(req.seq_len, block_size)]


def _flat_slots(table: list[int], seq_len: int, block_size: int) -> torch.Tensor:
    """Token i's slot `table[i // block_size] * block_size + i % block_size`, for all i."""
    starts = torch.tensor(table, dtype=torch.long) * block_size
    offsets = torch.arange(block_size, dtype=torch.long)
    return (starts.unsqueeze(1) + offsets.unsqueeze(0)).flatten()[:seq_len]


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        _check_positive(num_blocks, "num_blocks", 0)
        _check_positive(block_size, "block_size", 1)
        _check_positive(head_dim, "head_dim", 1)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self._allocator = BlockAllocator(num_blocks)
        self._live: dict[int, Request] = {}

    @property
    def free_blocks(self) -> Collection[int]:
        """The free block ids (a live view: read it, do not change it)."""
        return self._allocator.free_ids

    def _register(self, req: Request) -> None:
        self._live[req.request_id] = req

    def _unregister(self, req: Request) -> None:
        if self._live.get(req.request_id) is req:
            del self._live[req.request_id]

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        """Give `req` the blocks its whole prompt needs, in logical order."""
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks")
        needed = blocks_for(req.seq_len, self.block_size)
        req.block_table.extend(self._allocator.allocate(needed))
        self._register(req)

    def allocate_for_decode(self, req: Request) -> None:
        """Make room for token number `req.seq_len`, then count it."""
        _check_table(req, self.block_size)
        position = req.seq_len
        if position % self.block_size == 0:
            (fresh,) = self._allocator.allocate(1)
            req.block_table.append(fresh)
        else:
            last = len(req.block_table) - 1
            shared = req.block_table[last]
            if self._allocator.ref_count(shared) > 1:
                (fresh,) = self._allocator.allocate(1)
                self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[shared])
                self._allocator.free([shared])
                req.block_table[last] = fresh
        req.seq_len = position + 1
        self._register(req)

    def free(self, req: Request) -> None:
        """Drop `req`'s hold on each of its blocks and empty its table."""
        self._allocator.free(req.block_table)
        req.block_table.clear()
        self._unregister(req)

    # Part 3 ------------------------------------------------------------------------------

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        """The request's rows in token order, `[seq_len, head_dim]`, copied out of the pool."""
        used = _used_blocks(req, self.block_size)
        index = torch.tensor(used, dtype=torch.long)
        whole = self.physical_kv_cache.index_select(0, index)
        return whole.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        """Each token's flat slot in `physical_kv_cache.view(-1, head_dim)`, as int64."""
        return _flat_slots(_used_blocks(req, self.block_size), req.seq_len, self.block_size)

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        """A child that shares every block of `parent` (one more reference each)."""
        held = [self._allocator.ref_count(block_id) for block_id in parent.block_table]
        if 0 in held:
            raise ValueError(f"request {parent.request_id} holds a block that is free")
        child = Request(child_id, parent.seq_len)
        for block_id in parent.block_table:
            self._allocator.incref(block_id)
        child.block_table = list(parent.block_table)
        self._register(child)
        return child
