"""Block allocator for a paged KV cache.

The free blocks are threaded into an intrusive singly linked list: `next_free[i]` holds the id
of the free block that follows block `i` (or -1 at the end of the list), and `head` is the first
free block. Taking a block unlinks the head; giving one back pushes it in front. Both are O(1),
so no operation ever depends on the size of the pool.
"""

from collections.abc import Iterable

NIL = -1


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        # refs[i] == 0 means block i is free and sits somewhere in the linked list.
        self.refs = [0] * num_blocks
        # Chain every block: 0 -> 1 -> ... -> num_blocks-1 -> NIL.
        self.next_free = [NIL] * num_blocks
        i = 0
        while i + 1 < num_blocks:
            self.next_free[i] = i + 1
            i += 1
        self.head = 0 if num_blocks > 0 else NIL
        self.free_count = num_blocks

    @property
    def num_free(self) -> int:
        return self.free_count

    # -- internal helpers ---------------------------------------------------------------------

    def _valid_id(self, block_id: object) -> bool:
        if type(block_id) is bool or not isinstance(block_id, int):
            return False
        return 0 <= block_id < self.num_blocks

    def _pop_head(self) -> int:
        b = self.head
        self.head = self.next_free[b]
        self.next_free[b] = NIL
        self.free_count -= 1
        return b

    def _push_head(self, b: int) -> None:
        self.next_free[b] = self.head
        self.head = b
        self.free_count += 1

    # -- public interface ---------------------------------------------------------------------

    def allocate(self, n: int = 1) -> list[int]:
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        if n > self.free_count:
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {self.free_count} free")
        out = [0] * n
        k = 0
        while k < n:
            b = self._pop_head()
            self.refs[b] = 1
            out[k] = b
            k += 1
        return out

    def free(self, block_ids: Iterable[int]) -> None:
        ids = list(block_ids)
        # Pass 1: validate everything, counting how often each id is named.
        wanted: dict[int, int] = {}
        k = 0
        while k < len(ids):
            b = ids[k]
            if not self._valid_id(b):
                raise ValueError(f"block id {b!r} is not in range 0..{self.num_blocks - 1}")
            seen = wanted.get(b, 0) + 1
            if seen > self.refs[b]:
                if self.refs[b] == 0:
                    raise ValueError(f"block {b} is not allocated")
                raise ValueError(
                    f"block {b} freed {seen} times but has {self.refs[b]} reference(s)"
                )
            wanted[b] = seen
            k += 1
        # Pass 2: nothing can fail any more; apply.
        k = 0
        while k < len(ids):
            b = ids[k]
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self._push_head(b)
            k += 1

    def incref(self, block_id: int) -> None:
        if not self._valid_id(block_id):
            raise ValueError(f"block id {block_id!r} is not in range 0..{self.num_blocks - 1}")
        if self.refs[block_id] == 0:
            raise ValueError(f"block {block_id} is free, cannot add a reference")
        self.refs[block_id] += 1

    def ref_count(self, block_id: int) -> int:
        if not self._valid_id(block_id):
            raise ValueError(f"block id {block_id!r} is not in range 0..{self.num_blocks - 1}")
        return self.refs[block_id]
