"""Part 1 · the KV-cache block allocator (15 points), and the reference counts of part 6.

The KV cache is one pool of `num_blocks` fixed-size blocks with ids `0 .. num_blocks-1`.
Requests never own memory directly: they borrow block ids from this allocator and give them
back. Part 6 lets several requests share a block, so each block carries a reference count
(0 = free, 1 = held by one request, more = shared).

Invariant after every call: an id is free exactly when its reference count is 0, and
`num_free + (number of allocated blocks) == num_blocks`.

Error rules (the grader checks every one of them):
- every call that raises leaves the allocator exactly as it was (nothing half-done);
- `allocate(n)` with `n > num_free` raises a RuntimeError (use `OutOfBlocks` below);
- a negative size, and any bad id in `free` or `incref`, raises ValueError.

Hints:
- Any free-list policy is right (FIFO, LIFO, lowest id first): the grader never checks which
  id you hand out, only that it was free.
- Speed is graded on pools of 1,000 and 200,000 blocks, nearly full and nearly empty:
  `allocate(n)` must cost O(n) and `free(ids)` O(len(ids)), whatever `num_blocks` is and however
  few blocks are free. `list.pop(0)`, `x in some_list`, a scan for the next free block and
  `set.pop()` on a nearly full pool (a set never shrinks its table) are O(num_blocks) and lose
  those points; think `collections.deque`, a stack, or a dict.
- Check everything first, then change anything: that is the whole trick of the strong
  exception guarantee (`free([3, 3])` on a block with one reference frees nothing).
"""

from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        """A pool of `num_blocks` free blocks; `num_blocks < 0` raises ValueError.

        Keep `self.num_blocks` as an attribute. Set up your free list and your reference
        counts here (all blocks start free).
        """
        self.num_blocks = num_blocks

    @property
    def num_free(self) -> int:
        """How many blocks are free right now (an attribute works too)."""
        raise NotImplementedError("BlockAllocator.num_free")

    def allocate(self, n: int = 1) -> list[int]:
        """Take `n` distinct free blocks, each now allocated with reference count 1.

        `n == 0` gives `[]`; `n < 0` raises ValueError; `n > num_free` raises OutOfBlocks and
        allocates nothing (all or nothing). Cost O(n).
        """
        raise NotImplementedError("BlockAllocator.allocate")

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference from each id; a block whose count reaches 0 is free again.

        ValueError, and nothing freed, when an id is out of range, is not allocated, or appears
        in the call more times than it has references (`free([7, 7])` on a block with one).
        Cost O(len(block_ids)).
        """
        raise NotImplementedError("BlockAllocator.free")

    def incref(self, block_id: int) -> None:
        """Part 6: add a reference to an allocated block (a prefix shared by one more request).

        ValueError if `block_id` is free or out of range.
        """
        raise NotImplementedError("BlockAllocator.incref")

    def ref_count(self, block_id: int) -> int:
        """Part 6: how many references `block_id` holds; 0 for a free block."""
        raise NotImplementedError("BlockAllocator.ref_count")
