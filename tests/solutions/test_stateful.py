"""exercises/README.md's invariants and error rules over random call sequences (Hypothesis state
machines).

Each machine keeps a model small enough to be obviously right and lets it decide every
outcome: which calls must raise, what every count must be, and what every request's cache
must hold. No machine looks at which block id was handed out, only at the properties.
"""

import math
from collections import Counter
from collections.abc import Callable

import torch
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from solutions.block_allocator import BlockAllocator
from solutions.kv_cache_manager import KVCacheManager, Request
from tests.solutions.checks import assert_refused

HEAD_DIM = 2
MAX_LIVE = 4  # more live requests would keep the pool full, and most decodes out of blocks


class AllocatorMachine(RuleBasedStateMachine):
    """Part 1 and part 6's reference counts, against a Counter of references per block."""

    @initialize(num_blocks=st.one_of(st.integers(0, 12), st.sampled_from([1_000, 100_000])))
    def make_pool(self, num_blocks: int) -> None:
        self.allocator = BlockAllocator(num_blocks)
        self.refs: Counter[int] = Counter()

    def candidate_ids(self) -> list[int]:
        """Held ids, one free id if any, and two out-of-range ids: good and bad inputs alike."""
        num_blocks = self.allocator.num_blocks
        free_id = next((b for b in range(num_blocks) if b not in self.refs), None)
        extra = [] if free_id is None else [free_id]
        return sorted(self.refs) + extra + [-1, num_blocks]

    def expect(self, call: Callable[[], object], ok: bool, error: type[Exception]) -> object:
        """Run `call`; it must succeed when `ok`, else raise `error` and change nothing."""
        if ok:
            return call()
        before = (self.allocator.num_free, self.observed_refs())
        try:
            call()
        except error:
            assert (self.allocator.num_free, self.observed_refs()) == before
        else:
            raise AssertionError(f"expected {error.__name__}, the call succeeded")

    def observed_refs(self) -> dict[int, int]:
        return {b: self.allocator.ref_count(b) for b in self.candidate_ids()[:-2]}

    @rule(n=st.integers(-2, 14))
    def allocate(self, n: int) -> None:
        free = self.allocator.num_blocks - len(self.refs)
        error = ValueError if n < 0 else RuntimeError
        block_ids = self.expect(lambda: self.allocator.allocate(n), 0 <= n <= free, error)
        if block_ids is not None:
            assert len(block_ids) == n == len(set(block_ids))
            assert all(0 <= b < self.allocator.num_blocks and b not in self.refs for b in block_ids)
            self.refs.update(block_ids)

    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        block_ids = data.draw(st.lists(st.sampled_from(self.candidate_ids()), max_size=6))
        drops = Counter(block_ids)
        ok = all(count <= self.refs[b] for b, count in drops.items())
        self.expect(lambda: self.allocator.free(block_ids), ok, ValueError)
        if ok:
            self.refs -= drops

    @rule(data=st.data())
    def incref(self, data: st.DataObject) -> None:
        block_id = data.draw(st.sampled_from(self.candidate_ids()))
        ok = block_id in self.refs
        self.expect(lambda: self.allocator.incref(block_id), ok, ValueError)
        if ok:
            self.refs[block_id] += 1

    @invariant()
    def counts_match_the_model(self) -> None:
        assert self.allocator.num_free == self.allocator.num_blocks - len(self.refs)
        assert self.observed_refs() == {b: self.refs[b] for b in self.candidate_ids()[:-2]}


class ManagerMachine(RuleBasedStateMachine):
    """Parts 2, 3 and 6: prefill, decode, free and fork on a small pool that runs out often.

    After each prefilled or decoded token the machine writes a fresh value into its slot, as a
    model's forward pass would, and remembers it: every live request's gather must then return
    exactly what was written for it, whatever its siblings did (copy-on-write included).
    """

    @initialize(
        num_blocks=st.integers(0, 24), block_size=st.integers(1, 4), prompt_len=st.integers(0, 9)
    )
    def make_manager(self, num_blocks: int, block_size: int, prompt_len: int) -> None:
        self.manager = KVCacheManager(num_blocks, block_size, HEAD_DIM)
        self.live: dict[int, Request] = {}
        self.contents: dict[int, torch.Tensor] = {}
        self.next_id = 0
        self.next_value = 1.0
        self.prefill(prompt_len)

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def write(self, req: Request, position: int) -> torch.Tensor:
        """Write a fresh row into the token's slot; return it."""
        slot = self.manager.slot_mapping(req)[position]
        row = torch.full((1, self.manager.head_dim), self.next_value)
        self.manager.physical_kv_cache.view(-1, self.manager.head_dim)[slot] = row
        self.next_value += 1.0
        return row

    def holders(self, block_id: int) -> int:
        return sum(r.block_table.count(block_id) for r in self.live.values())

    def assert_out_of_blocks(self, call: Callable[[], object], req: Request) -> None:
        assert_refused(RuntimeError, call, self.manager, req, *self.live.values())

    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(prompt_len=st.integers(0, 8))
    def prefill(self, prompt_len: int) -> None:
        req = Request(self.new_id(), prompt_len)
        needed = math.ceil(prompt_len / self.manager.block_size)
        if needed > len(self.manager.free_blocks):
            self.assert_out_of_blocks(lambda: self.manager.allocate_for_prefill(req), req)
            return
        self.manager.allocate_for_prefill(req)
        assert len(req.block_table) == needed
        rows = [self.write(req, position) for position in range(prompt_len)]
        self.live[req.request_id] = req
        self.contents[req.request_id] = torch.cat(rows or [torch.empty(0, HEAD_DIM)])

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def decode(self, data: st.DataObject) -> None:
        req = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        opens_block = req.seq_len % self.manager.block_size == 0
        shared_tail = not opens_block and self.holders(req.block_table[-1]) > 1
        kind = "copy-on-write" if shared_tail else "new block" if opens_block else "append"
        event("decode", kind)
        if (opens_block or shared_tail) and not self.manager.free_blocks:
            self.assert_out_of_blocks(lambda: self.manager.allocate_for_decode(req), req)
            return
        self.manager.allocate_for_decode(req)
        row = self.write(req, req.seq_len - 1)
        new_block = int(self.manager.slot_mapping(req)[-1]) // self.manager.block_size
        assert self.holders(new_block) == 1, "the new token's block is shared with another request"
        self.contents[req.request_id] = torch.cat([self.contents[req.request_id], row])

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        req = self.live.pop(data.draw(st.sampled_from(sorted(self.live))))
        del self.contents[req.request_id]
        self.manager.free(req)
        assert req.block_table == []

    @precondition(lambda self: 0 < len(self.live) < MAX_LIVE)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        parent = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        free_before = len(self.manager.free_blocks)
        child = self.manager.fork(parent, self.new_id())
        assert (child.seq_len, child.block_table) == (parent.seq_len, parent.block_table)
        assert len(self.manager.free_blocks) == free_before
        self.live[child.request_id] = child
        self.contents[child.request_id] = self.contents[parent.request_id]

    @invariant()
    def tables_fit_their_lengths(self) -> None:
        for req in self.live.values():
            assert len(req.block_table) == math.ceil(req.seq_len / self.manager.block_size)

    @invariant()
    def no_block_leaked_or_double_handed(self) -> None:
        held = {b for r in self.live.values() for b in r.block_table}
        free = set(self.manager.free_blocks)
        assert len(free) == len(self.manager.free_blocks)
        assert free.isdisjoint(held)
        assert len(free) + len(held) == self.manager.num_blocks

    @invariant()
    def every_request_reads_what_was_written_for_it(self) -> None:
        pool = self.manager.physical_kv_cache.view(-1, self.manager.head_dim)
        for request_id, req in self.live.items():
            cache = self.manager.get_physical_cache(req)
            assert torch.equal(cache, self.contents[request_id])
            assert torch.equal(pool[self.manager.slot_mapping(req)], cache)


TestAllocator = AllocatorMachine.TestCase
TestManager = ManagerMachine.TestCase
