"""Part 6: fork and copy-on-write, through the manager.

Checked through the manager's observable behaviour only (block tables, the free count, and each
request's data read from `physical_kv_cache` through its block table), against the model of
`manager_model`, which counts a block's references as the live tables that hold it. The
allocator's own reference counts are checked in `sharing_refcounts.py`.

A bug costs points in its own part: the model leaves part 2's rules to part 2 (`ManagerModel`
with `sharing`), prompts fill whole blocks (prefill rounding up or down agree; the partly filled
blocks that copy-on-write needs come from decoding), and blocks hold at least 2 tokens (with 1, no
block is ever partly filled, nothing is copied, and decoding is part 2's alone). Where the
candidate's allocator fails part 1 and this module lost points, it is graded a second time with
the kit's allocator (its `regraded` modules in `grader/parts.toml`), and the part keeps the
better grading.
"""

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    MultipleResults,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from grader.checks.support.manager_model import REQUESTS, ManagerMachine, ManagerModel, Tracked

pytestmark = pytest.mark.part("sharing")


def grown(model: ManagerModel, tokens: int) -> Tracked:
    """A request of `tokens` tokens, its last block partly filled unless they fill it: a prompt
    of whole blocks, then one token at a time."""
    whole = tokens - tokens % model.block_size
    tracked = model.prefill(whole)
    for _ in range(tokens - whole):
        model.decode(tracked)
    return tracked


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_fork_shares_every_block(submission):
    """fork gives a request with the parent's seq_len and block table, and takes no block; a
    shared block is free only once every request holding it is freed."""
    model = ManagerModel(submission, 6, 4, 2, sharing=True)
    parent = grown(model, 6)
    child = model.fork(parent)
    model.check_tables()
    model.fork(child)
    model.check_tables(rows=True)
    model.free(parent)
    model.check_tables(rows=True)
    model.fork(model.prefill(0))
    model.check_tables()


@pytest.mark.points(3)
@pytest.mark.severity("safety")
def check_copy_on_write(submission):
    """Decode on a request whose last block is shared and not full first copies that block:
    the writer gets a fresh block with the same first tokens, the other request's data stays,
    and the shared block loses the writer's reference."""
    for writer, other in ((1, 0), (0, 1)):
        submission.transcript.reset()
        model = ManagerModel(submission, 4, 4, 2, sharing=True)
        parent = grown(model, 6)
        family = [parent, model.fork(parent)]
        model.decode(family[writer])
        model.check_tables(rows=True)
        model.free(family[other])
        model.check_tables()


@pytest.mark.points(1)
@pytest.mark.severity("contract")
def check_no_copy_at_a_block_boundary(submission):
    """A token that starts a new block writes into no shared block: nothing is copied."""
    model = ManagerModel(submission, 4, 4, 2, sharing=True)
    parent = model.prefill(4)
    child = model.fork(parent)
    for req in (child, parent):
        model.decode(req)
        model.check_tables(rows=True)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_copy_on_write_without_a_free_block_is_refused(submission):
    """A copy-on-write with no free block raises RuntimeError and changes nothing: tables,
    lengths, reference counts and data all stay."""
    model = ManagerModel(submission, 2, 4, 2, sharing=True)
    parent = grown(model, 6)
    child = model.fork(parent)
    model.decode(child)
    model.check_tables(rows=True)
    for req in (child, parent):
        model.free(req)
        model.check_tables()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_fork_and_free_in_any_order(submission):
    """A parent, its child and grandchild, each decoding once and freed in every order: blocks
    come back with their last holder, and the others' data never changes."""
    for order in itertools.permutations(range(3)):
        submission.transcript.reset()
        model = ManagerModel(submission, 8, 4, 2, sharing=True)
        parent = grown(model, 5)
        child = model.fork(parent)
        family = [parent, child, model.fork(child)]
        for req in family:
            model.decode(req)
        model.check_rows()
        for index in order:
            model.free(family[index])
            model.check_tables(rows=True)


class SharingMachine(ManagerMachine):
    """Prefill (whole blocks), decode, fork and free with a fresh value written for each new
    token: no request's data ever changes except by its own new tokens."""

    max_live = 5

    @initialize(
        num_blocks=st.integers(0, 32), block_size=st.integers(2, 4), head_dim=st.integers(1, 2)
    )
    def new_manager(self, num_blocks, block_size, head_dim):
        self.model = ManagerModel(self.submission, num_blocks, block_size, head_dim, sharing=True)

    @precondition(lambda self: len(self.model.live) < self.max_live)
    @rule(target=REQUESTS, blocks=st.integers(0, 3))
    def prefill(self, blocks: int) -> Tracked | MultipleResults[Tracked]:
        tracked = self.model.prefill(blocks * self.model.block_size)
        return multiple() if tracked is None else tracked

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
        self.model.check_tables(rows=True)


@pytest.mark.points(6)
@pytest.mark.severity("safety")
def check_random_fork_decode_and_free(submission):
    run_state_machine_as_test(lambda: SharingMachine(submission))
