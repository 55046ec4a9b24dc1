"""A reference-counted pool of KV-cache block ids with a LIFO free stack."""

from collections import Counter
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self.refs = [0] * num_blocks
        self.free_ids = list(range(num_blocks - 1, -1, -1))

    @property
    def num_free(self) -> int:
        return len(self.free_ids)

    def allocate(self, n: int = 1) -> list[int]:
        if n < 0:
            raise ValueError(f"cannot allocate {n} blocks")
        if n > len(self.free_ids):
            raise OutOfBlocks(f"OOM: asked for {n}, {len(self.free_ids)} free")
        ids = self.free_ids[len(self.free_ids) - n :]
        del self.free_ids[len(self.free_ids) - n :]
        for b in ids:
            self.refs[b] = 1
        return ids

    def _check(self, block_id: int) -> None:
        if not 0 <= block_id < self.num_blocks or self.refs[block_id] == 0:
            raise ValueError(f"block {block_id} is not allocated")

    def free(self, block_ids: Iterable[int]) -> None:
        counts = Counter(block_ids)
        for b, c in counts.items():
            self._check(b)
            if c > self.refs[b]:
                raise ValueError(f"block {b} freed {c} times, has {self.refs[b]} references")
        for b, c in counts.items():
            self.refs[b] -= c
            if not self.refs[b]:
                self.free_ids.append(b)

    def incref(self, block_id: int) -> None:
        self._check(block_id)
        self.refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block {block_id} out of range")
        return self.refs[block_id]
