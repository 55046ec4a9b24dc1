"""Automatic prefix caching over a private pool of KV blocks.

Keys. Each distinct token prefix that ends on a block boundary gets a small integer, its prefix
id, from an intern table that maps `(parent prefix id, tuple of the block's tokens)` to it (the
root prefix is 0). Dict lookups compare the tuples for equality, so two blocks share a prefix id
exactly when their requests agree token for token from the start through the end of the block:
a hash collision can never serve wrong tokens.

Pool. `cache` maps a prefix id to the one block that holds it; `block_key[b]` is the reverse
(or -1). Unheld blocks are either empty (a plain stack) or cached-and-idle, kept in an
OrderedDict in the order they went idle, so the eviction victim is its first entry.
"""

import collections
from collections.abc import Sequence

ROOT = 0
NO_KEY = -1


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class SeqState:
    """A live request: its blocks, its length, the tokens of its unfinished last block and the
    prefix id of its last full block."""

    def __init__(self) -> None:
        self.table: list[int] = []
        self.length = 0
        self.tail: list[int] = []
        self.last_key = ROOT


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refs = [0] * num_blocks
        self.block_key = [NO_KEY] * num_blocks
        # Empty blocks as a stack; pop from the end. Reversed so that block 0 goes first.
        self.empty: list[int] = []
        b = num_blocks - 1
        while b >= 0:
            self.empty.append(b)
            b -= 1
        self.idle: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.cache: dict[int, int] = {}
        self.intern: dict[tuple[int, tuple[int, ...]], int] = {}
        self.next_key = ROOT + 1
        self.seqs: dict[int, SeqState] = {}

    # -- queries ------------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        return len(self.empty) + len(self.idle)

    def ref_count(self, block_id: int) -> int:
        self._check_block_id(block_id)
        return self.refs[block_id]

    def block_table(self, request_id: int) -> list[int]:
        return list(self._seq(request_id).table)

    # -- helpers ------------------------------------------------------------------------------

    def _check_block_id(self, block_id: int) -> None:
        if type(block_id) is bool or not isinstance(block_id, int):
            raise ValueError(f"block id {block_id!r} is not an int")
        if block_id < 0 or block_id >= self.num_blocks:
            raise ValueError(f"block id {block_id} is not in range 0..{self.num_blocks - 1}")

    def _seq(self, request_id: int) -> SeqState:
        s = self.seqs.get(request_id)
        if s is None:
            raise ValueError(f"unknown request id {request_id}")
        return s

    def _lookup_key(self, parent: int, chunk: tuple[int, ...]) -> int:
        """The prefix id of `chunk` after `parent`, or NO_KEY when never seen (no side effect)."""
        return self.intern.get((parent, chunk), NO_KEY)

    def _make_key(self, parent: int, chunk: tuple[int, ...]) -> int:
        """The prefix id of `chunk` after `parent`, minting a new one when needed."""
        pair = (parent, chunk)
        k = self.intern.get(pair, NO_KEY)
        if k == NO_KEY:
            k = self.next_key
            self.next_key += 1
            self.intern[pair] = k
        return k

    def _take_block(self) -> int:
        """An empty block if any, else the block idle longest (evicted from the cache)."""
        if len(self.empty) > 0:
            b = self.empty.pop()
        else:
            b, _ = self.idle.popitem(last=False)
            old = self.block_key[b]
            del self.cache[old]
            self.block_key[b] = NO_KEY
        self.refs[b] = 1
        return b

    def _publish(self, block: int, key: int) -> None:
        """Put a full block in the cache unless its key is cached already."""
        if key in self.cache:
            return
        self.cache[key] = block
        self.block_key[block] = key

    def _mark_idle(self, block: int) -> None:
        self.idle[block] = None
        self.idle.move_to_end(block)

    # -- mutations ----------------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        if request_id in self.seqs:
            raise ValueError(f"request id {request_id} is live")
        tokens = tuple(token_ids)
        n = len(tokens)
        if n == 0:
            raise ValueError("the prompt is empty")
        bs = self.block_size
        total = (n + bs - 1) // bs
        full = n // bs

        # 1. Longest cached run from the first block, within the first n-1 tokens.
        hits: list[int] = []
        parent = ROOT
        j = 0
        while (j + 1) * bs <= n - 1:
            k = self._lookup_key(parent, tokens[j * bs : (j + 1) * bs])
            if k == NO_KEY:
                break
            b = self.cache.get(k)
            if b is None:
                break
            hits.append(b)
            parent = k
            j += 1

        # 2. Can the rest be had? Idle hits become held, so they cannot be evicted.
        idle_hits = 0
        j = 0
        while j < len(hits):
            if self.refs[hits[j]] == 0:
                idle_hits += 1
            j += 1
        fresh_needed = total - len(hits)
        available = len(self.empty) + len(self.idle) - idle_hits
        if fresh_needed > available:
            raise OutOfBlocks(f"OOM: need {fresh_needed} blocks, {available} can be had")

        # 3. Commit: hold the hits, then take the others one by one in table order.
        seq = SeqState()
        j = 0
        while j < len(hits):
            b = hits[j]
            if self.refs[b] == 0:
                del self.idle[b]
            self.refs[b] += 1
            seq.table.append(b)
            j += 1
        j = len(hits)
        while j < total:
            seq.table.append(self._take_block())
            j += 1

        # 4. Publish every full block whose key is not cached yet.
        parent = ROOT
        j = 0
        while j < full:
            k = self._make_key(parent, tokens[j * bs : (j + 1) * bs])
            self._publish(seq.table[j], k)
            parent = k
            j += 1

        seq.length = n
        seq.tail = list(tokens[full * bs :])
        seq.last_key = parent
        self.seqs[request_id] = seq
        return len(hits) * bs

    def append_token(self, request_id: int, token_id: int) -> None:
        seq = self._seq(request_id)
        bs = self.block_size
        if seq.length % bs == 0:
            if self.num_free == 0:
                raise OutOfBlocks("OOM: no block can be had for the next token")
            seq.table.append(self._take_block())
        seq.tail.append(token_id)
        seq.length += 1
        if seq.length % bs == 0:
            k = self._make_key(seq.last_key, tuple(seq.tail))
            self._publish(seq.table[len(seq.table) - 1], k)
            seq.last_key = k
            seq.tail = []

    def free(self, request_id: int) -> None:
        seq = self._seq(request_id)
        j = len(seq.table) - 1
        while j >= 0:
            b = seq.table[j]
            self.refs[b] -= 1
            if self.refs[b] == 0:
                if self.block_key[b] != NO_KEY:
                    self._mark_idle(b)
                else:
                    self.empty.append(b)
            j -= 1
        del self.seqs[request_id]
