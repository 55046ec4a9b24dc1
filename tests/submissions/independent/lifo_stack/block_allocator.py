"""Block allocator for the paged KV cache, with per-block reference counts.

Free ids sit on a plain Python list used as a LIFO stack; a set mirrors the stack so that
"is this id free?" is answered in O(1). Allocated ids live in a dict mapping id -> count.
"""

from collections import Counter
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


class BlockAllocator:
    """Hands out block ids from a LIFO free stack and tracks how many holders each one has."""

    def __init__(self, num_blocks: int) -> None:
        """Create a pool of `num_blocks` free blocks (ValueError if negative)."""
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks: int = num_blocks
        # Reversed so that the first pops hand out the low ids; any order would do.
        self._stack: list[int] = list(range(num_blocks - 1, -1, -1))
        self._free_set: set[int] = set(self._stack)
        self._refs: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        """Number of blocks currently on the free stack."""
        return len(self._stack)

    def _check_id(self, block_id: int) -> None:
        """Raise ValueError unless `block_id` is an integer id inside the pool."""
        if isinstance(block_id, bool) or not isinstance(block_id, int):
            raise ValueError(f"block id must be an int, got {block_id!r}")
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} outside 0..{self.num_blocks - 1}")

    def allocate(self, n: int = 1) -> list[int]:
        """Pop `n` ids off the free stack, each with one reference; all or nothing."""
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        available = len(self._stack)
        if n > available:
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {available} free")
        taken: list[int] = []
        for _ in range(n):
            block_id = self._stack.pop()
            self._free_set.discard(block_id)
            self._refs[block_id] = 1
            taken.append(block_id)
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference per listed id; ids reaching zero go back on the stack.

        Every id is validated before anything is touched, so a bad call frees nothing.
        """
        wanted: Counter[int] = Counter()
        for block_id in list(block_ids):
            self._check_id(block_id)
            wanted[block_id] += 1
        for block_id, times in wanted.items():
            held = self._refs.get(block_id, 0)
            if held == 0:
                raise ValueError(f"block {block_id} is not allocated")
            if times > held:
                raise ValueError(
                    f"block {block_id} freed {times} times but holds {held} references"
                )
        for block_id, times in wanted.items():
            remaining = self._refs[block_id] - times
            if remaining:
                self._refs[block_id] = remaining
            else:
                del self._refs[block_id]
                self._stack.append(block_id)
                self._free_set.add(block_id)

    def incref(self, block_id: int) -> None:
        """Add a holder to an allocated block; ValueError when it is free or out of range."""
        self._check_id(block_id)
        if block_id in self._free_set:
            raise ValueError(f"block {block_id} is free, cannot add a reference")
        self._refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        """Current number of holders of `block_id` (0 when it is free)."""
        self._check_id(block_id)
        return self._refs.get(block_id, 0)

    def is_free(self, block_id: int) -> bool:
        """Whether `block_id` is on the free stack (membership through the mirror set)."""
        return block_id in self._free_set
