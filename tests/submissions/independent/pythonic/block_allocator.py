"""A pool of KV-cache block ids with per-block reference counts.

Free ids wait in a deque; every id also has a reference count, and an id sits in the deque
exactly when its count is zero. All validation happens before any mutation, so a call that
raises leaves the pool untouched.
"""

from collections import Counter, deque
from collections.abc import Iterable, Iterator
from numbers import Integral


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM."""


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        if not isinstance(num_blocks, Integral) or num_blocks < 0:
            raise ValueError(f"num_blocks must be a non-negative int, got {num_blocks!r}")
        self.num_blocks = int(num_blocks)
        self._refs = [0] * self.num_blocks
        self._free_ids: deque[int] = deque(range(self.num_blocks))

    # -- small helpers -------------------------------------------------------------------

    def _in_range(self, block_id: object) -> bool:
        return isinstance(block_id, Integral) and 0 <= block_id < self.num_blocks

    def _problems(self, wanted: Counter[int]) -> Iterator[str]:
        """Yield a description of every id that cannot lose the references asked of it."""
        for block_id, times in wanted.items():
            if not self._in_range(block_id):
                yield f"block id {block_id!r} is out of range 0..{self.num_blocks - 1}"
            elif self._refs[block_id] == 0:
                yield f"block {block_id} is not allocated"
            elif self._refs[block_id] < times:
                yield f"block {block_id} freed {times} times but holds {self._refs[block_id]}"

    def _release(self, wanted: Counter[int]) -> Iterator[int]:
        """Drop the references and yield each id whose count fell to zero."""
        for block_id, times in wanted.items():
            self._refs[block_id] -= times
            if self._refs[block_id] == 0:
                yield block_id

    # -- the contract ----------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        return len(self._free_ids)

    def allocate(self, n: int = 1) -> list[int]:
        if not isinstance(n, Integral) or n < 0:
            raise ValueError(f"cannot allocate {n!r} blocks")
        if n > self.num_free:
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {self.num_free} free")
        taken = [self._free_ids.popleft() for _ in range(n)]
        for block_id in taken:
            self._refs[block_id] = 1
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        wanted = Counter(block_ids)
        if problem := next(self._problems(wanted), None):
            raise ValueError(problem)
        self._free_ids.extend(self._release(wanted))

    def incref(self, block_id: int) -> None:
        if not self._in_range(block_id):
            raise ValueError(f"block id {block_id!r} is out of range")
        if self._refs[block_id] == 0:
            raise ValueError(f"block {block_id} is free; only allocated blocks can be shared")
        self._refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        if not self._in_range(block_id):
            raise ValueError(f"block id {block_id!r} is out of range")
        return self._refs[block_id]
