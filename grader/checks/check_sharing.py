"""Part 6: reference counts, fork and copy-on-write.

The reference counts are checked on a `BlockAllocator` directly, against a Counter. Fork and
copy-on-write are checked through the manager's observable behaviour only (block tables, the
free count and the data each request gathers), against the model of `manager_model`, which
counts a block's references as the live tables that hold it.
"""

import itertools
from collections import Counter

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

from grader.checks.expect import int_list, raises
from grader.checks.manager_model import REQUESTS, ManagerMachine, ManagerModel

pytestmark = pytest.mark.part("sharing")


def new_allocator(submission, num_blocks: int):
    return submission.module("block_allocator").BlockAllocator(num_blocks)


def assert_counts(allocator, counts: dict[int, int], num_free: int, after: str) -> None:
    """ref_count of each block in `counts`, and num_free, must be as given."""
    got = {block: allocator.ref_count(block) for block in counts}
    assert got == counts, f"after {after}, ref_count must be {counts}, got {got}"
    free = allocator.num_free
    assert free == num_free, (
        f"after {after}, num_free must be {num_free}, got {free} "
        "(a block is free exactly when its ref_count is 0)"
    )


@pytest.mark.points(2)
def check_ref_counts_follow_allocate_incref_and_free(submission):
    """ref_count is 0 for a free block and 1 once allocated; incref adds one; free drops one, and
    a block is free again only at zero."""
    allocator = new_allocator(submission, 4)
    assert_counts(allocator, dict.fromkeys(range(4), 0), 4, "BlockAllocator(4)")
    a, b = int_list(allocator.allocate(2), "allocate(2)")
    assert_counts(allocator, {a: 1, b: 1}, 2, "allocate(2)")
    allocator.incref(a)
    assert_counts(allocator, {a: 2, b: 1}, 2, f"incref({a})")
    allocator.free([a])
    assert_counts(allocator, {a: 1, b: 1}, 2, f"incref({a}) and free([{a}])")
    allocator.free([a])
    assert_counts(allocator, {a: 0, b: 1}, 3, f"a second free([{a}])")
    allocator.incref(b)
    allocator.incref(b)
    allocator.free([b, b])
    assert_counts(allocator, {b: 1}, 3, f"incref({b}) twice and free([{b}, {b}])")
    allocator.free([b])
    assert_counts(allocator, {b: 0}, 4, f"the last free([{b}])")


@pytest.mark.points(1)
def check_bad_reference_calls_are_refused(submission):
    """incref of a free block, and a free of more references than a block has, raise ValueError
    and change no count."""
    allocator = new_allocator(submission, 3)
    (a,) = int_list(allocator.allocate(1), "allocate(1)")
    never = next(block for block in range(3) if block != a)
    with raises(ValueError, f"incref({never}) of a free block"):
        allocator.incref(never)
    assert_counts(allocator, {a: 1, never: 0}, 2, f"incref({never}) (which raised)")
    allocator.incref(a)
    with raises(ValueError, f"free([{a}, {a}, {a}]) of a block with 2 references"):
        allocator.free([a, a, a])
    assert_counts(allocator, {a: 2}, 2, f"free([{a}, {a}, {a}]) (which raised)")
    allocator.free([a, a])
    with raises(ValueError, f"incref({a}) of a block freed again"):
        allocator.incref(a)
    assert_counts(allocator, {a: 0, never: 0}, 3, f"incref({a}) (which raised)")


@pytest.mark.points(2)
def check_fork_shares_every_block(submission):
    """fork gives a request with the parent's seq_len and block table, and takes no block; a
    shared block is free only once every request holding it is freed."""
    model = ManagerModel(submission, 6, 4, 2, writes=True)
    parent = model.prefill(6)
    child = model.fork(parent)
    model.check_tables()
    model.fork(child)
    model.check_tables()
    model.check_rows()
    model.free(parent)
    model.check_tables()
    model.check_rows()
    model.fork(model.prefill(0))
    model.check_tables()


@pytest.mark.points(3)
def check_copy_on_write(submission):
    """Decode on a request whose last block is shared and not full first copies that block:
    the writer gets a fresh block with the same first tokens, the other request's data stays,
    and the shared block loses the writer's reference."""
    for writer, other in ((1, 0), (0, 1)):
        submission.transcript.reset()
        model = ManagerModel(submission, 4, 4, 2, writes=True)
        parent = model.prefill(6)
        family = [parent, model.fork(parent)]
        model.decode(family[writer])
        model.check_tables()
        model.check_rows()
        model.free(family[other])
        model.check_tables()


@pytest.mark.points(1)
def check_no_copy_at_a_block_boundary(submission):
    """A token that starts a new block writes into no shared block: nothing is copied."""
    model = ManagerModel(submission, 4, 4, 2, writes=True)
    parent = model.prefill(4)
    child = model.fork(parent)
    for req in (child, parent):
        model.decode(req)
        model.check_tables()
        model.check_rows()


@pytest.mark.points(2)
def check_copy_on_write_without_a_free_block_is_refused(submission):
    """A copy-on-write with no free block raises RuntimeError and changes nothing: tables,
    lengths, reference counts and data all stay."""
    model = ManagerModel(submission, 2, 4, 2, writes=True)
    parent = model.prefill(6)
    child = model.fork(parent)
    model.decode(child)
    model.check_tables()
    model.check_rows()
    for req in (child, parent):
        model.free(req)
        model.check_tables()


@pytest.mark.points(2)
def check_fork_and_free_in_any_order(submission):
    """A parent, its child and grandchild, each decoding once and freed in every order: blocks
    come back with their last holder, and the others' data never changes."""
    for order in itertools.permutations(range(3)):
        submission.transcript.reset()
        model = ManagerModel(submission, 8, 4, 2, writes=True)
        parent = model.prefill(5)
        child = model.fork(parent)
        family = [parent, child, model.fork(child)]
        for req in family:
            model.decode(req)
        model.check_rows()
        for index in order:
            model.free(family[index])
            model.check_tables()
            model.check_rows()


class ReferenceMachine(RuleBasedStateMachine):
    """Random allocate, incref and free calls, good and bad, against a Counter of references."""

    def __init__(self, submission) -> None:
        super().__init__()
        self.submission = submission
        submission.transcript.reset()

    @initialize(num_blocks=st.integers(0, 8))
    def new_pool(self, num_blocks):
        self.num_blocks = num_blocks
        self.allocator = new_allocator(self.submission, num_blocks)
        self.refs: Counter[int] = Counter()
        self.last_call = f"BlockAllocator({num_blocks})"

    @rule(data=st.data())
    def allocate(self, data):
        n = data.draw(st.integers(0, self.num_blocks - len(self.refs)), label="n")
        ids = int_list(self.allocator.allocate(n), f"allocate({n})")
        self.last_call = f"allocate({n})"
        free = set(range(self.num_blocks)) - set(self.refs)
        assert len(ids) == len(set(ids) & free) == n, f"allocate({n}) must give {n} free ids: {ids}"
        self.refs.update(ids)

    @precondition(lambda self: self.num_blocks > 0)
    @rule(data=st.data())
    def incref(self, data):
        block = data.draw(st.integers(0, self.num_blocks - 1), label="block")
        self.last_call = f"incref({block})"
        if self.refs[block]:
            self.allocator.incref(block)
            self.refs[block] += 1
            return
        with raises(ValueError, f"incref({block}) of a free block"):
            self.allocator.incref(block)
        self.last_call += " (which raised)"

    @precondition(lambda self: self.refs)
    @rule(data=st.data())
    def free(self, data):
        ids = data.draw(st.lists(st.sampled_from(sorted(self.refs)), max_size=6), label="ids")
        drops = Counter(ids)
        self.last_call = f"free({ids})"
        if all(count <= self.refs[block] for block, count in drops.items()):
            self.allocator.free(ids)
            self.refs -= drops
            return
        with raises(ValueError, f"free({ids}), more references than the blocks have,"):
            self.allocator.free(ids)
        self.last_call += " (which raised)"

    @invariant()
    def counts_match(self):
        counts = {block: self.refs[block] for block in range(self.num_blocks)}
        assert_counts(self.allocator, counts, self.num_blocks - len(self.refs), self.last_call)


@pytest.mark.points(3)
def check_random_incref_and_free(submission):
    run_state_machine_as_test(lambda: ReferenceMachine(submission))


class SharingMachine(ManagerMachine):
    """Prefill, decode, fork and free with a fresh value written for each new token: no request's
    data ever changes except by its own new tokens."""

    max_live = 5

    @initialize(
        num_blocks=st.integers(0, 32), block_size=st.integers(1, 4), head_dim=st.integers(1, 2)
    )
    def new_manager(self, num_blocks, block_size, head_dim):
        self.model = ManagerModel(self.submission, num_blocks, block_size, head_dim, writes=True)

    @precondition(lambda self: len(self.model.live) < self.max_live)
    @rule(target=REQUESTS, parent=REQUESTS, then_decode=st.booleans())
    def fork(self, parent, then_decode):
        """Fork, and maybe decode the child's first token at once (as beam search does)."""
        child = self.model.fork(parent)
        if then_decode:
            self.model.decode(child)
        return child

    @invariant()
    def reads_back_what_was_written(self):
        self.model.check_tables()
        self.model.check_rows()


@pytest.mark.points(6)
def check_random_fork_decode_and_free(submission):
    run_state_machine_as_test(lambda: SharingMachine(submission))
