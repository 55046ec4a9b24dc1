"""Block allocator over a fixed pool: a set of free ids plus per-block reference counters."""

from collections import Counter
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


# A set keeps its hash table at its largest size while it empties, so `set.pop` on a
# nearly exhausted pool would scan a mostly empty table. Rebuilding the set once it has
# shrunk by this factor since its last rebuild keeps the table proportional to its content.
_SHRINK_FACTOR = 8
_MIN_REBUILD = 64


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free: set[int] = set(range(num_blocks))
        self._refs: list[int] = [0] * num_blocks
        self._high_water = num_blocks  # set size at its last (re)build or peak since
        self._held = 0  # blocks with a nonzero reference count

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def num_held(self) -> int:
        return self._held

    def _check_id(self, block_id: int) -> None:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} out of range [0, {self.num_blocks})")

    def _maybe_compact(self) -> None:
        size = len(self._free)
        if self._high_water > _MIN_REBUILD and size * _SHRINK_FACTOR < self._high_water:
            self._free = set(self._free)
            self._high_water = size

    def allocate(self, n: int = 1) -> list[int]:
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        if n > len(self._free):
            raise OutOfBlocks(f"OOM: asked for {n}, {len(self._free)} free")
        take = self._free.pop
        ids = [take() for _ in range(n)]
        refs = self._refs
        for b in ids:
            refs[b] = 1
        self._held += n
        self._maybe_compact()
        return ids

    def free(self, block_ids: Iterable[int]) -> None:
        drops = Counter(block_ids)
        refs = self._refs
        for b, times in drops.items():
            self._check_id(b)
            if refs[b] < times:
                raise ValueError(f"block {b} has {refs[b]} references, cannot drop {times}")
        for b, times in drops.items():
            refs[b] -= times
            if refs[b] == 0:
                self._free.add(b)
                self._held -= 1
        if len(self._free) > self._high_water:
            self._high_water = len(self._free)

    def incref(self, block_id: int) -> None:
        self._check_id(block_id)
        if self._refs[block_id] == 0:
            raise ValueError(f"block {block_id} is free")
        self._refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        self._check_id(block_id)
        return self._refs[block_id]
