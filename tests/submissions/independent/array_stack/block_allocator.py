"""Block allocator for the paged KV cache, backed by a fixed-size array used as a stack.

Layout: `_slots` has exactly `num_blocks` cells and never changes length. The cells
`_slots[0:_top]` hold the ids of the free blocks (in no particular order); the cells from
`_top` on are scratch space whose contents mean nothing. Taking blocks lowers `_top`,
returning blocks writes into `_slots[_top]` and raises it, so both cost O(blocks moved).
"""

import operator
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


def _as_index(value: object, what: str) -> int:
    """`value` as a plain int, or ValueError naming `what`."""
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        num_blocks = _as_index(num_blocks, "num_blocks")
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = num_blocks
        # Invariant: _refs[b] == 0  <=>  b appears exactly once in _slots[0:_top].
        self._refs = [0] * num_blocks
        self._slots = list(range(num_blocks))
        self._top = num_blocks

    @property
    def num_free(self) -> int:
        # The stack height is the free count: num_free + allocated == num_blocks.
        return self._top

    def _check_id(self, block_id: object) -> int:
        b = _as_index(block_id, "block id")
        if not 0 <= b < self.num_blocks:
            raise ValueError(f"block id {b} out of range [0, {self.num_blocks})")
        return b

    def allocate(self, n: int = 1) -> list[int]:
        n = _as_index(n, "n")
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        if n > self._top:
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {self._top} free")
        # Everything is checked; from here on nothing can fail.
        new_top = self._top - n
        taken = self._slots[new_top : self._top]
        self._top = new_top
        refs = self._refs
        for b in taken:
            refs[b] = 1
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        # Phase 1: validate the whole request without touching any state.
        drops: dict[int, int] = {}
        for raw in block_ids:
            b = self._check_id(raw)
            drops[b] = drops.get(b, 0) + 1
        refs = self._refs
        for b, count in drops.items():
            if refs[b] == 0:
                raise ValueError(f"block {b} is not allocated")
            if count > refs[b]:
                raise ValueError(f"block {b} freed {count} times but holds {refs[b]} references")
        # Phase 2: apply. A block reaching zero goes onto the stack; the stack has room for
        # it because at most num_blocks ids can ever be free at once.
        slots = self._slots
        top = self._top
        for b, count in drops.items():
            left = refs[b] - count
            refs[b] = left
            if left == 0:
                slots[top] = b
                top += 1
        self._top = top

    def incref(self, block_id: int) -> None:
        b = self._check_id(block_id)
        if self._refs[b] == 0:
            raise ValueError(f"block {b} is free; only an allocated block can be shared")
        self._refs[b] += 1

    def ref_count(self, block_id: int) -> int:
        return self._refs[self._check_id(block_id)]
