"""The paged KV-cache manager (parts 2, 3 and 6), written as a worked example.

The big idea, in one paragraph: instead of giving every request one long contiguous buffer, we
cut the cache into equal blocks of `block_size` token rows. A request's tokens are numbered
0, 1, 2, ... ("logical" positions). Logical block `j` holds the tokens
`j * block_size .. (j + 1) * block_size - 1`, and the request's `block_table[j]` says which
physical block of the shared pool stores it. So, for any token position `i`:

    physical block = block_table[i // block_size]
    row inside it  = i % block_size

Everything below is bookkeeping around that one formula. The manager borrows block ids from a
`BlockAllocator` and only uses its public contract (`num_free`, `allocate`, `free`, `incref`,
`ref_count`), so any allocator that keeps that contract would work here too.
"""

from collections.abc import Collection, Iterator

import torch

from .block_allocator import BlockAllocator


def _blocks_needed(num_tokens: int, block_size: int) -> int:
    """How many blocks `num_tokens` tokens occupy: the ceiling of `num_tokens / block_size`,
    computed with integers only (`(n + b - 1) // b`) so no floating point can round wrongly."""
    return (num_tokens + block_size - 1) // block_size


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
    """A live, read-only window onto the allocator's free blocks.

    The contract only asks for "a sized collection whose len() is the number of free blocks".
    Copying the free ids into a new list on every access would cost O(num_blocks), so instead
    this little view asks the allocator on demand: `len()` is O(1), membership is O(1), and
    only a full iteration walks the pool.
    """

    def __init__(self, allocator: BlockAllocator) -> None:
        self._allocator = allocator

    def __len__(self) -> int:
        return self._allocator.num_free

    def __contains__(self, block_id: object) -> bool:
        if not isinstance(block_id, int):
            return False
        if not 0 <= block_id < self._allocator.num_blocks:
            return False
        return self._allocator.ref_count(block_id) == 0

    def __iter__(self) -> Iterator[int]:
        for block_id in range(self._allocator.num_blocks):
            if self._allocator.ref_count(block_id) == 0:
                yield block_id

    def __repr__(self) -> str:
        return f"FreeBlocks({list(self)})"


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        """A pool of `num_blocks` blocks of `block_size` tokens, `head_dim` floats per token.

        ValueError when `num_blocks < 0`, `block_size < 1` or `head_dim < 1`.
        """
        # Validate all three sizes before building anything.
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

        # The allocator does the counting; the view exposes its free blocks as a collection.
        self.allocator = BlockAllocator(num_blocks)
        self._free_view = _FreeBlockView(self.allocator)

    @property
    def free_blocks(self) -> Collection[int]:
        """The free block ids, as a live sized collection (see `_FreeBlockView`)."""
        return self._free_view

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        """Give `req` exactly `ceil(req.seq_len / block_size)` new blocks, in logical order.

        ValueError if `req.block_table` is not empty; RuntimeError, with nothing allocated,
        when the pool has too few free blocks.
        """
        # Step 1: a request is prefilled once. A second prefill would leak its first blocks.
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks; prefill it only once")

        # Step 2: work out how many blocks the prompt fills, rounding up.
        blocks_for_prompt = _blocks_needed(req.seq_len, self.block_size)

        # Step 3: ask for all of them at once. The allocator is all-or-nothing: if the pool is
        # short it raises OutOfBlocks (a RuntimeError) and hands out nothing, and we have not
        # touched the request yet, so nothing at all has changed.
        new_block_ids = self.allocator.allocate(blocks_for_prompt)

        # Step 4: the allocation succeeded; record the blocks in logical order.
        req.block_table.extend(new_block_ids)

    def allocate_for_decode(self, req: Request) -> None:
        """Count one more token (`req.seq_len += 1`), appending a block when it needs one.

        Part 6: when the token lands in a last block that another request also holds, that
        block is copied first (copy-on-write). A RuntimeError leaves everything unchanged.
        """
        # The new token's 0-based position is the current length (before we count it).
        new_token_position = req.seq_len
        row_inside_block = new_token_position % self.block_size

        if row_inside_block == 0:
            # Case A: the token is the first one of a brand-new logical block. We need a fresh
            # block. Allocate FIRST: if the pool is empty this raises, and since we have not
            # yet incremented seq_len, the request is exactly as before.
            [fresh_block] = self.allocator.allocate(1)
            req.block_table.append(fresh_block)
        else:
            # Case B: the token goes into the existing last block, which still has room.
            last_logical_index = len(req.block_table) - 1
            last_block = req.block_table[last_logical_index]
            if self.allocator.ref_count(last_block) > 1:
                # Someone else shares this block; writing our token into it would change what
                # they see. Copy-on-write: take a private copy, then write into the copy.
                # Again, allocate first so a shortage changes nothing.
                [private_block] = self.allocator.allocate(1)
                self.physical_kv_cache[private_block].copy_(self.physical_kv_cache[last_block])
                # We no longer hold the shared block; the other holders keep theirs.
                self.allocator.free([last_block])
                req.block_table[last_logical_index] = private_block

        # Only now, with the slot secured, does the request count the token.
        req.seq_len = new_token_position + 1

    def free(self, req: Request) -> None:
        """Return `req`'s blocks (one reference each) and empty `req.block_table`."""
        # The allocator validates the whole list before dropping any reference, so either all
        # blocks are returned or (on a bad table) none are.
        self.allocator.free(req.block_table)
        req.block_table = []

    # Part 3 ------------------------------------------------------------------------------

    def _table_as_tensor(self, req: Request) -> torch.Tensor:
        """The block ids that actually hold `req`'s tokens, as an int64 tensor.

        Only the first `ceil(seq_len / block_size)` entries matter; anything past them would
        belong to no token.
        """
        blocks_in_use = _blocks_needed(req.seq_len, self.block_size)
        return torch.tensor(req.block_table[:blocks_in_use], dtype=torch.long)

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        """`[req.seq_len, head_dim]`: the request's cache rows in logical order.

        The recipe, all vectorised:
        1. pick the request's blocks out of the pool in table order (`index_select` copies
           whole `[block_size, head_dim]` blocks in one call);
        2. glue the blocks end to end, which lines their rows up in token order;
        3. cut off the unused rows at the end of the last block.
        """
        block_ids = self._table_as_tensor(req)
        picked_blocks = self.physical_kv_cache.index_select(0, block_ids)
        rows_in_token_order = picked_blocks.reshape(-1, self.head_dim)
        return rows_in_token_order[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        """`torch.LongTensor[req.seq_len]`: token `i`'s flat slot
        `block_table[i // block_size] * block_size + i % block_size`.

        Rather than computing the formula per token, we build a small table: one row per block,
        one column per offset inside a block. Row `j` is `block_table[j] * block_size + 0, 1,
        ..., block_size - 1`. Read row after row, that table lists the slots of tokens 0, 1, 2,
        ... in order, so flattening it and trimming the tail gives the answer.
        """
        block_ids = self._table_as_tensor(req)
        first_slot_of_each_block = block_ids * self.block_size
        offsets_inside_block = torch.arange(self.block_size, dtype=torch.long)
        slot_grid = first_slot_of_each_block.unsqueeze(1) + offsets_inside_block.unsqueeze(0)
        return slot_grid.reshape(-1)[: req.seq_len]

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        """A new request `child_id` with `parent`'s `seq_len`, sharing every one of `parent`'s
        blocks (one more reference each). Nothing is copied until someone writes.
        """
        # Step 1: check that every block of the parent is really allocated, so that the
        # increments below cannot fail half-way through.
        for block_id in parent.block_table:
            if self.allocator.ref_count(block_id) == 0:
                raise ValueError(f"parent block {block_id} is not allocated")

        # Step 2: build the child, then give each shared block one more holder.
        child = Request(child_id, parent.seq_len)
        for block_id in parent.block_table:
            self.allocator.incref(block_id)
        child.block_table = list(parent.block_table)
        return child
