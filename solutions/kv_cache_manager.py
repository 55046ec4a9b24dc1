"""Parts 2, 3 and 6: paged KV-cache allocation, the block gather, and prefix sharing.

A request's tokens live in fixed-size blocks scattered over one physical pool. Its
`block_table` maps logical block `j` (tokens `j*block_size .. (j+1)*block_size - 1`) to a
physical block id, so token `i` lives in block `block_table[i // block_size]` at offset
`i % block_size`.

Invariant, after every call, for each live request:
`len(req.block_table) == ceil(req.seq_len / block_size)`. Every operation that raises leaves
every object as it was (strong exception guarantee).
"""

from collections.abc import Collection, Iterator

import torch

from .block_allocator import BlockAllocator


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative integers: the number of size-`b` blocks `a` tokens fill."""
    return (a + b - 1) // b


class Request:
    """One sequence: its id, how many tokens it holds, and where they live."""

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


class FreeBlocks(Collection[int]):
    """The free block ids of an allocator, as a live read-only view built on its contract alone
    (`num_free`, `ref_count`), so the manager runs on any allocator: `len()` is O(1), iterating
    is O(num_blocks)."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self.allocator = allocator

    def __len__(self) -> int:
        return self.allocator.num_free

    def __contains__(self, block_id: object) -> bool:
        in_range = isinstance(block_id, int) and 0 <= block_id < self.allocator.num_blocks
        return in_range and self.allocator.ref_count(block_id) == 0

    def __iter__(self) -> Iterator[int]:
        blocks = range(self.allocator.num_blocks)
        return (block_id for block_id in blocks if self.allocator.ref_count(block_id) == 0)


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if head_dim < 1:
            raise ValueError(f"head_dim must be >= 1, got {head_dim}")
        self.allocator = BlockAllocator(num_blocks)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)

    @property
    def free_blocks(self) -> Collection[int]:
        """The free block ids (a live read-only view; `len()` is the number free)."""
        return FreeBlocks(self.allocator)

    # Part 2 ------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        """Give `req` the `ceil(seq_len / block_size)` blocks its prompt fills, in logical order."""
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks: prefill it only once")
        req.block_table.extend(self.allocator.allocate(cdiv(req.seq_len, self.block_size)))

    def allocate_for_decode(self, req: Request) -> None:
        """Make room for one more token, then count it (`req.seq_len += 1`).

        The new token has position `seq_len` (0-based). It starts a new logical block exactly
        when `seq_len % block_size == 0`, which also holds for `block_size == 1`. Otherwise it
        goes into the last block, which is first copied if another request shares it.
        The increment comes last, so an OutOfBlocks leaves `req` untouched.
        """
        self._check_consistent(req)
        if req.seq_len % self.block_size == 0:
            req.block_table.extend(self.allocator.allocate(1))
        elif self.allocator.ref_count(req.block_table[-1]) > 1:
            req.block_table[-1] = self._copy_on_write(req.block_table[-1])
        req.seq_len += 1

    def free(self, req: Request) -> None:
        """Return one reference to each of `req`'s blocks and empty its block table."""
        self.allocator.free(req.block_table)
        req.block_table.clear()

    # Part 3 ------------------------------------------------------------------------------

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        """`[seq_len, head_dim]`: the request's cache rows in logical order (a copy).

        Gathers whole blocks through the block table (one `index_select` over contiguous
        block-sized rows), then drops the unused tail of the last block.
        """
        self._check_consistent(req)
        blocks = torch.tensor(req.block_table, dtype=torch.long)
        rows = self.physical_kv_cache.index_select(0, blocks).view(-1, self.head_dim)
        return rows[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        """`LongTensor[seq_len]`: token `i`'s row in `physical_kv_cache.view(-1, head_dim)`."""
        self._check_consistent(req)
        blocks = torch.tensor(req.block_table, dtype=torch.long)
        slots = blocks[:, None] * self.block_size + torch.arange(self.block_size)
        return slots.flatten()[: req.seq_len]

    # Part 6 ------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        """A new request with `parent`'s tokens, sharing every block (one more reference each)."""
        self._check_consistent(parent)
        for block_id in parent.block_table:
            if self.allocator.ref_count(block_id) == 0:
                raise ValueError(f"request {parent.request_id} holds free block {block_id}")
        child = Request(child_id, parent.seq_len)
        for block_id in parent.block_table:
            self.allocator.incref(block_id)
        child.block_table = list(parent.block_table)
        return child

    def _copy_on_write(self, shared_block: int) -> int:
        """Copy a shared block into a fresh one that the caller holds alone; return its id."""
        (private_block,) = self.allocator.allocate(1)
        self.physical_kv_cache[private_block] = self.physical_kv_cache[shared_block]
        self.allocator.free([shared_block])
        return private_block

    def _check_consistent(self, req: Request) -> None:
        expected = cdiv(req.seq_len, self.block_size)
        if len(req.block_table) != expected:
            raise ValueError(
                f"request {req.request_id} has seq_len {req.seq_len} and "
                f"{len(req.block_table)} blocks, expected {expected}: "
                "prefill it first, and do not use it after free()"
            )
