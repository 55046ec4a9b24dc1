"""Part 3: the block gather and the slot mapping, bit-exact against the grader's copy of the pool.

Every request here is built from plain data, apart from parts 1 and 2: a `Request` whose
`block_table` and `seq_len` the check sets itself (blocks it picks, in any order), in a
`KVCacheManager` whose `physical_kv_cache` it writes directly (random rows from a generator
seeded by the example, so that a counterexample reruns the same, unused rows and tails included).
The contract defines both methods by the block table and the pool alone, so a slip in prefill,
decode or free, or in the allocator, costs nothing here. The timing of both is checked elsewhere.
"""

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from grader.checks.support.expect import judged_by
from grader.checks.support.manager_model import new_manager, new_request
from grader.checks.support.rows_and_slots import assert_rows, assert_slots
from grader.checks.support.rules import GATHER_ROWS, SLOT_MAPPING
from grader.said import said
from grader.sandbox.proxy import Remote, Submission
from grader.sandbox.transcript import Shown
from kernels.reference import cdiv

pytestmark = pytest.mark.part("gather")


@dataclass(repr=False)
class Plain:
    """A request built from plain data: its handle, its variable in the counterexample, and the
    block table and length the check gave it."""

    req: Remote
    name: str
    table: list[int]
    seq_len: int

    def __repr__(self) -> str:
        return self.name


class PlainPool:
    """A candidate's `KVCacheManager` used for its gather alone: the check picks each request's
    blocks and writes the pool itself, and compares with its own copy of the pool."""

    def __init__(
        self, submission: Submission, num_blocks: int, block_size: int, head_dim: int
    ) -> None:
        self.submission, self.transcript = submission, submission.transcript
        self.block_size, self.head_dim = block_size, head_dim
        self.manager = new_manager(submission, num_blocks, block_size, head_dim)
        self.remote_pool = self.manager.ref("physical_kv_cache")
        self.pool = torch.zeros(num_blocks, block_size, head_dim)
        # The counterexample's own copy of the pool, written beside the candidate's.
        self.pool_name = self.transcript.fresh("pool")
        self.transcript.needs("import torch")
        self.transcript.define(
            f"{self.pool_name} = torch.zeros({num_blocks}, {block_size}, {head_dim})"
        )
        self.requests_made = 0

    def request(self, table: list[int], seq_len: int) -> Plain:
        """`Request(id, seq_len)`, given `table` as its block table."""
        self.requests_made += 1
        req = new_request(self.submission, self.requests_made, seq_len)
        req.block_table = list(table)
        return Plain(req, self.submission.transcript.code(req), list(table), seq_len)

    def resize(self, plain: Plain, table: list[int], seq_len: int) -> None:
        """Give `plain` a new block table and length, as decoding would."""
        if table != plain.table:
            plain.req.block_table = list(table)
        if seq_len != plain.seq_len:
            plain.req.seq_len = seq_len
        plain.table, plain.seq_len = list(table), seq_len

    def write(self, block: int, rows: torch.Tensor) -> None:
        """Block `block`'s rows, here and in the candidate's `physical_kv_cache`."""
        self.pool[block] = rows
        copy = f"{self.pool_name}[{block}]"
        self.transcript.define(f"{copy} = {self.transcript.code(rows)}")
        self.remote_pool[block] = Shown(rows, copy)

    def fill_random(self, blocks: range | list[int], seed: int) -> None:
        """Random rows in each of `blocks`, from a generator seeded with `seed`."""
        generator = torch.Generator().manual_seed(seed)
        for block in blocks:
            self.write(block, torch.randn(self.pool.shape[1:], generator=generator))

    def assert_gathers(self, plain: Plain) -> None:
        """get_physical_cache(req) is the first seq_len rows of its blocks, in table order."""
        blocks = torch.tensor(plain.table, dtype=torch.int64)
        expected = self.pool[blocks].view(-1, self.head_dim)[: plain.seq_len]
        got = self.manager.get_physical_cache(plain.req)
        what = f"manager.get_physical_cache({plain.name})"
        code = (
            self.transcript.source(got, "rows"),
            f"{self.pool_name}[{plain.table}].reshape(-1, {self.head_dim})[: {plain.seq_len}]",
        )
        with judged_by(GATHER_ROWS):
            assert_rows(self.transcript, got, expected, what, plain.table, self.block_size, code)

    def assert_slot_mapping(self, plain: Plain) -> torch.Tensor:
        """slot_mapping(req) follows its block table; returns it."""
        got = self.manager.slot_mapping(plain.req)
        what = f"manager.slot_mapping({plain.name})"
        table = (plain.table, repr(plain.table))
        code = self.transcript.source(got, "slots")
        with judged_by(SLOT_MAPPING):
            assert_slots(self.transcript, got, table, plain.seq_len, self.block_size, what, code)
        return got


@st.composite
def scattered(draw: st.DrawFn) -> tuple[int, int, int, list[int], int, int]:
    """`(block_size, head_dim, num_blocks, table, seq_len, seed)`: one request's table drawn from
    a pool's blocks in any order, the pool holding up to 6 blocks more than it needs."""
    block_size, head_dim = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    seq_len = draw(st.integers(0, 12))
    needed = cdiv(seq_len, block_size)
    num_blocks = needed + draw(st.integers(0, 6))
    table = draw(st.permutations(range(num_blocks)))[:needed]
    return block_size, head_dim, num_blocks, table, seq_len, draw(st.integers(0, 2**32 - 1))


def scattered_request(submission: Submission, case: tuple) -> tuple[PlainPool, Plain]:
    """The pool and request of a `scattered` case, every block of the pool filled."""
    block_size, head_dim, num_blocks, table, seq_len, seed = case
    submission.transcript.reset()
    pool = PlainPool(submission, num_blocks, block_size, head_dim)
    plain = pool.request(table, seq_len)
    pool.fill_random(range(num_blocks), seed)
    return pool, plain


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_gather_stops_at_seq_len(submission):
    """The rows past seq_len in the last block are not returned; each token more adds one."""
    pool = PlainPool(submission, 3, 4, 2)
    plain = pool.request([2, 0], 5)
    pool.fill_random(range(3), seed=0)
    for seq_len in (5, 6, 7, 8):  # the last block fills up
        pool.resize(plain, [2, 0], seq_len)
        pool.assert_gathers(plain)
    pool.resize(plain, [2, 0, 1], 9)
    pool.assert_gathers(plain)


@pytest.mark.points(1)
@pytest.mark.severity("contract")
def check_gather_of_an_empty_request(submission):
    """A request of seq_len 0 gathers a [0, head_dim] tensor and maps to a [0] slot mapping."""
    pool = PlainPool(submission, 2, 4, 3)
    plain = pool.request([], 0)
    pool.assert_gathers(plain)
    pool.assert_slot_mapping(plain)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_gather_follows_a_scattered_block_table(submission):
    """A block table out of order: the gather and the slot mapping follow the table, not the
    order of the block ids."""
    pool = PlainPool(submission, 3, 2, 2)
    plain = pool.request([2, 0, 1], 5)
    pool.fill_random(range(3), seed=1)
    pool.assert_gathers(plain)
    pool.assert_slot_mapping(plain)


@pytest.mark.points(3)
@pytest.mark.severity("safety")
@given(case=scattered())
def check_gather_is_bit_exact(submission, case):
    """get_physical_cache returns float32 [seq_len, head_dim]: token i's row from block
    block_table[i // block_size] at offset i % block_size, bit for bit."""
    pool, plain = scattered_request(submission, case)
    pool.assert_gathers(plain)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
@given(case=scattered())
def check_slot_mapping_follows_the_block_table(submission, case):
    """slot_mapping(req) is int64 [seq_len], token i's slot block_table[i // block_size] *
    block_size + i % block_size, and physical_kv_cache.view(-1, head_dim)[slots] is the gather."""
    pool, plain = scattered_request(submission, case)
    slots = pool.assert_slot_mapping(plain)
    rows = pool.manager.physical_kv_cache.view(-1, pool.head_dim)
    gathered = pool.manager.get_physical_cache(plain.req)
    what = said(
        "manager.get_physical_cache({name}) against physical_kv_cache.view(-1, "
        "head_dim)[manager.slot_mapping({again})]",
        name=plain.name,
        again=plain.name,
    )
    transcript = submission.transcript
    manager, slots_code = transcript.code(pool.manager), transcript.source(slots, "slots")
    code = (
        transcript.source(gathered, "rows"),
        f"{manager}.physical_kv_cache.view(-1, {pool.head_dim})[{slots_code}]",
    )
    with judged_by(GATHER_ROWS):
        assert_rows(transcript, gathered, rows[slots], what, plain.table, pool.block_size, code)


PLAIN_REQUESTS: Bundle[Plain] = Bundle("plain_requests")


class GatherMachine(RuleBasedStateMachine):
    """Requests built, grown, rewritten and dropped from plain data, on blocks the check picks in
    any order and reuses once dropped (their old rows left in place): every live request must
    gather exactly its own rows, and its slot mapping follow its table."""

    max_live = 4

    def __init__(self, submission: Submission) -> None:
        super().__init__()
        self.submission = submission
        submission.transcript.reset()
        self.live: dict[str, Plain] = {}

    @initialize(
        num_blocks=st.integers(0, 24), block_size=st.integers(1, 4), head_dim=st.integers(1, 4)
    )
    def new_pool(self, num_blocks, block_size, head_dim):
        self.pool = PlainPool(self.submission, num_blocks, block_size, head_dim)
        self.free = list(range(num_blocks))
        self.rows_made = 0

    def take(self, count: int, data: st.DataObject) -> list[int]:
        """`count` of the blocks no live request holds, in an order the example draws."""
        if not count:
            return []
        taken = data.draw(st.permutations(self.free), label="free blocks")[:count]
        self.free = [block for block in self.free if block not in taken]
        return taken

    def write_rows(self, plain: Plain, positions: range) -> None:
        """Fresh rows (`k, k + 1/8, ...` for the `k`th row made) at `positions` of `plain`."""
        size, touched = self.pool.block_size, {}
        for position in positions:
            self.rows_made += 1
            block = plain.table[position // size]
            rows = touched.setdefault(block, self.pool.pool[block].clone())
            rows[position % size] = self.rows_made + torch.arange(self.pool.head_dim) / 8
        for block, rows in touched.items():
            self.pool.write(block, rows)

    @precondition(lambda self: len(self.live) < self.max_live)
    @rule(target=PLAIN_REQUESTS, seq_len=st.integers(0, 12), data=st.data())
    def add(self, seq_len, data) -> Plain | MultipleResults[Plain]:
        needed = cdiv(seq_len, self.pool.block_size)
        if needed > len(self.free):
            return multiple()
        plain = self.pool.request(self.take(needed, data), seq_len)
        self.write_rows(plain, range(seq_len))
        self.live[plain.name] = plain
        return plain

    @rule(plain=PLAIN_REQUESTS, tokens=st.integers(1, 5), data=st.data())
    def grow(self, plain, tokens, data):
        """`tokens` more (as many as the free blocks hold), each with a fresh row."""
        size = self.pool.block_size
        room = (len(plain.table) + len(self.free)) * size - plain.seq_len
        seq_len = plain.seq_len + min(tokens, room)
        table = plain.table + self.take(cdiv(seq_len, size) - len(plain.table), data)
        start = plain.seq_len
        self.pool.resize(plain, table, seq_len)
        self.write_rows(plain, range(start, seq_len))

    @rule(plain=PLAIN_REQUESTS, data=st.data())
    def rewrite(self, plain, data):
        """A fresh row for one of its tokens: a gather may not keep an old answer."""
        if plain.seq_len:
            position = data.draw(st.integers(0, plain.seq_len - 1), label="position")
            self.write_rows(plain, range(position, position + 1))

    @rule(plain=consumes(PLAIN_REQUESTS))
    def drop(self, plain):
        """The request is gone; its blocks, rows still in them, may serve another."""
        del self.live[plain.name]
        self.free += plain.table

    @invariant()
    def reads_back_what_was_written(self):
        with self.submission.transcript.quiet():
            for plain in self.live.values():
                self.pool.assert_gathers(plain)
                self.pool.assert_slot_mapping(plain)


@pytest.mark.points(6)
@pytest.mark.severity("safety")
def check_random_writes_read_back(submission):
    run_state_machine_as_test(lambda: GatherMachine(submission))
