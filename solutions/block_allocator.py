"""Part 1 (and the reference counts of part 6): the KV-cache block allocator.

The pool is `num_blocks` fixed-size blocks with ids `0 .. num_blocks-1`. Each block has a
reference count: 0 means free, 1 means held by one request, more means shared by a prefix.

Invariant: a block id is in the free set exactly when its reference count is 0, so
`num_free + (number of blocks with a count > 0) == num_blocks` after every call.

The free set is a dict used as an ordered set: `popitem()` takes the most recently freed block
(LIFO, O(1)); insertion and membership are O(1).
"""

from collections import Counter
from collections.abc import Iterable
from operator import index


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM."""


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        num_blocks = index(num_blocks)
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self._ref_counts = [0] * num_blocks
        # Reversed, so that a fresh pool hands out 0, 1, 2, ... (easier to read in a demo).
        self._free: dict[int, None] = dict.fromkeys(range(num_blocks - 1, -1, -1))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self, n: int = 1) -> list[int]:
        """Take `n` free blocks (reference count 1 each); all or nothing. O(n)."""
        n = index(n)
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        if n > len(self._free):
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {len(self._free)} free")
        block_ids = [self._free.popitem()[0] for _ in range(n)]
        for block_id in block_ids:
            self._ref_counts[block_id] = 1
        return block_ids

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference from each id; a block whose count reaches 0 is free again.

        Checked in full before anything changes: an id out of range, not allocated, or listed
        more times than it has references raises ValueError and frees nothing. O(len(block_ids)).
        """
        drops = Counter(self._checked_id(block_id) for block_id in block_ids)
        for block_id, count in drops.items():
            if count > self._ref_counts[block_id]:
                raise ValueError(
                    f"block {block_id} freed {count} time(s) but holds "
                    f"{self._ref_counts[block_id]} reference(s) (double free?)"
                )
        for block_id, count in drops.items():
            self._ref_counts[block_id] -= count
            if self._ref_counts[block_id] == 0:
                self._free[block_id] = None

    def incref(self, block_id: int) -> None:
        """Add a reference to an allocated block (prefix sharing); ValueError if it is free."""
        block_id = self._checked_id(block_id)
        if self._ref_counts[block_id] == 0:
            raise ValueError(f"block {block_id} is free: only an allocated block can be shared")
        self._ref_counts[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        """How many references `block_id` holds; 0 for a free block."""
        return self._ref_counts[self._checked_id(block_id)]

    def _checked_id(self, block_id: int) -> int:
        try:
            block_id = index(block_id)
        except TypeError:
            raise ValueError(f"block id must be an integer, got {block_id!r}") from None
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} is out of range 0..{self.num_blocks - 1}")
        return block_id
