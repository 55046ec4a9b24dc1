"""The model behind part 7's checks: what a `PrefixCache` must hold after every call.

`CacheModel` knows what exercises/README.md lets a checker know: each block's holders, which
token sequence each cached block holds (its key: the request's tokens from the start through
the end of the block), which idle blocks are cached and in what order they became idle, and
each live request's tokens and block table. A block taken from the empty ones may be any of
them (the model adopts the candidate's choice); every other answer is determined by the
contract: the cached-token count, the shared blocks of a hit, the block an eviction takes, the
block tables, `num_free` and every `ref_count`. Each operation runs on the candidate and is
checked at once, and `check_state` compares everything observable after it, so that a call that
changes another request, or raises and still changes something, is caught too.

A block's tokens are never compared with a hash: a wrong hit (an unchained hash, a partly
filled block cached) shows as a cached count or a shared block the model does not have.
"""

from collections import Counter
from dataclasses import dataclass, field

from grader.checks.support.expect import (
    expect,
    int_list,
    judged_by,
    plain_int,
    raises,
    same,
    succeeds,
)
from grader.checks.support.rules import (
    CACHE_FREE_COUNT,
    CACHE_REF_COUNTS,
    CACHE_TABLE,
    EMPTY_FIRST,
    EVICTION_ORDER,
    TAKES_FREE,
)
from grader.said import Said, said
from grader.sandbox.proxy import Submission, method
from kernels.reference import cdiv

RAISED = said("a call that raises must leave everything as it was")


@dataclass
class Live:
    """A live request as the model knows it."""

    tokens: list[int]
    table: list[int]


@dataclass
class CacheModel:
    """A candidate's PrefixCache and the state it must agree with."""

    submission: Submission
    num_blocks: int
    block_size: int
    holders: Counter[int] = field(default_factory=Counter)
    contents: dict[int, tuple[int, ...]] = field(default_factory=dict)  # cached block -> key
    cached: dict[tuple[int, ...], int] = field(default_factory=dict)  # key -> block
    idle: dict[int, None] = field(default_factory=dict)  # cached, no holder: oldest first
    live: dict[int, Live] = field(default_factory=dict)
    requests_made: int = 0
    last_call: str = "PrefixCache(...)"

    def __post_init__(self) -> None:
        self.transcript = self.submission.transcript
        module = self.submission.module("prefix_cache")
        self.cache = module.PrefixCache(self.num_blocks, self.block_size)
        self.name = self.transcript.code(self.cache)

    # -- the model's view ----------------------------------------------------------------------

    @property
    def empty(self) -> set[int]:
        return set(range(self.num_blocks)) - set(self.holders) - set(self.idle)

    @property
    def num_free(self) -> int:
        return self.num_blocks - len(self.holders)

    def hits(self, tokens: list[int]) -> list[int]:
        """The cached blocks a prompt of `tokens` starts with, within all but its last token."""
        found = []
        for end in range(self.block_size, len(tokens), self.block_size):
            block = self.cached.get(tuple(tokens[:end]))
            if block is None:
                break
            found.append(block)
        return found

    def taken(self, count: int, kept: list[int]) -> list[int | None]:
        """The blocks `count` takes must be, in order: None for any empty block, then the idle
        ones oldest first, `kept` (reused by the same call) aside."""
        evictable = [block for block in self.idle if block not in kept]
        empty = len(self.empty)
        return [None if k < empty else evictable[k - empty] for k in range(count)]

    # -- operations, each checked at once ------------------------------------------------------

    def prompt(self, tokens: list[int], request_id: int | None = None) -> int | None:
        """A new request of prompt `tokens` (as `request_id`, a freed one's, or a new id); its
        id, or None where the pool is short and the candidate must refuse (then nothing may
        change)."""
        if request_id is None:
            self.requests_made += 1
            request_id = self.requests_made
        call = f"{self.name}.allocate_prompt({request_id}, {tokens})"
        hits = self.hits(tokens)
        needed = cdiv(len(tokens), self.block_size) - len(hits)
        idle_hits = sum(1 for block in hits if block in self.idle)
        takeable = self.num_free - idle_hits
        if needed > takeable:
            why = said(
                "{call}, which needs {needed} new blocks with {takeable} to take,",
                call=call,
                needed=needed,
                takeable=takeable,
            )
            with raises(self.transcript, RuntimeError, why):
                self.cache.allocate_prompt(request_id, tokens)
            self.last_call = said("{call} (which raised)", call=call)
            return None
        with succeeds(
            call, said("it needs {needed} blocks beyond its cached prefix", needed=needed)
        ):
            got = self.cache.allocate_prompt(request_id, tokens)
        self.last_call = call
        cached_tokens = len(hits) * self.block_size
        same(
            self.transcript,
            plain_int(self.transcript, got, call),
            cached_tokens,
            said(
                "{call} must return {cached}: its first {hits} block(s) are cached (the "
                "longest cached run of full blocks, never the last prompt token), got "
                "{got}",
                call=call,
                cached=cached_tokens,
                hits=len(hits),
                got=got,
            ),
        )
        table = self.read_table(request_id)
        expected_len = len(hits) + needed
        with judged_by(CACHE_TABLE):
            same(
                self.transcript,
                len(table),
                expected_len,
                said(
                    "{call} must give the request ceil({tokens} / {size}) = {blocks} blocks, "
                    "got {table}",
                    call=call,
                    tokens=len(tokens),
                    size=self.block_size,
                    blocks=expected_len,
                    table=table,
                ),
                got=f"len({self.transcript.source(table, 'table')})",
            )
        name = self.transcript.source(table, "table")
        expect(
            self.transcript,
            table[: len(hits)] == hits,
            said(
                "{call}: its cached prefix must be shared, blocks {hits}, got {got}",
                call=call,
                hits=hits,
                got=table[: len(hits)],
            ),
            got=f"{name}[:{len(hits)}]",
            expected=repr(hits),
        )
        self.judge_taken(table[len(hits) :], hits, call, f"{name}[{len(hits)}:]")
        for block in hits:
            self.idle.pop(block, None)
            self.holders[block] += 1
        for block in table[len(hits) :]:
            self.hold_new(block)
        self.live[request_id] = Live(list(tokens), table)
        for end in range(self.block_size, len(tokens) + 1, self.block_size):
            self.add(table[end // self.block_size - 1], tuple(tokens[:end]))
        return request_id

    def append(self, request_id: int, token: int) -> bool:
        """One decoded token; False where it starts a block and none can be taken (the
        candidate must refuse)."""
        live = self.live[request_id]
        call = f"{self.name}.append_token({request_id}, {token})"
        opens = len(live.tokens) % self.block_size == 0
        if opens and self.num_free == 0:
            why = said("{call}, whose token starts a new block with no block free,", call=call)
            with raises(self.transcript, RuntimeError, why):
                self.cache.append_token(request_id, token)
            self.last_call = said("{call} (which raised)", call=call)
            return False
        with succeeds(call, said("it needs a free block") if opens else said("it needs no block")):
            self.cache.append_token(request_id, token)
        self.last_call = call
        table = self.read_table(request_id)
        name = self.transcript.source(table, "table")
        grown = len(live.table) + opens
        message = (
            said(
                "{call} must append one block to block table {table}, got {got}",
                call=call,
                table=live.table,
                got=table,
            )
            if opens
            else said(
                "{call} must leave block table {table} as it is, got {got}",
                call=call,
                table=live.table,
                got=table,
            )
        )
        expect(
            self.transcript,
            len(table) == grown and table[: len(live.table)] == live.table,
            message,
            got=f"{name}[:{len(live.table)}], len({name})",
            expected=f"{live.table!r}, {grown}",
        )
        if opens:
            self.judge_taken(table[-1:], [], call, f"{name}[-1:]")
            self.hold_new(table[-1])
        live.tokens.append(token)
        live.table = table
        if len(live.tokens) % self.block_size == 0:
            self.add(table[-1], tuple(live.tokens))
        return True

    def free(self, request_id: int) -> None:
        live = self.live.pop(request_id)
        call = f"{self.name}.free({request_id})"
        with succeeds(call, said("the request is live")):
            self.cache.free(request_id)
        self.last_call = call
        for block in reversed(live.table):
            self.holders[block] -= 1
            if self.holders[block] == 0:
                del self.holders[block]
                if block in self.contents:
                    self.idle[block] = None

    # -- what the candidate must show ------------------------------------------------------------

    def read_table(self, request_id: int) -> list[int]:
        return int_list(
            self.transcript, self.cache.block_table(request_id), f"block_table({request_id})"
        )

    def judge_taken(self, blocks: list[int], kept: list[int], call: str, code: str) -> None:
        """`blocks`, just taken by `call` in this order, are the ones `taken` says: distinct
        empty blocks, then the idle ones that have been idle longest. A cached idle block taken
        in another's place breaks a rule of order (`EMPTY_FIRST`, `EVICTION_ORDER`), which
        corrupts nothing; a held block, or one taken twice, corrupts the cache (`TAKES_FREE`)."""
        empty = self.empty
        for k, (block, must) in enumerate(zip(blocks, self.taken(len(blocks), kept), strict=True)):
            evictable = block in self.idle and block not in kept and block not in blocks[:k]
            took = f"{code}[{k}]"
            if must is None:
                with judged_by(EMPTY_FIRST if evictable else TAKES_FREE):
                    expect(
                        self.transcript,
                        not evictable and block in empty and block not in blocks[:k],
                        self.not_empty(call, block, sorted(empty), evictable),
                        got=f"{took} in {sorted(empty)!r} and {took} not in {code}[:{k}]",
                        expected="True",
                    )
            else:
                with judged_by(EVICTION_ORDER if evictable else TAKES_FREE):
                    expect(
                        self.transcript,
                        block == must,
                        said(
                            "{call} took block {block}; with no empty block left, it must "
                            "evict the cached block idle longest, block {must} (idle, oldest "
                            "first: {idle})",
                            call=call,
                            block=block,
                            must=must,
                            idle=[b for b in self.idle if b not in kept],
                        ),
                        got=took,
                        expected=repr(must),
                    )

    @staticmethod
    def not_empty(call: str, block: int, empty: list[int], cached: bool) -> Said:
        """What a take of `block`, not an empty one, says where `empty` were there: a `cached`
        idle block evicted too soon, or a block held, taken twice or out of range."""
        if cached:
            return said(
                "{call} took block {block}, a cached one, while empty blocks {empty} were there: "
                "a block is evicted only where none is empty",
                call=call,
                block=block,
                empty=empty,
            )
        return said(
            "{call} took block {block}, which is not empty (held, cached, taken twice or out of "
            "range), while empty blocks {empty} were there",
            call=call,
            block=block,
            empty=empty,
        )

    def hold_new(self, block: int) -> None:
        """`block`, taken: out of the idle ones and the cache if it was there; one holder."""
        if block in self.idle:
            del self.idle[block]
            del self.cached[self.contents.pop(block)]
        self.holders[block] = 1

    def add(self, block: int, key: tuple[int, ...]) -> None:
        """The full `block` holds `key`: cached, unless another block holds that key."""
        if key not in self.cached:
            self.cached[key] = block
            self.contents[block] = key

    def check_state(self) -> None:
        """Every live table, every block's `ref_count` and `num_free` are the model's."""
        if self.live or self.num_blocks:
            self.check_tables_and_counts()
        free = plain_int(self.transcript, self.cache.num_free, "num_free")
        with judged_by(CACHE_FREE_COUNT):
            same(
                self.transcript,
                free,
                self.num_free,
                said(
                    "after {call}, num_free is {free}, expected {expected}: the empty blocks "
                    "plus the cached-and-idle ones",
                    call=self.last_call,
                    free=free,
                    expected=self.num_free,
                ),
                got=f"{self.name}.num_free",
            )

    def check_tables_and_counts(self) -> None:
        """Every live table and every block's `ref_count`, read in one round trip."""
        transcript, cache, call = self.transcript, self.cache, self.last_call
        with transcript.quiet():
            reads = self.submission.batch([
                *(method(cache, "block_table", request_id) for request_id in self.live),
                *(method(cache, "ref_count", block) for block in range(self.num_blocks)),
            ])  # fmt: skip
            for request_id, live in self.live.items():
                table = int_list(transcript, next(reads), f"block_table({request_id})")
                same(
                    transcript,
                    table,
                    live.table,
                    said(
                        "after {call}, block_table({id}) is {table}, expected {expected} "
                        "(a call may change only its own request)",
                        call=call,
                        id=request_id,
                        table=table,
                        expected=live.table,
                    ),
                    got=f"{self.name}.block_table({request_id})",
                    expected=repr(live.table),
                )
            counts = [
                plain_int(transcript, next(reads), "ref_count") for _ in range(self.num_blocks)
            ]
            expected = [self.holders[block] for block in range(self.num_blocks)]
            with judged_by(CACHE_REF_COUNTS):
                same(
                    transcript,
                    counts,
                    expected,
                    said(
                        "after {call}, the blocks' ref_count are {counts}, expected "
                        "{expected} (how many live requests hold each)",
                        call=call,
                        counts=counts,
                        expected=expected,
                    ),
                    got=f"[{self.name}.ref_count(b) for b in range({self.num_blocks})]",
                    expected=repr(expected),
                )
