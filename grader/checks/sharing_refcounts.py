"""Part 6: the reference counts of the candidate's own `BlockAllocator` (`incref`, `ref_count`).

This module always grades the candidate's `block_allocator.py`: it is never run again with the
kit's in its place (`parts.toml` regrades `sharing` only). It judges what part 6
adds to part 1, each call against the counts read back just before it (`Counts`): `incref` adds
one reference and changes nothing else, `ref_count` reads 0 for a free block, `free` drops one
reference per id listed and a block is free again exactly when its count reaches 0, and `incref`
of a free block and a `free` of more references than a block holds are refused. That a refused
`free` frees nothing is part 1's to judge; the ids `allocate` hands out and the free count it
leaves, and the free count after a `free` that frees blocks, are judged here by part 1's rule
(`rules.FREE_BLOCKS`), so that a check that meets an allocator that breaks it is not graded here
where part 1's checks fail on it too. The free count after an `incref`, or after a `free` that
leaves every block it names referenced, is part 6's alone: it costs this part.
"""

from collections import Counter
from collections.abc import Mapping
from contextlib import nullcontext

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from grader.checks.allocator import judge_handed_out, new_allocator
from grader.checks.support.expect import Held, expect, int_list, judged_by, plain_int, raises
from grader.checks.support.rules import FREE_BLOCKS, REF_COUNTS
from grader.said import said
from grader.sandbox.proxy import Submission, attribute, method
from grader.sandbox.transcript import Shown

pytestmark = pytest.mark.part("sharing")


class Counts:
    """A new `BlockAllocator(num_blocks)`, its reference counts and `num_free` read back after
    each call and judged by the change that call must make to them."""

    def __init__(self, submission: Submission, num_blocks: int) -> None:
        self.submission, self.num_blocks = submission, num_blocks
        self.transcript = submission.transcript
        self.allocator = new_allocator(submission, num_blocks)
        self.name = self.transcript.code(self.allocator)
        self.ids = Held(self.transcript, num_blocks)  # the blocks held, by where they came from
        self.counts, self.num_free = self.read()
        fresh = {block: count for block, count in self.counts.items() if count}
        expect(
            self.transcript,
            not fresh,
            said(
                "after BlockAllocator({n}), ref_count must be 0 for every block, got {counts}",
                n=num_blocks,
                counts=fresh,
            ),
            got=f"[{self.name}.ref_count(block) for block in range({num_blocks})]",
            expected=f"[0] * {num_blocks}",
        )

    def read(self) -> tuple[dict[int, int], int]:
        """Every block's ref_count, and num_free (kept out of the counterexample: the failed
        assertion's message gives them)."""
        with self.transcript.quiet():
            blocks = range(self.num_blocks)
            reads = self.submission.batch([
                *(method(self.allocator, "ref_count", block) for block in blocks),
                attribute(self.allocator, "num_free"),
            ])  # fmt: skip
            counts = {
                block: plain_int(self.transcript, next(reads), f"ref_count({block})")
                for block in blocks
            }
            return counts, plain_int(self.transcript, next(reads), "num_free")

    def held(self) -> dict[int, int]:
        return {block: count for block, count in self.counts.items() if count}

    def expect(self, after: str, counts: Mapping[int, int], freed: int | None) -> None:
        """After `after`, the blocks of `counts` hold those counts and every other block its
        count from before; with `freed`, num_free grew by that many blocks."""
        got, free = self.read()
        expected = {**self.counts, **counts}
        wrong = {block: got[block] for block in got if got[block] != expected[block]}
        should = {block: expected[block] for block in wrong}
        reads = ", ".join(f"{self.name}.ref_count({self.ids.code(block)})" for block in wrong)
        with judged_by(REF_COUNTS):
            expect(
                self.transcript,
                not wrong,
                said(
                    "after {call}, ref_count must be {expected}, got {got}",
                    call=after,
                    expected=should,
                    got=wrong,
                ),
                got=f"[{reads}]",
                expected=repr(list(should.values())),
            )
        if freed is not None:
            with judged_by(FREE_BLOCKS) if freed else nullcontext():
                expect(
                    self.transcript,
                    free == self.num_free + freed,
                    said(
                        "after {call}, num_free must be {expected}, got {got} (it was {was}; "
                        "a block is free again exactly when its ref_count reaches 0)",
                        call=after,
                        expected=self.num_free + freed,
                        got=free,
                        was=self.num_free,
                    ),
                    got=f"{self.name}.num_free",
                    expected=str(self.num_free + freed),
                )
        self.counts, self.num_free = got, free
        self.ids.drop([block for block, count in got.items() if not count])

    def allocate(self, n: int) -> list[int]:
        """`allocate(n)`: n distinct free ids, which hold one reference each, and n fewer free
        blocks (part 1's rules, except the references)."""
        with judged_by(FREE_BLOCKS):
            ids = int_list(self.transcript, self.allocator.allocate(n), f"allocate({n})")
        judge_handed_out(self.ids, ids, n)
        was = self.num_free
        self.expect(f"allocate({n})", dict.fromkeys(ids, 1), None)
        with judged_by(FREE_BLOCKS):
            expect(
                self.transcript,
                self.num_free == was - n,
                said("num_free must drop by n after allocate(n)"),
                got=f"{self.name}.num_free",
                expected=str(was - n),
            )
        return ids

    def incref(self, block: int) -> None:
        """`incref(block)`: one more reference to an allocated block; ValueError, and no count
        changed, for a free one."""
        count, call = self.counts[block], f"incref({block})"
        shown = Shown(block, self.ids.code(block))
        if count:
            self.allocator.incref(shown)
            self.expect(call, {block: count + 1}, 0)
            return
        with raises(self.transcript, ValueError, said("{call} of a free block", call=call)):
            self.allocator.incref(shown)
        self.expect(said("{call} (which raised)", call=call), {}, 0)

    def free(self, blocks: list[int]) -> None:
        """`free(blocks)`, blocks listed no more often than they are referenced: one reference
        fewer per listing, and free again at 0."""
        drops = Counter(blocks)
        self.allocator.free(self.ids.shown(blocks))
        counts = {block: self.counts[block] - count for block, count in drops.items()}
        self.expect(f"free({blocks})", counts, sum(1 for count in counts.values() if not count))


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_ref_counts_follow_allocate_incref_and_free(submission):
    """ref_count is 0 for a free block and 1 once allocated; incref adds one; free drops one, and
    a block is free again only at zero."""
    counts = Counts(submission, 4)
    for increfs in (1, 2):
        (block,) = counts.allocate(1)
        for _ in range(increfs):
            counts.incref(block)
        counts.free([block] * increfs)
        counts.free([block])


@pytest.mark.points(1)
@pytest.mark.severity("safety")
def check_bad_reference_calls_are_refused(submission):
    """incref of a free block, of a block freed again, or of an id out of range (-1 included,
    every block held, so that -1 cannot pass for the last one) raises ValueError and changes no
    count; a free of more references than a block holds raises ValueError."""
    counts = Counts(submission, 3)
    (block,) = counts.allocate(1)
    counts.incref(next(other for other in range(3) if other != block))
    counts.incref(block)
    counts.free([block, block])
    counts.incref(block)
    (block,) = counts.allocate(1)
    counts.incref(block)
    call = said("free({ids}) of a block with {count} references", ids=[block] * 3, count=2)
    with raises(counts.transcript, ValueError, call):
        counts.allocator.free(counts.ids.shown([block] * 3))
    counts.allocate(counts.num_free)
    for block in (-1, counts.num_blocks):
        call = said(
            "{call} of an id out of range 0..{last}",
            call=f"incref({block})",
            last=counts.num_blocks - 1,
        )
        with raises(counts.transcript, ValueError, call):
            counts.allocator.incref(block)
        counts.expect(said("{call} (which raised)", call=f"incref({block})"), {}, 0)


class ReferenceMachine(RuleBasedStateMachine):
    """Random allocate, incref and free calls, increfs of free blocks among them, each judged
    by the counts it leaves against those read just before it."""

    def __init__(self, submission: Submission) -> None:
        super().__init__()
        self.submission = submission
        submission.transcript.reset()

    @initialize(num_blocks=st.integers(1, 8))
    def new_pool(self, num_blocks):
        self.counts = Counts(self.submission, num_blocks)

    def can_allocate(self) -> int:
        """How many blocks an allocate may ask for: free ones, at most 3."""
        unheld = self.counts.num_blocks - len(self.counts.held())
        return min(unheld, self.counts.num_free, 3)

    # Never allocate(0): its answer is part 1's rule, which this part does not grade again.
    @precondition(lambda self: self.can_allocate() > 0)
    @rule(data=st.data())
    def allocate(self, data):
        self.counts.allocate(data.draw(st.integers(1, self.can_allocate()), label="n"))

    @rule(data=st.data())
    def incref(self, data):
        block = data.draw(st.integers(0, self.counts.num_blocks - 1), label="block")
        self.counts.incref(block)

    @precondition(lambda self: self.counts.held())
    @rule(data=st.data())
    def free(self, data):
        held = self.counts.held()
        drawn = data.draw(st.lists(st.sampled_from(sorted(held)), max_size=6), label="ids")
        self.counts.free(within_references(drawn, held))


def within_references(blocks: list[int], held: Mapping[int, int]) -> list[int]:
    """`blocks` in order, each listed no more often than `held` says it is referenced."""
    kept, listed = [], Counter()
    for block in blocks:
        if listed[block] < held[block]:
            kept.append(block)
            listed[block] += 1
    return kept


@pytest.mark.points(3)
@pytest.mark.severity("safety")
def check_random_incref_and_free(submission):
    run_state_machine_as_test(lambda: ReferenceMachine(submission))
