"""A pool of KV-cache block ids that always hands out the lowest free ids first.

Free ids live twice: in a min-heap, which decides the order they are handed out in, and in a
set, which answers "is this id free?" in O(1). Reference counts sit in a flat list indexed by
block id. Every public method validates its whole input before it touches either structure,
so a call that raises leaves the pool as it found it.
"""

import heapq
from collections import Counter
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


def _as_count(value: object, what: str) -> int:
    """`value` as a non-negative int, or ValueError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


def _in_pool(block_id: object, size: int) -> bool:
    """Whether `block_id` names a block of a pool of `size` blocks."""
    return isinstance(block_id, int) and not isinstance(block_id, bool) and 0 <= block_id < size


def _pop_lowest(heap: list[int], free_set: set[int], n: int) -> list[int]:
    """Take the `n` smallest ids out of both free structures (the caller checked there are n)."""
    taken = [heapq.heappop(heap) for _ in range(n)]
    free_set.difference_update(taken)
    return taken


def _push_back(heap: list[int], free_set: set[int], block_id: int) -> None:
    """Return one id to both free structures."""
    heapq.heappush(heap, block_id)
    free_set.add(block_id)


class BlockAllocator:
    """Hands out block ids, lowest free id first, and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = _as_count(num_blocks, "num_blocks")
        # range(...) is already sorted, hence a valid min-heap without heapify.
        self._heap: list[int] = list(range(num_blocks))
        self._free_set: set[int] = set(self._heap)
        self._refs: list[int] = [0] * num_blocks

    @property
    def num_free(self) -> int:
        """How many blocks are free right now."""
        return len(self._free_set)

    @property
    def free_ids(self) -> set[int]:
        """The set of free ids itself (read it, do not change it)."""
        return self._free_set

    def allocate(self, n: int = 1) -> list[int]:
        """Take the `n` lowest free ids, each now held once; all or nothing."""
        n = _as_count(n, "n")
        if n > len(self._free_set):
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {len(self._free_set)} free")
        taken = _pop_lowest(self._heap, self._free_set, n)
        for block_id in taken:
            self._refs[block_id] = 1
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference per listed id; ids whose count reaches zero become free again."""
        wanted = Counter(block_ids)
        for block_id, times in wanted.items():
            if not _in_pool(block_id, self.num_blocks):
                raise ValueError(f"block {block_id!r} is not in a pool of {self.num_blocks}")
            held = self._refs[block_id]
            if held == 0:
                raise ValueError(f"block {block_id} is not allocated")
            if times > held:
                raise ValueError(f"block {block_id} freed {times} times but has {held} refs")
        for block_id, times in wanted.items():
            self._refs[block_id] -= times
            if self._refs[block_id] == 0:
                _push_back(self._heap, self._free_set, block_id)

    def incref(self, block_id: int) -> None:
        """One more holder for an allocated block."""
        if not _in_pool(block_id, self.num_blocks):
            raise ValueError(f"block {block_id!r} is not in a pool of {self.num_blocks}")
        if self._refs[block_id] == 0:
            raise ValueError(f"block {block_id} is free; only an allocated block can be shared")
        self._refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        """How many holders `block_id` has (0 when it is free)."""
        if not _in_pool(block_id, self.num_blocks):
            raise ValueError(f"block {block_id!r} is not in a pool of {self.num_blocks}")
        return self._refs[block_id]
