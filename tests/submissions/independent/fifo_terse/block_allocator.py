"""Block allocator: a FIFO queue of free ids, a flag per block and a refcount per held block."""

import operator
from collections import deque
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


def _id(b) -> int:
    try:
        return operator.index(b)
    except TypeError:
        raise ValueError(f"bad block id {b!r}") from None


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self._q = deque(range(num_blocks))
        self._used = [False] * num_blocks
        self._rc: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        return len(self._q)

    def allocate(self, n: int = 1) -> list[int]:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        if n > len(self._q):
            raise OutOfBlocks(f"OOM: asked for {n}, {len(self._q)} free")
        out = []
        for _ in range(n):
            b = self._q.popleft()
            self._used[b] = True
            self._rc[b] = 1
            out.append(b)
        return out

    def _check(self, b) -> int:
        b = _id(b)
        if not 0 <= b < self.num_blocks or not self._used[b]:
            raise ValueError(f"block {b} is not allocated")
        return b

    def free(self, block_ids: Iterable[int]) -> None:
        cnt: dict[int, int] = {}
        for b in block_ids:
            b = self._check(b)
            c = cnt.get(b, 0) + 1
            if c > self._rc[b]:
                raise ValueError(f"block {b} freed more times than it is held")
            cnt[b] = c
        for b, c in cnt.items():
            r = self._rc[b] - c
            if r:
                self._rc[b] = r
            else:
                del self._rc[b]
                self._used[b] = False
                self._q.append(b)

    def incref(self, block_id: int) -> None:
        b = self._check(block_id)
        self._rc[b] += 1

    def ref_count(self, block_id: int) -> int:
        b = _id(block_id)
        if not 0 <= b < self.num_blocks:
            raise ValueError(f"block {b} out of range")
        return self._rc.get(b, 0)
