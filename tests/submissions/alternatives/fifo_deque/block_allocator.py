"""A correct allocator with a FIFO free list (`collections.deque`): the block freed longest ago
is handed out first, so ids rotate through the whole pool."""

from collections import Counter, deque
from collections.abc import Iterable
from operator import index


class OutOfBlocks(RuntimeError):
    """Fewer free blocks than asked for; the message starts with OOM."""


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        num_blocks = index(num_blocks)
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self._refs = [0] * num_blocks
        self._queue = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self._queue)

    @property
    def free_ids(self) -> deque[int]:
        return self._queue

    def allocate(self, n: int = 1) -> list[int]:
        n = index(n)
        if n < 0:
            raise ValueError(f"cannot allocate {n} blocks")
        if n > len(self._queue):
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {len(self._queue)} free")
        taken = [self._queue.popleft() for _ in range(n)]
        for block_id in taken:
            self._refs[block_id] = 1
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        drops = Counter(self._valid(block_id) for block_id in block_ids)
        if any(count > self._refs[block_id] for block_id, count in drops.items()):
            raise ValueError(f"freeing blocks that do not hold that many references: {drops}")
        for block_id, count in drops.items():
            self._refs[block_id] -= count
            if self._refs[block_id] == 0:
                self._queue.append(block_id)

    def incref(self, block_id: int) -> None:
        block_id = self._valid(block_id)
        if self._refs[block_id] == 0:
            raise ValueError(f"block {block_id} is free")
        self._refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        return self._refs[self._valid(block_id)]

    def _valid(self, block_id: int) -> int:
        if type(block_id) is not int or not 0 <= block_id < self.num_blocks:
            raise ValueError(f"no block {block_id!r} in a pool of {self.num_blocks}")
        return block_id
