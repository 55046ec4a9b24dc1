"""A block allocator for a paged KV cache, written as a worked example.

Picture the KV cache as a row of numbered lockers, `0 .. num_blocks-1`. A request never owns a
locker outright: it borrows a locker number from this allocator and returns it when it is done.
Because several requests may share one locker (prefix sharing, part 6), every locker keeps a
counter of how many borrowers currently hold it. A counter of zero means the locker is free.

Two pieces of bookkeeping do all the work:

1. `self._reference_counts`, a plain Python list indexed by block id. Reading or writing one
   entry is O(1), and it answers "is this block free?" without searching anything.
2. `self._free_stack`, a list used as a stack of the ids whose counter is zero. Taking a block
   from the end of a list (`pop()`) or putting one back (`append`) is O(1), so handing out `n`
   blocks costs O(n) no matter how large the pool is.

The golden rule for errors ("strong exception guarantee"): first check every argument, and only
once we are sure the call will succeed do we touch any state. A call that raises therefore
leaves the allocator exactly as it found it.
"""

import operator
from collections import Counter
from collections.abc import Iterable


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


def _as_whole_number(value: object, what: str) -> int:
    """Turn `value` into a Python int, or explain with a ValueError why we cannot.

    `operator.index` accepts ints and int-like objects (a numpy or torch integer scalar) but
    refuses floats and strings, which is exactly the strictness we want for counts and ids.
    """
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


class BlockAllocator:
    """Hands out block ids and counts the references to each one."""

    def __init__(self, num_blocks: int) -> None:
        """A pool of `num_blocks` free blocks; `num_blocks < 0` raises ValueError."""
        pool_size = _as_whole_number(num_blocks, "num_blocks")
        if pool_size < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        self.num_blocks = pool_size

        # Step 1: every block starts with nobody holding it, so every counter is zero.
        self._reference_counts: list[int] = [0] * pool_size

        # Step 2: every block starts on the free stack. We push them in reverse so that the
        # first allocations pop 0, 1, 2, ... which makes debugging printouts easier to read.
        # (Any order is correct; this is purely cosmetic.)
        self._free_stack: list[int] = list(range(pool_size - 1, -1, -1))

    # ------------------------------------------------------------------------------------
    # Reading the state
    # ------------------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """How many blocks are free right now.

        The free stack holds exactly the blocks whose counter is zero, so its length is the
        answer, in O(1).
        """
        return len(self._free_stack)

    def ref_count(self, block_id: int) -> int:
        """How many references `block_id` holds; 0 for a free block."""
        checked_id = self._checked_block_id(block_id)
        return self._reference_counts[checked_id]

    # ------------------------------------------------------------------------------------
    # Changing the state
    # ------------------------------------------------------------------------------------

    def allocate(self, n: int = 1) -> list[int]:
        """Take `n` distinct free blocks, each now allocated with reference count 1.

        `n == 0` gives `[]`; `n < 0` raises ValueError; `n > num_free` raises OutOfBlocks
        and allocates nothing.
        """
        # Step 1: validate. Nothing has been changed yet, so raising here is always safe.
        how_many = _as_whole_number(n, "n")
        if how_many < 0:
            raise ValueError(f"cannot allocate a negative number of blocks ({n})")
        free_now = len(self._free_stack)
        if how_many > free_now:
            raise OutOfBlocks(f"OOM: asked for {how_many} blocks, {free_now} free")
        if how_many == 0:
            return []

        # Step 2: cut the last `how_many` ids off the free stack in one slice. Slicing and
        # deleting a tail are both O(how_many), independent of the size of the pool.
        first_taken_position = free_now - how_many
        taken_ids = self._free_stack[first_taken_position:]
        del self._free_stack[first_taken_position:]

        # Step 3: each block we hand out now has exactly one holder.
        for block_id in taken_ids:
            self._reference_counts[block_id] = 1
        return taken_ids

    def free(self, block_ids: Iterable[int]) -> None:
        """Drop one reference from each id; a block whose count reaches 0 is free again.

        ValueError, and nothing freed, when an id is out of range, is not allocated, or appears
        in the call more times than it has references.
        """
        # Step 1: materialise the iterable once (it might be a generator we can read only
        # once), normalising every id to a plain int and checking its range on the way.
        requested_ids = [self._checked_block_id(block_id) for block_id in block_ids]

        # Step 2: count how many references this call wants to drop from each block, and make
        # sure no block would go below zero. `free([7, 7])` on a block held once fails here,
        # before anything has been modified.
        drops_per_block = Counter(requested_ids)
        for block_id, drops in drops_per_block.items():
            held = self._reference_counts[block_id]
            if held == 0:
                raise ValueError(f"block {block_id} is not allocated")
            if drops > held:
                raise ValueError(
                    f"block {block_id} has {held} reference(s) but this call frees it {drops} times"
                )

        # Step 3: every check passed, so now apply the changes. A block whose counter falls
        # to zero goes back on the free stack, ready for the next allocation.
        for block_id, drops in drops_per_block.items():
            remaining = self._reference_counts[block_id] - drops
            self._reference_counts[block_id] = remaining
            if remaining == 0:
                self._free_stack.append(block_id)

    def incref(self, block_id: int) -> None:
        """Part 6: add a reference to an allocated block (a prefix shared by one more request).

        ValueError if `block_id` is free or out of range.
        """
        checked_id = self._checked_block_id(block_id)
        if self._reference_counts[checked_id] == 0:
            raise ValueError(f"block {block_id} is free: only an allocated block can be shared")
        self._reference_counts[checked_id] += 1

    # ------------------------------------------------------------------------------------
    # Helpers
    # ------------------------------------------------------------------------------------

    def _checked_block_id(self, block_id: object) -> int:
        """`block_id` as an int in `0 .. num_blocks-1`, or a ValueError saying what is wrong."""
        as_int = _as_whole_number(block_id, "block id")
        if not 0 <= as_int < self.num_blocks:
            raise ValueError(f"block id {block_id} is outside 0 .. {self.num_blocks - 1}")
        return as_int
