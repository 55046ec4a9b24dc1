"""Parts 2, 3 and 6 · the paged KV-cache manager.

Part 2 · prefill and decode allocation (20 points)
Part 3 · block gather and slot mapping (15 points)
Part 6 · prefix sharing and copy-on-write (10 points, with the reference counts of part 1)

PagedAttention stores a request's keys and values not in one contiguous buffer but in
fixed-size blocks scattered over a shared pool, the way an OS pages virtual memory. Each request
keeps a `block_table`: logical block `j` (its tokens `j*block_size .. (j+1)*block_size - 1`)
lives in physical block `block_table[j]`. So token `i` lives in block
`block_table[i // block_size]`, at offset `i % block_size` inside it.

Invariants after every call, for every live request (the grader checks them after each step):
- `len(req.block_table) == ceil(req.seq_len / block_size)`: never a block too few or too many;
- no block is held by two requests (except blocks shared on purpose by `fork`, part 6);
- `len(free_blocks)` plus the blocks held equals `num_blocks`: nothing leaks.

Error rules: every call that raises leaves every object exactly as it was (no block leaked,
none handed out twice, no `seq_len` changed). Running out of blocks raises RuntimeError
(`OutOfBlocks` from part 1 is one); misuse (prefill twice, a bad size) raises ValueError.

Hints:
- Round up with integers: `ceil(n / b) == (n + b - 1) // b`.
- You may build on your part 1 allocator: `from .block_allocator import BlockAllocator`.
"""

from collections.abc import Collection

import torch


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


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        """A pool of `num_blocks` blocks of `block_size` tokens, `head_dim` floats per token.

        ValueError when `num_blocks < 0`, `block_size < 1` or `head_dim < 1`. Keep the
        attributes below, and set up the free blocks (all blocks start free).
        """
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)

    @property
    def free_blocks(self) -> Collection[int]:
        """The free block ids: any sized collection whose `len()` is the number of free blocks
        (an attribute works too)."""
        raise NotImplementedError("KVCacheManager.free_blocks")

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        """Give `req` exactly `ceil(req.seq_len / block_size)` new blocks, appended to
        `req.block_table` in logical order.

        ValueError if `req.block_table` is not empty; RuntimeError, with nothing allocated,
        when the pool has too few free blocks.
        """
        raise NotImplementedError("KVCacheManager.allocate_for_prefill")

    def allocate_for_decode(self, req: Request) -> None:
        """Count one more token (`req.seq_len += 1`), appending a block when it needs one.

        The new token has 0-based position `req.seq_len` (before the increment). It crosses
        into a new logical block exactly when that position is a multiple of `block_size`.
        Beware the tutorial's test `seq_len % block_size == 1` after incrementing: for
        `block_size == 1` every token needs a new block, and `x % 1` is never 1.

        When no block is free it raises RuntimeError and `req.seq_len` is NOT incremented:
        allocate first, count after.

        Part 6: if the token goes into the last block and that block is shared with another
        request (reference count > 1), first copy it into a fresh block (copy-on-write): copy
        its contents in `physical_kv_cache`, drop one reference to the old block, and put the
        new id in `req.block_table`. No other request may ever see its cache change.
        """
        raise NotImplementedError("KVCacheManager.allocate_for_decode")

    def free(self, req: Request) -> None:
        """Return `req`'s blocks (one reference each) and empty `req.block_table`."""
        raise NotImplementedError("KVCacheManager.free")

    # Part 3 ------------------------------------------------------------------------------

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        """`[req.seq_len, head_dim]`: the request's cache rows in logical order.

        Gather through the block table: token `i` is row `i % block_size` of block
        `req.block_table[i // block_size]` in `physical_kv_cache`. Rows past `seq_len` in the
        last block are not part of the answer. Vectorise it: a Python loop over tokens is too
        slow on long sequences (timed against the reference). `index_select` or fancy indexing
        over whole blocks, then a reshape and a slice, does it in one gather.
        """
        raise NotImplementedError("KVCacheManager.get_physical_cache")

    def slot_mapping(self, req: Request) -> torch.Tensor:
        """`torch.LongTensor[req.seq_len]`: token `i`'s flat slot
        `block_table[i // block_size] * block_size + i % block_size`, so that
        `physical_kv_cache.view(-1, head_dim)[slot_mapping(req)]` equals
        `get_physical_cache(req)`. This is what a kernel uses to write a new token's K and V.
        Vectorised, like the gather.
        """
        raise NotImplementedError("KVCacheManager.slot_mapping")

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        """A new request `child_id` with `parent`'s `seq_len`, whose `block_table` shares every
        one of `parent`'s blocks (one more reference each: `incref`). Nothing is copied until
        one of them writes into a shared block (see `allocate_for_decode`).
        """
        raise NotImplementedError("KVCacheManager.fork")
