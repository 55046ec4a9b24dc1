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

from grader.checks.support.expect import (
    Held,
    distinct,
    expect,
    int_list,
    judged_by,
    plain_int,
    raises,
    same,
)
from grader.checks.support.rules import FREE_BLOCKS
from grader.said import said
from grader.sandbox.transcript import Iter, Shown

pytestmark = pytest.mark.part("allocator")

POOL_SIZES = st.one_of(st.integers(0, 12), st.sampled_from([100, 1000, 100_000]))


def new_allocator(submission, num_blocks: int):
    return submission.module("block_allocator").BlockAllocator(num_blocks)


def nth_unheld(place: int, held: list[int]) -> int:
    """The id at `place` among the pool's ids not in `held` (sorted), in increasing order."""
    block = place
    for held_block in held:  # each held id at or below it moves it one up
        if held_block > block:
            break
        block += 1
    return block


def unheld_id(held: list[int], num_blocks: int) -> st.SearchStrategy[int]:
    """An id of the pool that `held` (sorted, every id in the pool) does not hold, or -1 where it
    holds them all, drawn by its place among the unheld ids: O(held) a draw, not O(pool)."""
    unheld = num_blocks - len(held)
    if not unheld:
        return st.just(-1)
    return st.integers(0, unheld - 1).map(lambda place: nth_unheld(place, held))


def drain(allocator, held: Held) -> None:
    """All free ids must be exactly the ones not held (`FREE_BLOCKS`: allocate hands out free
    ids, and num_free counts them); they are freed again afterwards."""
    transcript, num_blocks = held.transcript, held.num_blocks
    num_free = Shown(allocator.num_free, f"{transcript.code(allocator)}.num_free")
    free = int_list(transcript, allocator.allocate(num_free), "allocate(num_free)")
    name = transcript.source(free, "free")
    expected = set(range(num_blocks)) - held.ids()
    missing, extra = sorted(expected - set(free)), sorted(set(free) - expected)
    with judged_by(FREE_BLOCKS):
        distinct(transcript, free, name, said("allocate handed out an id twice: {ids}", ids=free))
        expect(
            transcript,
            (missing, extra) == ([], []),
            said(
                "the free blocks are wrong: blocks {missing} should be free, blocks {extra} "
                "should be held",
                missing=missing[:10],
                extra=extra[:10],
            ),
            got=f"sorted({name})",
            expected=f"sorted(set(range({num_blocks})) - {held.set_code()})",
        )
    allocator.free(free)


def judge_handed_out(held: Held, ids: list[int], n: int) -> None:
    """`allocate(n)` gave `ids`: n distinct ids in range, none of them held; now held."""
    with judged_by(FREE_BLOCKS):
        transcript, num_blocks = held.transcript, held.num_blocks
        name, held_before = transcript.source(ids, "ids"), held.set_code()
        same(
            transcript,
            len(ids),
            n,
            said("allocate({n}) must return {count} ids, got {ids}", n=n, count=n, ids=ids),
            got=f"len({name})",
        )
        same(
            transcript,
            len(set(ids)),
            n,
            said("allocate({n}) returned an id twice: {ids}", n=n, ids=ids),
            got=f"len(set({name}))",
        )
        outside = [i for i in ids if not 0 <= i < num_blocks]
        expect(
            transcript,
            not outside,
            said(
                "allocate({n}) returned an id outside 0..{last}: {ids}",
                n=n,
                last=num_blocks - 1,
                ids=ids,
            ),
            got=f"[i for i in {name} if not 0 <= i < {num_blocks}]",
            expected="[]",
        )
        taken = sorted(held.ids() & set(ids))
        expect(
            transcript,
            not taken,
            said("allocate({n}) returned ids already held: {ids}", n=n, ids=taken),
            got=f"sorted(set({name}) & {held_before})",
            expected="[]",
        )
        held.add(ids)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_new_pool_is_all_free(submission):
    transcript = submission.transcript
    for num_blocks in (0, 1, 7, 1000):
        allocator = new_allocator(submission, num_blocks)
        got = plain_int(transcript, allocator.num_blocks, "num_blocks")
        same(transcript, got, num_blocks, said("num_blocks is wrong"))
        same(
            transcript,
            plain_int(transcript, allocator.num_free, "num_free"),
            num_blocks,
            said(
                "a new pool of {n} blocks must have num_free == {free}",
                n=num_blocks,
                free=num_blocks,
            ),
        )
        drain(allocator, Held(transcript, num_blocks))
    with raises(transcript, ValueError, "BlockAllocator(-1)"):
        new_allocator(submission, -1)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_allocate_hands_out_distinct_free_ids(submission):
    transcript = submission.transcript
    allocator = new_allocator(submission, 10)
    held = Held(transcript, 10)
    for n in (3, 0, 1, 6):
        judge_handed_out(held, int_list(transcript, allocator.allocate(n), f"allocate({n})"), n)
        with judged_by(FREE_BLOCKS):
            same(
                transcript,
                allocator.num_free,
                10 - len(held),
                said("num_free must drop by n after allocate(n)"),
            )


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_allocate_errors_change_nothing(submission):
    transcript = submission.transcript
    allocator = new_allocator(submission, 6)
    held = Held(transcript, 6)
    held.add(int_list(transcript, allocator.allocate(4), "allocate(4)"))
    with raises(transcript, ValueError, "allocate(-1)"):
        allocator.allocate(-1)
    with raises(
        transcript, RuntimeError, said("allocate({n}) with {free} free blocks", n=3, free=2)
    ):
        allocator.allocate(3)
    same(transcript, allocator.num_free, 2, said("a refused allocate must not hand out any block"))
    drain(allocator, held)
    empty = new_allocator(submission, 0)
    with raises(
        transcript, RuntimeError, said("allocate({n}) on a pool of {size} blocks", n=1, size=0)
    ):
        empty.allocate(1)
    same(transcript, empty.allocate(0), [], said("allocate(0) must return []"))


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_freed_blocks_are_reused(submission):
    transcript = submission.transcript
    allocator = new_allocator(submission, 5)
    held = Held(transcript, 5)
    first = int_list(transcript, allocator.allocate(5), "allocate(5)")
    name = held.add(first, "first")
    allocator.free(Shown(first[1:4], f"{name}[1:4]"))
    held.drop(first[1:4])
    same(transcript, allocator.num_free, 3, said("free(ids) must return each id to the pool"))
    drain(allocator, held)
    again = int_list(transcript, allocator.allocate(3), "allocate(3)")
    expect(
        transcript,
        sorted(again) == sorted(first[1:4]),
        said("only the freed blocks can be handed out again"),
        got=f"sorted({transcript.source(again, 'again')})",
        expected=f"sorted({name}[1:4])",
    )
    allocator.free(Iter(Shown(again, transcript.source(again, "again"))))  # any Iterable, once
    same(
        transcript,
        allocator.num_free,
        3,
        said("free(ids) must take any iterable of ids, read once: free(iter(ids)) must free each"),
    )


@pytest.mark.points(3)
@pytest.mark.severity("safety")
def check_bad_frees_raise_and_free_nothing(submission):
    transcript = submission.transcript
    allocator = new_allocator(submission, 8)
    held_ids = int_list(transcript, allocator.allocate(4), "allocate(4)")
    held = Held(transcript, 8)
    name = held.add(held_ids, "held")
    never = next(i for i in range(8) if i not in held_ids)
    bad_calls = {
        said("an id out of range (8)"): [held_ids[0], 8],
        said("a negative id (-1)"): [held_ids[0], -1],
        said("an id that is not allocated"): [held_ids[0], never],
        said("the same id twice"): [held_ids[1], held_ids[1]],
    }
    for what, ids in bad_calls.items():
        with raises(
            transcript, ValueError, said("{call}, with {what},", call=f"free({ids})", what=what)
        ):
            allocator.free(held.shown(ids))
        same(
            transcript,
            allocator.num_free,
            4,
            said("free({ids}) raised but still freed a block", ids=ids),
        )
    drain(allocator, held)
    allocator.free(held.shown([held_ids[2]]))
    held.drop([held_ids[2]])
    with raises(
        transcript, ValueError, said("freeing block {block} a second time", block=held_ids[2])
    ):
        allocator.free(Shown([held_ids[2]], f"[{name}[2]]"))
    drain(allocator, held)
    full = new_allocator(submission, 3)
    int_list(transcript, full.allocate(3), "allocate(3)")
    with raises(
        transcript,
        ValueError,
        said("free([-1]) on a full pool (-1 is not a block id, not the last block)"),
    ):
        full.free([-1])
    same(
        transcript,
        full.num_free,
        0,
        said("free({ids}) raised but still freed a block", ids=[-1]),
    )


class AllocatorMachine(RuleBasedStateMachine):
    """Random allocate and free calls, good and bad, against the set of held ids."""

    def __init__(self, submission) -> None:
        super().__init__()
        self.submission = submission
        self.transcript = submission.transcript
        submission.transcript.reset()

    @initialize(num_blocks=POOL_SIZES)
    def new_pool(self, num_blocks):
        self.num_blocks = num_blocks
        self.allocator = new_allocator(self.submission, num_blocks)
        self.held = Held(self.transcript, num_blocks)

    @invariant()
    def counts_add_up(self):
        with judged_by(FREE_BLOCKS):
            same(
                self.transcript,
                self.allocator.num_free,
                self.num_blocks - len(self.held),
                said("num_free must equal num_blocks minus the blocks held"),
            )

    @rule(data=st.data())
    def allocate(self, data):
        free = self.num_blocks - len(self.held)
        n = data.draw(st.integers(0, min(free, 64)), label="n")
        ids = int_list(self.transcript, self.allocator.allocate(n), f"allocate({n})")
        name, held_before = self.transcript.source(ids, "ids"), self.held.set_code()
        held = self.held.ids()
        wrong = [i for i in ids if i in held or not 0 <= i < self.num_blocks]
        with judged_by(FREE_BLOCKS):
            same(
                self.transcript,
                (len(ids), len(set(ids))),
                (n, n),
                said("allocate({n}) must give {count} distinct ids: {ids}", n=n, count=n, ids=ids),
                got=f"(len({name}), len(set({name})))",
            )
            expect(
                self.transcript,
                not wrong,
                said("allocate({n}) handed out ids that were not free: {ids}", n=n, ids=wrong),
                got=f"[i for i in {name} if i in {held_before} or not 0 <= i < {self.num_blocks}]",
                expected="[]",
            )
        self.held.add(ids)

    @rule(extra=st.integers(1, 3))
    def allocate_too_many(self, extra):
        n = self.num_blocks - len(self.held) + extra
        with raises(
            self.transcript,
            RuntimeError,
            said("allocate({n}) with {free} free blocks", n=n, free=n - extra),
        ):
            self.allocator.allocate(n)

    @rule(n=st.integers(-3, -1))
    def allocate_negative(self, n):
        with raises(self.transcript, ValueError, f"allocate({n})"):
            self.allocator.allocate(n)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def free(self, data):
        held = sorted(self.held.ids())
        ids = data.draw(st.lists(st.sampled_from(held), unique=True), label="ids")
        self.allocator.free(self.held.shown(ids))
        self.held.drop(ids)

    @rule(data=st.data())
    def free_with_a_bad_id(self, data):
        held = sorted(self.held.ids())
        good = data.draw(st.lists(st.sampled_from(held), unique=True) if held else st.just([]))
        bad = data.draw(
            st.one_of(
                st.integers(self.num_blocks, self.num_blocks + 3),
                st.integers(-3, -1),
                unheld_id(held, self.num_blocks),
                st.sampled_from(good or [-1]),  # a duplicate
            ),
            label="bad id",
        )
        ids = data.draw(st.permutations([*good, bad]), label="ids")
        with raises(self.transcript, ValueError, f"free({ids})"):
            self.allocator.free(self.held.shown(ids))

    @precondition(lambda self: self.num_blocks <= 1000)
    @rule()
    def check_free_set(self):
        drain(self.allocator, self.held)


@pytest.mark.points(6)
@pytest.mark.severity("safety")
def check_random_allocate_and_free(submission):
    run_state_machine_as_test(lambda: AllocatorMachine(submission))
