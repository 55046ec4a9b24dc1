"""Part 1: the block allocator, checked against an abstract model (which ids are held).

The model never predicts which id `allocate` hands out: any free ids are right. To see the
allocator's whole state without reading its internals, `drain` allocates every free block (they
must be exactly the model's free ids) and frees them again.
"""

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from grader.checks.support.expect import int_list, plain_int, raises

pytestmark = pytest.mark.part("allocator")

POOL_SIZES = st.one_of(st.integers(0, 12), st.sampled_from([100, 1000, 100_000]))


def new_allocator(submission, num_blocks: int):
    return submission.module("block_allocator").BlockAllocator(num_blocks)


def drain(allocator, held: set[int], num_blocks: int) -> None:
    """All free ids must be exactly the ones not held; they are freed again afterwards."""
    free = int_list(allocator.allocate(allocator.num_free), "allocate(num_free)")
    expected = set(range(num_blocks)) - held
    assert len(free) == len(set(free)), f"allocate handed out an id twice: {free}"
    missing, extra = sorted(expected - set(free)), sorted(set(free) - expected)
    assert (missing, extra) == ([], []), (
        f"the free blocks are wrong: blocks {missing[:10]} should be free, blocks {extra[:10]} "
        "should be held"
    )
    allocator.free(free)


@pytest.mark.points(2)
def check_new_pool_is_all_free(submission):
    for num_blocks in (0, 1, 7, 1000):
        allocator = new_allocator(submission, num_blocks)
        assert plain_int(allocator.num_blocks, "num_blocks") == num_blocks, "num_blocks is wrong"
        assert plain_int(allocator.num_free, "num_free") == num_blocks, (
            f"a new pool of {num_blocks} blocks must have num_free == {num_blocks}"
        )
        drain(allocator, set(), num_blocks)
    with raises(ValueError, "BlockAllocator(-1)"):
        new_allocator(submission, -1)


@pytest.mark.points(2)
def check_allocate_hands_out_distinct_free_ids(submission):
    allocator = new_allocator(submission, 10)
    held: set[int] = set()
    for n in (3, 0, 1, 6):
        ids = int_list(allocator.allocate(n), f"allocate({n})")
        assert len(ids) == n, f"allocate({n}) must return {n} ids, got {ids}"
        assert len(set(ids)) == n, f"allocate({n}) returned an id twice: {ids}"
        assert all(0 <= i < 10 for i in ids), f"allocate({n}) returned an id outside 0..9: {ids}"
        assert not held & set(ids), (
            f"allocate({n}) returned ids already held: {sorted(held & set(ids))}"
        )
        held |= set(ids)
        assert allocator.num_free == 10 - len(held), "num_free must drop by n after allocate(n)"


@pytest.mark.points(2)
def check_allocate_errors_change_nothing(submission):
    allocator = new_allocator(submission, 6)
    held = set(int_list(allocator.allocate(4), "allocate(4)"))
    with raises(ValueError, "allocate(-1)"):
        allocator.allocate(-1)
    with raises(RuntimeError, "allocate(3) with 2 free blocks"):
        allocator.allocate(3)
    assert allocator.num_free == 2, "a refused allocate must not hand out any block"
    drain(allocator, held, 6)
    empty = new_allocator(submission, 0)
    with raises(RuntimeError, "allocate(1) on a pool of 0 blocks"):
        empty.allocate(1)
    assert empty.allocate(0) == [], "allocate(0) must return []"


@pytest.mark.points(2)
def check_freed_blocks_are_reused(submission):
    allocator = new_allocator(submission, 5)
    first = int_list(allocator.allocate(5), "allocate(5)")
    allocator.free(first[1:4])
    assert allocator.num_free == 3, "free(ids) must return each id to the pool"
    drain(allocator, {first[0], first[4]}, 5)
    again = int_list(allocator.allocate(3), "allocate(3)")
    assert sorted(again) == sorted(first[1:4]), "only the freed blocks can be handed out again"


@pytest.mark.points(3)
def check_bad_frees_raise_and_free_nothing(submission):
    allocator = new_allocator(submission, 8)
    held = int_list(allocator.allocate(4), "allocate(4)")
    never = next(i for i in range(8) if i not in held)
    bad_calls = {
        "an id out of range (8)": [held[0], 8],
        "a negative id (-1)": [held[0], -1],
        "an id that is not allocated": [held[0], never],
        "the same id twice": [held[1], held[1]],
    }
    for what, ids in bad_calls.items():
        with raises(ValueError, f"free({ids}), with {what},"):
            allocator.free(ids)
        assert allocator.num_free == 4, f"free({ids}) raised but still freed a block"
    drain(allocator, set(held), 8)
    allocator.free([held[2]])
    with raises(ValueError, f"freeing block {held[2]} a second time"):
        allocator.free([held[2]])
    drain(allocator, set(held) - {held[2]}, 8)
    full = new_allocator(submission, 3)
    int_list(full.allocate(3), "allocate(3)")
    with raises(ValueError, "free([-1]) on a full pool (-1 is not a block id, not the last block)"):
        full.free([-1])
    assert full.num_free == 0, "free([-1]) raised but still freed a block"


class AllocatorMachine(RuleBasedStateMachine):
    """Random allocate and free calls, good and bad, against the set of held ids."""

    def __init__(self, submission) -> None:
        super().__init__()
        self.submission = submission
        submission.transcript.reset()

    @initialize(num_blocks=POOL_SIZES)
    def new_pool(self, num_blocks):
        self.num_blocks = num_blocks
        self.allocator = new_allocator(self.submission, num_blocks)
        self.held: set[int] = set()

    @invariant()
    def counts_add_up(self):
        assert self.allocator.num_free == self.num_blocks - len(self.held), (
            "num_free must equal num_blocks minus the blocks held"
        )

    @rule(data=st.data())
    def allocate(self, data):
        free = self.num_blocks - len(self.held)
        n = data.draw(st.integers(0, min(free, 64)), label="n")
        ids = int_list(self.allocator.allocate(n), f"allocate({n})")
        assert len(ids) == n == len(set(ids)), f"allocate({n}) must give {n} distinct ids: {ids}"
        wrong = [i for i in ids if i in self.held or not 0 <= i < self.num_blocks]
        assert not wrong, f"allocate({n}) handed out ids that were not free: {wrong}"
        self.held |= set(ids)

    @rule(extra=st.integers(1, 3))
    def allocate_too_many(self, extra):
        n = self.num_blocks - len(self.held) + extra
        with raises(RuntimeError, f"allocate({n}) with {n - extra} free blocks"):
            self.allocator.allocate(n)

    @rule(n=st.integers(-3, -1))
    def allocate_negative(self, n):
        with raises(ValueError, f"allocate({n})"):
            self.allocator.allocate(n)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def free(self, data):
        ids = data.draw(st.lists(st.sampled_from(sorted(self.held)), unique=True), label="ids")
        self.allocator.free(ids)
        self.held -= set(ids)

    @rule(data=st.data())
    def free_with_a_bad_id(self, data):
        held = sorted(self.held)
        good = data.draw(st.lists(st.sampled_from(held), unique=True) if held else st.just([]))
        bad = data.draw(
            st.one_of(
                st.integers(self.num_blocks, self.num_blocks + 3),
                st.integers(-3, -1),
                st.sampled_from([i for i in range(self.num_blocks) if i not in self.held] or [-1]),
                st.sampled_from(good or [-1]),  # a duplicate
            ),
            label="bad id",
        )
        ids = data.draw(st.permutations([*good, bad]), label="ids")
        with raises(ValueError, f"free({ids})"):
            self.allocator.free(ids)

    @precondition(lambda self: self.num_blocks <= 1000)
    @rule()
    def check_free_set(self):
        drain(self.allocator, self.held, self.num_blocks)


@pytest.mark.points(6)
def check_random_allocate_and_free(submission):
    run_state_machine_as_test(lambda: AllocatorMachine(submission))
