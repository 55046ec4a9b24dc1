"""The abstract model behind the manager's checks (parts 2 and 6), and how to drive it.

`ManagerModel` holds what exercises/README.md lets a checker know of a `KVCacheManager`: each live
request's `seq_len` and `block_table`, how many live tables hold each block, and the row written for
each token. It never predicts a block id: a new block is right whenever it was free (in range and in
no live table), and the model adopts it. Each operation runs on the candidate and is checked at
once; `check_tables` and `check_rows` then compare everything observable, after every step of a
state machine, so that a call that changes another request, or one that raises and still changes
something, is caught too.

A bug costs points in its own part: driving part 6's checks (`sharing=True`), the model leaves
part 2's own rules to part 2. It makes no call that must be refused for want of a block at
prefill or at a block boundary, and does not judge that `free` empties the table; its checks
prefill whole blocks only, where rounding up or down agree, and where a prefill still fails or
gives the wrong number of blocks, the model frees that request and builds it a token at a time
instead (`decoded`). Where it judges a rule that another part owns (`rules.py`: a decode's
block and its count, a refused decode's seq_len, the blocks the allocator hands out and the free
count), the failure records that rule, in either part, so that a check of part 6 that fails on it
is left to part 2 or part 1 where a check of theirs fails on it too. It reads each request's data
from `physical_kv_cache` through the block table, never through part 3's `get_physical_cache`.
"""

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    consumes,
    multiple,
    precondition,
    rule,
)

from grader.checks.support.expect import (
    distinct,
    expect,
    judged_by,
    plain_int,
    raises,
    same,
    succeeds,
)
from grader.checks.support.rows_and_slots import assert_rows
from grader.checks.support.rules import (
    COPY_ON_WRITE,
    DECODE_BLOCK,
    FORK_SHARES,
    FREE_BLOCKS,
    FREE_COUNT,
    HELD_ONCE,
    PREFILL_BLOCKS,
    REF_COUNTS,
    REFUSED_DECODE,
)
from grader.said import Said, said
from grader.sandbox.proxy import (
    Remote,
    RemoteError,
    Submission,
    attribute,
    length,
    method,
    transcript_of,
)
from grader.sandbox.transcript import Shown, Transcript
from kernels.reference import cdiv, token_slots

RAISED = said("a call that raises must leave everything as it was")
OTHERS = said("a call may change only the request it is given")


def new_manager(submission: Submission, num_blocks: int, block_size: int, head_dim: int) -> Remote:
    return submission.module("kv_cache_manager").KVCacheManager(num_blocks, block_size, head_dim)


def new_request(submission: Submission, request_id: int, prompt_len: int) -> Remote:
    return submission.module("kv_cache_manager").Request(request_id, prompt_len)


def num_free(manager: Remote) -> int:
    """`len(manager.free_blocks)`, read afresh: it may be a property, or rebound by any call."""
    return len(manager.ref("free_blocks"))


def seq_len_of(req: Remote, name: str) -> int:
    return checked_seq_len(transcript_of(req), req.seq_len, name)


def table_of(req: Remote, name: str) -> list[int]:
    return checked_table(transcript_of(req), req.block_table, name)


def checked_seq_len(transcript: Transcript, seq_len: object, name: str) -> int:
    """`seq_len`, read from the request `name`, checked to be an int."""
    return plain_int(transcript, seq_len, f"{name}.seq_len")


def checked_table(transcript: Transcript, table: object, name: str) -> list[int]:
    """`table`, read from the request `name`, checked to be a list of ints."""
    ints = type(table) is list and all(type(block) is int for block in table)
    expect(
        transcript,
        ints,
        lambda: said(
            "{name}.block_table must be a list of ints, got {table}", name=name, table=f"{table!r}"
        ),
        got=f"[type(block).__name__ for block in {name}.block_table]",
        expected=f"['int'] * len({name}.block_table)",
    )
    return table


def rows_code(rows: torch.Tensor) -> str:
    """The model's rows (token `k`'s row `k, k + 1/8, ...`) as code."""
    return f"torch.tensor({rows[:, 0].tolist()}).reshape(-1, 1) + torch.arange({rows.shape[1]}) / 8"


@dataclass(repr=False)
class Tracked:
    """What the model knows of one live request."""

    req: Remote  # the candidate's Request
    name: str  # its variable in the counterexample
    table: list[int]
    rows: torch.Tensor  # [seq_len, head_dim]: the value written for each token

    @property
    def seq_len(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return self.name


class ManagerModel:
    """A candidate's KVCacheManager and the model it must agree with after every call.

    With `sharing` (part 6's checks), each new token's row gets a fresh value in
    `physical_kv_cache`, at the slot its block table gives it (as a model's forward pass would),
    so that `check_rows` can tell whether every request holds exactly its own tokens; and the
    model leaves part 2's own rules to part 2 (see the module's docstring). Token `k`'s row holds
    `k, k + 1/8, k + 2/8, ...` (exact floats); the unused tail of a prompt's last block, -1.
    """

    def __init__(
        self,
        submission: Submission,
        num_blocks: int,
        block_size: int,
        head_dim: int,
        sharing: bool = False,
    ) -> None:
        self.submission, self.transcript = submission, submission.transcript
        self.num_blocks, self.block_size, self.head_dim = num_blocks, block_size, head_dim
        self.sharing = sharing
        self.manager = new_manager(submission, num_blocks, block_size, head_dim)
        self.live: dict[str, Tracked] = {}
        self.requests_made = 0
        self.tokens_made = 0
        self.done(f"KVCacheManager({num_blocks}, {block_size}, {head_dim})")

    def seq_len_and_table(self, req: Remote) -> Iterator[object]:
        """`req.seq_len` and `req.block_table`, read in one round trip (`Submission.batch`)."""
        return self.submission.batch([attribute(req, "seq_len"), attribute(req, "block_table")])

    # -- the model's view -------------------------------------------------------------------------

    def held(self) -> Counter[int]:
        """How many live tables hold each block (more than one only after a fork)."""
        return Counter(block for tracked in self.live.values() for block in tracked.table)

    def expected_free(self) -> int:
        return self.num_blocks - len(self.held())

    def holders(self, block: int, but: Tracked | None = None) -> list[str]:
        return [t.name for t in self.live.values() if block in t.table and t is not but]

    def new_rows(self, count: int) -> torch.Tensor:
        first = self.tokens_made + 1
        self.tokens_made += count
        tokens = torch.arange(first, first + count, dtype=torch.float32)
        return tokens[:, None] + torch.arange(self.head_dim, dtype=torch.float32) / 8

    def table_code(self, tracked: Tracked) -> str:
        """`tracked`'s block table as the model knows it, in the counterexample: a copy of the
        read it was last seen in, or the ids written out where that read is gone."""
        return self.transcript.source(tracked.table, f"{tracked.name}_table")

    def tables_code(self, but: Tracked | None = None) -> str:
        """The blocks of every live table (but `but`'s) as the model knows them: a set display."""
        tables = [self.table_code(t) for t in self.live.values() if t is not but]
        return f"{{{', '.join(f'*{table}' for table in tables)}}}" if tables else "set()"

    def done(self, call: str, hint: str = OTHERS, refused_decode: bool = False) -> None:
        """Remember the last call, for the messages of the checks that follow it, and whether
        it was a decode refused for want of a block (`seq_len_rule`)."""
        self.last_call, self.hint, self.refused_decode = call, hint, refused_decode

    # -- operations, each checked at once ---------------------------------------------------------

    def prefill(self, prompt_len: int) -> Tracked | None:
        """Prefill a new request; None when the pool is short, which the candidate must refuse
        (part 2's rule: with `sharing`, no such call is made)."""
        needed, free = cdiv(prompt_len, self.block_size), self.expected_free()
        if needed > free and self.sharing:
            return None
        self.requests_made += 1
        req = new_request(self.submission, self.requests_made, prompt_len)
        name = self.submission.transcript.code(req)
        call = f"manager.allocate_for_prefill({name})"
        if needed > free:
            why = said(
                "{call}, which needs {needed} blocks with {free} free,",
                call=call,
                needed=needed,
                free=free,
            )
            with raises(self.transcript, RuntimeError, why):
                self.manager.allocate_for_prefill(req)
            self.done(said("{call} (which raised)", call=call), RAISED)
            reads = self.seq_len_and_table(req)
            got = (checked_seq_len(self.transcript, next(reads), name),
                   checked_table(self.transcript, next(reads), name))  # fmt: skip
            same(
                self.transcript,
                got,
                (prompt_len, []),
                said(
                    "{call} raised but left {name} with seq_len, block_table = {got}, "
                    "not ({prompt_len}, []) ({hint})",
                    call=call,
                    name=name,
                    got=got,
                    prompt_len=prompt_len,
                    hint=RAISED,
                ),
                got=f"({name}.seq_len, {name}.block_table)",
            )
            return None
        if self.sharing:
            try:
                self.manager.allocate_for_prefill(req)
            except RemoteError as error:  # part 2's rule: build the request another way
                error.expected(Exception, required=False)
                return self.decoded(req, name, prompt_len)
        else:
            why = said("it needs {needed} of the {free} free blocks", needed=needed, free=free)
            with judged_by(PREFILL_BLOCKS), succeeds(call, why):
                self.manager.allocate_for_prefill(req)
        self.done(call)
        table = table_of(req, name)
        if len(table) != needed and self.sharing:
            return self.decoded(req, name, prompt_len)
        with judged_by(PREFILL_BLOCKS):
            same(
                self.transcript,
                len(table),
                needed,
                said(
                    "{call} must give {name} ceil(seq_len / block_size) = ceil({prompt_len} "
                    "/ {size}) = {needed} blocks, got block_table {table}",
                    call=call,
                    name=name,
                    prompt_len=prompt_len,
                    size=self.block_size,
                    needed=needed,
                    table=table,
                ),
                got=f"len({name}.block_table)",
            )
        self.assert_were_free(table, call, f"{name}.block_table")
        tracked = Tracked(req, name, table, self.new_rows(prompt_len))
        self.live[name] = tracked
        if self.sharing:
            self.write_prompt(tracked)
        return tracked

    def decoded(self, wrong: Remote, name: str, prompt_len: int) -> Tracked:
        """With `sharing`, in place of a prefill that failed or gave the wrong number of blocks
        (part 2's rule, judged there): that request freed if it holds blocks, and a new one of
        `prompt_len` tokens built a token at a time from seq_len 0, which needs no prefill
        (ceil(0 / block_size) = 0 blocks), so that fork and copy-on-write are judged all the
        same."""
        table = table_of(wrong, name)
        if table:
            call = f"manager.free({name})"
            with succeeds(call, said("{call} holds blocks {table}", call=name, table=table)):
                self.manager.free(wrong)
            self.done(call)
        self.requests_made += 1
        req = new_request(self.submission, self.requests_made, 0)
        tracked = Tracked(req, self.submission.transcript.code(req), [], self.new_rows(0))
        self.live[tracked.name] = tracked
        for _ in range(prompt_len):
            self.decode(tracked)
        return tracked

    def prefill_again(self, tracked: Tracked) -> None:
        """Prefill a request whose block table is not empty: ValueError, and nothing changes."""
        call = f"manager.allocate_for_prefill({tracked.name})"
        with raises(
            self.transcript, ValueError, said("{call}, on a non-empty block_table,", call=call)
        ):
            self.manager.allocate_for_prefill(tracked.req)
        self.done(said("{call} (which raised)", call=call), RAISED)

    def decode(self, tracked: Tracked) -> bool:
        """One more token: a new block exactly when it starts one, and a private copy of the last
        block when that is shared and not full. False when no free block is left for that, which
        the candidate must refuse (a token that starts a block is part 2's rule: with `sharing`,
        no such call is made)."""
        call = f"manager.allocate_for_decode({tracked.name})"
        position, table, size = tracked.seq_len, tracked.table, self.block_size
        opens_block = position % size == 0
        sharers = [] if opens_block else self.holders(table[-1], but=tracked)
        if (opens_block or sharers) and self.expected_free() == 0:
            if opens_block and self.sharing:
                return False
            why = (
                said("starts a new block")
                if opens_block
                else said("goes into shared block {block}", block=table[-1])
            )
            why = said(
                "{call}, whose token {position} {why}, with no block free,",
                call=call,
                position=position,
                why=why,
            )
            with self.decode_rule(sharers), raises(self.transcript, RuntimeError, why):
                self.manager.allocate_for_decode(tracked.req)
            self.done(said("{call} (which raised)", call=call), RAISED, refused_decode=True)
            return False
        reads = self.submission.batch([
            method(self.manager, "allocate_for_decode", tracked.req),
            attribute(tracked.req, "seq_len"),
            attribute(tracked.req, "block_table"),
        ])  # fmt: skip
        with self.decode_rule(sharers), succeeds(call, self.decode_needs(position, sharers)):
            next(reads)
        self.done(call)
        name, transcript = tracked.name, self.transcript
        got = checked_seq_len(transcript, next(reads), name)
        with self.decode_rule():
            same(
                transcript,
                got,
                position + 1,
                said(
                    "{call} must add one to seq_len ({before} -> {after}), got {got}",
                    call=call,
                    before=position,
                    after=position + 1,
                    got=got,
                ),
                got=f"{name}.seq_len",
            )
        new_table = checked_table(transcript, next(reads), name)
        new = f"{name}.block_table"

        def old() -> str:
            return self.table_code(tracked)

        if opens_block:
            appended = len(new_table) == len(table) + 1 and new_table[:-1] == table
            with self.decode_rule():
                expect(
                    transcript,
                    appended,
                    said(
                        "token {position} starts a new block ({again} % block_size {size} == "
                        "0): {call} must append one free block to block_table {table}, got "
                        "{new}",
                        position=position,
                        again=position,
                        size=size,
                        call=call,
                        table=table,
                        new=new_table,
                    ),
                    got=f"(len({new}), {new}[:-1])",
                    expected=lambda: f"(len({old()}) + 1, {old()})",
                )
            self.assert_were_free(new_table[-1:], call, f"{new}[-1:]")
        elif sharers:
            same_length = len(new_table) == len(table)
            replaced = same_length and new_table[:-1] == table[:-1] and new_table[-1] != table[-1]
            with self.decode_rule(sharers):
                expect(
                    transcript,
                    replaced,
                    said(
                        "token {position} goes into block {block}, which {sharers} also "
                        "holds and which is not full: {call} must first copy it into a free "
                        "block (copy-on-write) in its place, so block_table {table} must "
                        "become {kept} + [a free block], got {new}",
                        position=position,
                        block=table[-1],
                        sharers=", ".join(sharers),
                        call=call,
                        table=table,
                        kept=table[:-1],
                        new=new_table,
                    ),
                    got=lambda: f"(len({new}), {new}[:-1], {new}[-1:] == {old()}[-1:])",
                    expected=lambda: f"(len({old()}), {old()}[:-1], False)",
                )
            self.assert_were_free(new_table[-1:], call, f"{new}[-1:]")
            self.done(
                said(
                    "{call} (which copied block {block} into block {copy})",
                    call=call,
                    block=table[-1],
                    copy=new_table[-1],
                )
            )
        else:
            with self.decode_rule():
                expect(
                    transcript,
                    new_table == table,
                    said(
                        "token {position} goes into the last block ({again} % block_size "
                        "{size} != 0, and no other request holds it): {call} must leave "
                        "block_table {table} as it is, got {new}",
                        position=position,
                        again=position,
                        size=size,
                        call=call,
                        table=table,
                        new=new_table,
                    ),
                    got=new,
                    expected=old,
                )
        row = self.new_rows(1)
        tracked.table, tracked.rows = new_table, torch.cat([tracked.rows, row])
        if self.sharing:
            pool = self.manager.ref("physical_kv_cache")
            block = Shown(new_table[position // size], f"{new}[{position // size}]")
            pool[block, position % size] = row[0]
        return True

    def decode_needs(self, position: int, sharers: list[str]) -> str:
        free = self.expected_free()
        if position % self.block_size == 0:
            return said(
                "token {position} starts a new block, and {free} blocks are free",
                position=position,
                free=free,
            )
        if sharers:
            return said(
                "token {position} needs a copy of a shared block, and {free} blocks are free",
                position=position,
                free=free,
            )
        return said(
            "token {position} fits in the last block, which no other request holds",
            position=position,
        )

    def free(self, tracked: Tracked) -> None:
        """Free a request: each of its blocks loses one reference, and its table empties (part
        2's rule: not judged with `sharing`)."""
        call = f"manager.free({tracked.name})"
        with succeeds(
            call, said("{call} holds blocks {table}", call=tracked.name, table=tracked.table)
        ):
            self.manager.free(tracked.req)
        self.done(call)
        del self.live[tracked.name]
        if self.sharing:
            return
        table = table_of(tracked.req, tracked.name)
        same(
            self.transcript,
            table,
            [],
            said(
                "{call} must empty {name}.block_table, got {table}",
                call=call,
                name=tracked.name,
                table=table,
            ),
            got=f"{tracked.name}.block_table",
        )

    def fork(self, parent: Tracked) -> Tracked:
        """A child that shares every block of `parent`: the same seq_len, table and rows."""
        self.requests_made += 1
        child_id = self.requests_made
        call = f"manager.fork({parent.name}, {child_id})"
        why = said("{call} holds blocks {table}", call=parent.name, table=parent.table)
        with judged_by(FORK_SHARES), succeeds(call, why):
            child = self.manager.fork(parent.req, child_id)
        self.done(call)
        expect(
            self.transcript,
            isinstance(child, Remote),
            said("{call} must return the new Request, got {got}", call=call, got=f"{child!r}"),
            got=f"type({self.transcript.source(child, 'child')}).__name__",
            expected="'Request'",
        )
        name = self.transcript.code(child)
        got = (child.request_id, seq_len_of(child, name), table_of(child, name))
        expected = (child_id, parent.seq_len, parent.table)
        with judged_by(FORK_SHARES):
            same(
                self.transcript,
                got,
                expected,
                said(
                    "{call} must return a request whose request_id, seq_len, block_table are "
                    "{expected} (the parent's length and blocks), got {got}",
                    call=call,
                    expected=expected,
                    got=got,
                ),
                got=f"({name}.request_id, {name}.seq_len, {name}.block_table)",
                expected=lambda: f"({child_id}, {parent.seq_len}, {self.table_code(parent)})",
            )
        tracked = Tracked(child, name, got[2], parent.rows)
        self.live[name] = tracked
        return tracked

    def assert_were_free(self, blocks: list[int], call: str, code: str) -> None:
        """`call` handed out `blocks` (`code` in the counterexample): distinct, in range, and in
        no live table, as part 1's rule has the allocator hand them out (`rules.FREE_BLOCKS`) and
        part 2's has the manager give them (`rules.HELD_ONCE`)."""
        with judged_by(FREE_BLOCKS, HELD_ONCE):
            transcript, num_blocks = self.transcript, self.num_blocks
            distinct(
                transcript,
                blocks,
                code,
                said("{call} handed out a block twice: {blocks}", call=call, blocks=blocks),
            )
            for block in blocks:
                expect(
                    transcript,
                    0 <= block < num_blocks,
                    said(
                        "{call} handed out block {block}, outside 0..{last}",
                        call=call,
                        block=block,
                        last=num_blocks - 1,
                    ),
                    got=f"[block for block in {code} if not 0 <= block < {num_blocks}]",
                    expected="[]",
                )
                holders = self.holders(block)
                if holders:
                    expect(
                        transcript,
                        False,
                        said(
                            "{call} handed out block {block}, which {holder} holds",
                            call=call,
                            block=block,
                            holder=holders[0],
                        ),
                        got=f"sorted(set({code}) & {self.tables_code()})",
                        expected="[]",
                    )

    def write_prompt(self, tracked: Tracked) -> None:
        """Write a prompt's rows block by block (each block is the request's own)."""
        size, width = self.block_size, self.head_dim
        padding = torch.full((len(tracked.table) * size - tracked.seq_len, width), -1.0)
        blocks = torch.cat([tracked.rows, padding]).view(-1, size, width)
        pool = self.manager.ref("physical_kv_cache")
        for index, (block, rows) in enumerate(zip(tracked.table, blocks, strict=True)):
            pool[Shown(block, f"{tracked.name}.block_table[{index}]")] = rows

    # -- everything observable against the model ------------------------------------------------

    def check_tables(self, rows: bool = False) -> None:
        """Every live request's seq_len and block table, and the free count, match the model;
        with `rows`, then `check_rows`, on the pool read in the same round trip."""
        transcript = self.transcript
        with transcript.quiet():
            reqs = [tracked.req for tracked in self.live.values()]
            reads = self.submission.batch([
                *(attribute(req, name) for req in reqs for name in ("seq_len", "block_table")),
                length(self.manager, "free_blocks"),
                *([attribute(self.manager, "physical_kv_cache")] if rows else []),
            ])  # fmt: skip
            for tracked in self.live.values():
                got = checked_seq_len(transcript, next(reads), tracked.name)
                with self.seq_len_rule():
                    same(
                        transcript,
                        got,
                        tracked.seq_len,
                        said(
                            "after {call}, {name}.seq_len is {got}, expected {expected} ({hint})",
                            call=self.last_call,
                            name=tracked.name,
                            got=got,
                            expected=tracked.seq_len,
                            hint=self.hint,
                        ),
                        got=f"{tracked.name}.seq_len",
                    )
                table = checked_table(transcript, next(reads), tracked.name)
                if table != tracked.table:
                    expected = self.table_code(tracked)
                    expect(
                        transcript,
                        False,
                        said(
                            "after {call}, {name}.block_table is {got}, expected "
                            "{expected} ({hint})",
                            call=self.last_call,
                            name=tracked.name,
                            got=table,
                            expected=tracked.table,
                            hint=self.hint,
                        ),
                        got=f"{tracked.name}.block_table",
                        expected=expected,
                    )
            held = len(self.held())
            free = plain_int(transcript, next(reads), "len(manager.free_blocks)")
            live = [f"*{tracked.name}.block_table" for tracked in self.live.values()]
            # the allocator's count, or a leak; with `sharing`, the references that hold a block
            with judged_by(FREE_BLOCKS, FREE_COUNT, *([REF_COUNTS] if self.sharing else [])):
                expect(
                    transcript,
                    free == self.num_blocks - held,
                    lambda: self.free_count_wrong(free, held),
                    got=f"len({transcript.code(self.manager)}.free_blocks)",
                    expected=f"{self.num_blocks} - len({{{', '.join(live)}}})"
                    if live
                    else str(self.num_blocks),
                )
        if rows:
            self.check_rows(reads)

    def seq_len_rule(self) -> AbstractContextManager[None]:
        """The `seq_len` a decode refused for want of a block left is judged by part 2's rule
        that such a call changes nothing (`rules.py`); after any other call, by none."""
        return judged_by(REFUSED_DECODE) if self.refused_decode else nullcontext()

    def decode_rule(self, sharers: Sequence[str] = ()) -> AbstractContextManager[None]:
        """A decode is judged by part 2's rule (one more token; a new free block exactly when
        it starts one, else the same table; a call that may succeed does), except one that must
        copy a shared block (`sharers`), which part 6's rule judges."""
        return judged_by(COPY_ON_WRITE) if sharers else judged_by(DECODE_BLOCK)

    def free_count_wrong(self, free: int, held: int) -> Said:
        """What a wrong count of free blocks says: both counts, and the hint where a call raised."""
        parts = {"call": self.last_call, "free": free, "expected": self.num_blocks - held,
                 "num_blocks": self.num_blocks, "held": held}  # fmt: skip
        if self.hint == RAISED:
            return said(
                "after {call}, len(manager.free_blocks) is {free}, expected {expected}: "
                "num_blocks ({num_blocks}) minus the {held} blocks the live requests hold ({hint})",
                hint=RAISED,
                **parts,
            )
        return said(
            "after {call}, len(manager.free_blocks) is {free}, expected {expected}: num_blocks "
            "({num_blocks}) minus the {held} blocks the live requests hold",
            **parts,
        )

    def check_rows(self, reads: Iterator[object] | None = None) -> None:
        """Every live request's tokens, read from `physical_kv_cache` through its block table
        (not through part 3's `get_physical_cache`), are exactly the rows written for them. The
        pool is the next of `reads` where `check_tables` read it in its round trip."""
        transcript, manager = self.transcript, self.transcript.code(self.manager)
        with transcript.quiet():
            pool = self.manager.physical_kv_cache if reads is None else next(reads)
            shape = [self.num_blocks, self.block_size, self.head_dim]
            kept = isinstance(pool, torch.Tensor) and list(pool.shape) == shape
            expect(
                transcript,
                kept,
                lambda: said(
                    "after {call}, manager.physical_kv_cache must still be a tensor "
                    "of shape [num_blocks, block_size, head_dim] = {shape}, got {got}",
                    call=self.last_call,
                    shape=shape,
                    got=f"{pool!r:.200}",
                ),
                got=f"list({manager}.physical_kv_cache.shape)",
                expected=repr(shape),
            )
            rows = pool.reshape(-1, self.head_dim)
            transcript.needs("from kernels.reference import token_slots")
            for tracked in self.live.values():
                slots = token_slots(tracked.table, tracked.seq_len, self.block_size)
                what = said(
                    "after {call}, manager.physical_kv_cache read through "
                    "{name}.block_table {table}",
                    call=self.last_call,
                    name=tracked.name,
                    table=tracked.table,
                )
                read = (
                    f"{manager}.physical_kv_cache.reshape(-1, {self.head_dim})[token_slots("
                    f"{tracked.name}.block_table, {tracked.seq_len}, {self.block_size})]"
                )
                code = (read, rows_code(tracked.rows))
                assert_rows(
                    transcript,
                    rows[slots],
                    tracked.rows,
                    what,
                    tracked.table,
                    self.block_size,
                    code,
                )


REQUESTS: Bundle[Tracked] = Bundle("requests")


class ManagerMachine(RuleBasedStateMachine):
    """Random prefill, decode and free calls on a few requests, each checked by the model.

    A subclass sets `self.model` in an `@initialize` rule, and adds its invariants and rules.
    The live requests are a bundle, so that hypothesis shrinks a failure to its fewest steps.
    """

    max_live = 4

    def __init__(self, submission: Submission) -> None:
        super().__init__()
        self.submission = submission
        submission.transcript.reset()
        self.model: ManagerModel

    @precondition(lambda self: len(self.model.live) < self.max_live)
    @rule(target=REQUESTS, prompt_len=st.integers(0, 12))
    def prefill(self, prompt_len: int) -> Tracked | MultipleResults[Tracked]:
        tracked = self.model.prefill(prompt_len)
        return multiple() if tracked is None else tracked

    @rule(tracked=REQUESTS, tokens=st.integers(1, 5))
    def decode(self, tracked: Tracked, tokens: int) -> None:
        for _ in range(tokens):
            if not self.model.decode(tracked):
                break

    @rule(tracked=consumes(REQUESTS))
    def free(self, tracked: Tracked) -> None:
        self.model.free(tracked)
