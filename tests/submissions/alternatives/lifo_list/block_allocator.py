"""A correct allocator with a LIFO free list (a plain `list` used as a stack: `pop()` from the
end, never `pop(0)`): the block freed last is handed out first."""

from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Fewer free blocks than asked for; the message starts with OOM."""


class BlockAllocator:
    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        self.refs = [0] * num_blocks
        self.stack = list(range(num_blocks - 1, -1, -1))

    @property
    def num_free(self) -> int:
        return len(self.stack)

    @property
    def free_ids(self) -> list[int]:
        return self.stack

    def allocate(self, n: int = 1) -> list[int]:
        if n < 0:
            raise ValueError(f"cannot allocate {n} blocks")
        if n > len(self.stack):
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {len(self.stack)} free")
        if n == 0:
            return []
        taken = self.stack[-n:]
        del self.stack[-n:]
        taken.reverse()
        for block_id in taken:
            self.refs[block_id] = 1
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        ids = list(block_ids)
        drops: dict[int, int] = {}
        for block_id in ids:
            if not (isinstance(block_id, int) and 0 <= block_id < self.num_blocks):
                raise ValueError(f"block id {block_id!r} is out of range")
            drops[block_id] = drops.get(block_id, 0) + 1
            if drops[block_id] > self.refs[block_id]:
                raise ValueError(f"block {block_id} does not hold {drops[block_id]} reference(s)")
        for block_id in ids:
            self.refs[block_id] -= 1
            if self.refs[block_id] == 0:
                self.stack.append(block_id)

    def incref(self, block_id: int) -> None:
        if self.ref_count(block_id) == 0:
            raise ValueError(f"block {block_id} is free")
        self.refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        if not (isinstance(block_id, int) and 0 <= block_id < self.num_blocks):
            raise ValueError(f"block id {block_id!r} is out of range")
        return self.refs[block_id]
