"""Block allocator for the paged KV cache, with per-block reference counts.

Free ids sit on a plain list used as a stack; a bytearray keeps one flag per block telling
whether that block is currently on the stack, and a list of ints holds the reference counts.
Every public method validates all of its input before it touches any of that state, so a call
that raises leaves the allocator exactly as it found it.
"""

import operator
from collections.abc import Iterable

_FREE = 1
_TAKEN = 0


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


def _require(condition: bool, message: str) -> None:
    """Raise ValueError with `message` unless `condition` holds."""
    if not condition:
        raise ValueError(message)


def _as_int(value: object, what: str) -> int:
    """`value` as a plain int; ValueError for anything that is not an integer."""
    _require(not isinstance(value, float), f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        count = _as_int(num_blocks, "num_blocks")
        _require(count >= 0, f"num_blocks must be >= 0, got {count}")
        self.num_blocks = count
        # Reversed so that the lowest ids come off the top of the stack first.
        self._stack: list[int] = list(range(count - 1, -1, -1))
        self._flags = bytearray([_FREE]) * count
        self._refs: list[int] = [0] * count

    # -- inspection ---------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """How many blocks are free right now."""
        return len(self._stack)

    @property
    def num_allocated(self) -> int:
        """How many blocks hold at least one reference."""
        return self.num_blocks - len(self._stack)

    def is_free(self, block_id: int) -> bool:
        """True when `block_id` (which must be in range) holds no reference."""
        bid = self._checked_id(block_id)
        return self._flags[bid] == _FREE

    def iter_free(self) -> Iterable[int]:
        """A snapshot of the free ids (in the order they would be handed out last to first)."""
        return tuple(self._stack)

    def ref_count(self, block_id: int) -> int:
        """How many references `block_id` holds; 0 for a free block."""
        bid = self._checked_id(block_id)
        return self._refs[bid]

    # -- mutation ------------------------------------------------------------------------------

    def allocate(self, n: int = 1) -> list[int]:
        """Take `n` distinct free blocks, each with reference count 1 afterwards (O(n))."""
        count = _as_int(n, "n")
        _require(count >= 0, f"cannot allocate a negative number of blocks ({count})")
        available = len(self._stack)
        if count > available:
            raise OutOfBlocks(f"OOM: asked for {count} blocks, only {available} free")
        if count == 0:
            return []
        taken = self._stack[available - count :]
        del self._stack[available - count :]
        taken.reverse()
        flags = self._flags
        refs = self._refs
        for bid in taken:
            flags[bid] = _TAKEN
            refs[bid] = 1
        return taken

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference from each id; a block left with none is free again."""
        if block_ids is None:
            raise ValueError("free() needs an iterable of block ids, got None")
        try:
            raw = list(block_ids)
        except TypeError:
            raise ValueError(f"free() needs an iterable of block ids, got {block_ids!r}") from None

        # First pass: validate everything and count how often each id is named.
        wanted: dict[int, int] = {}
        for item in raw:
            bid = self._checked_id(item)
            _require(self._flags[bid] == _TAKEN, f"block {bid} is not allocated")
            wanted[bid] = wanted.get(bid, 0) + 1
        for bid, times in wanted.items():
            held = self._refs[bid]
            _require(
                times <= held,
                f"block {bid} is freed {times} times in one call but holds only {held} "
                f"reference(s)",
            )

        # Second pass: nothing can fail any more.
        for bid, times in wanted.items():
            left = self._refs[bid] - times
            self._refs[bid] = left
            if left == 0:
                self._flags[bid] = _FREE
                self._stack.append(bid)

    def incref(self, block_id: int) -> None:
        """Add one reference to an allocated block; ValueError if it is free or out of range."""
        bid = self._checked_id(block_id)
        _require(self._flags[bid] == _TAKEN, f"cannot add a reference to free block {bid}")
        self._refs[bid] += 1

    # -- helpers -------------------------------------------------------------------------------

    def _checked_id(self, block_id: object) -> int:
        bid = _as_int(block_id, "block id")
        _require(
            0 <= bid < self.num_blocks,
            f"block id {bid} is out of range [0, {self.num_blocks})",
        )
        return bid
