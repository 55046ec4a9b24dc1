"""Part 7: automatic prefix caching, as vLLM's v1 KV-cache manager and nano-vllm do it.

A pool of `num_blocks` blocks of `block_size` tokens. A full block is keyed by its tokens and the
key of the block before it in its request (a chain from the root), so two blocks share a key
exactly when their requests agree on every token from the start through the end of the block. A
new request reuses, without copying, the longest run of cached blocks its prompt starts with; a
freed block that is cached stays so, idle, until the pool needs it back, the one idle longest
first.

Every block is in one of three states: held (`_holders[id] > 0`), cached and idle (in `_idle`,
oldest first), or empty (in `_empty`). Invariant: `_idle` and `_empty` are disjoint and hold
exactly the blocks with no holder; a block is in `_idle` exactly when it has no holder and its key
is in `_cache`.

Taking a block is O(1): `_empty` is a stack and `_idle` an ordered dict (`popitem(last=False)`
evicts the oldest). A `Key` hashes in O(block_size), its hash chained from its parent's, and
compares whole prefixes: a collision of the hash never serves wrong tokens.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import index


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM."""


class Key:
    """A full block's cache key: its tokens after its parent's key (None for a first block).

    Two keys are equal exactly when their prefixes are: the same tokens, block by block, back to
    the root. The comparison stops at the first shared parent, so a key built on a cached block's
    own key (a hit) compares in O(block_size)."""

    __slots__ = ("hash", "parent", "tokens")

    def __init__(self, parent: "Key | None", tokens: tuple[int, ...]) -> None:
        self.parent, self.tokens = parent, tokens
        self.hash = hash((None if parent is None else parent.hash, tokens))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Key):
            return NotImplemented
        mine, theirs = self, other
        while mine is not theirs:
            if mine is None or theirs is None or mine.hash != theirs.hash:
                return False
            if mine.tokens != theirs.tokens:
                return False
            mine, theirs = mine.parent, theirs.parent
        return True


@dataclass
class Request:
    """A request: its blocks, its length, the key of its last full block and the tokens of its
    partly filled last block."""

    table: list[int]
    num_tokens: int
    last_key: Key | None = None
    tail: list[int] = field(default_factory=list)


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier ones."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        num_blocks, block_size = index(num_blocks), index(block_size)
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks, self.block_size = num_blocks, block_size
        self._holders = [0] * num_blocks
        self._keys: list[Key | None] = [None] * num_blocks  # a block's key, while it is cached
        self._cache: dict[Key, int] = {}  # key -> block id
        self._idle: OrderedDict[int, None] = OrderedDict()  # cached, no holder: oldest first
        self._empty = list(range(num_blocks - 1, -1, -1))  # a fresh pool hands out 0, 1, ...
        self._requests: dict[int, Request] = {}

    @property
    def num_free(self) -> int:
        """Blocks with no holder: empty, or cached and idle."""
        return len(self._empty) + len(self._idle)

    def ref_count(self, block_id: int) -> int:
        """How many requests hold `block_id`; ValueError out of range."""
        block_id = index(block_id)
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} is out of range 0..{self.num_blocks - 1}")
        return self._holders[block_id]

    def block_table(self, request_id: int) -> list[int]:
        """The blocks of `request_id`, in order (a copy); ValueError for an unknown id."""
        return list(self._request(request_id).table)

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        """Blocks for a new request's prompt, the cached prefix shared; returns the number of
        prompt tokens already cached. All or nothing. O(blocks of the prompt)."""
        request_id = index(request_id)
        if request_id in self._requests:
            raise ValueError(f"request {request_id} already has blocks")
        tokens = [index(token) for token in token_ids]
        if not tokens:
            raise ValueError("a prompt needs at least one token")
        size = self.block_size
        hits, keys, parent = [], [], None
        for start in range(0, len(tokens) - len(tokens) % size, size):
            key = Key(parent, tuple(tokens[start : start + size]))
            block = self._cache.get(key)
            if block is not None and len(hits) == len(keys) and start + size < len(tokens):
                hits.append(block)  # a hit, never the block of the last prompt token
                key = self._keys[block]  # the cached key itself: later keys compare faster
            keys.append(key)
            parent = key
        needed = -(-len(tokens) // size) - len(hits)
        idle_hits = sum(1 for block in hits if self._holders[block] == 0)
        if needed > self.num_free - idle_hits:
            raise OutOfBlocks(
                f"OOM: the prompt needs {needed} new blocks, {self.num_free - idle_hits} free"
            )
        for block in hits:
            self._hold(block)
        table = hits + [self._take() for _ in range(needed)]
        for block, key in zip(table[len(hits) :], keys[len(hits) :], strict=False):
            self._add(block, key)
        last_key = keys[-1] if keys else None
        self._requests[request_id] = Request(
            table, len(tokens), last_key, tokens[len(keys) * size :]
        )
        return len(hits) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        """One decoded token: a new block when it starts one (OutOfBlocks, nothing changed, when
        none can be had); a block it fills is cached."""
        request = self._request(request_id)
        token_id = index(token_id)
        if request.num_tokens % self.block_size == 0:
            if not self.num_free:
                raise OutOfBlocks(f"OOM: request {request_id} needs a block, none free")
            request.table.append(self._take())
        request.tail.append(token_id)
        request.num_tokens += 1
        if request.num_tokens % self.block_size == 0:
            request.last_key = Key(request.last_key, tuple(request.tail))
            request.tail = []
            self._add(request.table[-1], request.last_key)

    def free(self, request_id: int) -> None:
        """Release the request's blocks, last first: a block left with no holder becomes idle
        (the most recently idle) if cached, else empty. O(its blocks)."""
        request = self._request(request_id)
        del self._requests[request_id]
        for block in reversed(request.table):
            self._holders[block] -= 1
            if self._holders[block] == 0:
                if self._keys[block] is None:
                    self._empty.append(block)
                else:
                    self._idle[block] = None

    def _request(self, request_id: int) -> Request:
        request = self._requests.get(index(request_id))
        if request is None:
            raise ValueError(f"unknown request {request_id}")
        return request

    def _hold(self, block: int) -> None:
        if self._holders[block] == 0:
            del self._idle[block]
        self._holders[block] += 1

    def _take(self) -> int:
        """An empty block, else the one idle longest, its key evicted; one holder. O(1)."""
        if self._empty:
            block = self._empty.pop()
        else:
            block, _ = self._idle.popitem(last=False)
            del self._cache[self._keys[block]]
            self._keys[block] = None
        self._holders[block] = 1
        return block

    def _add(self, block: int, key: Key) -> None:
        """Cache the full `block` under `key`, unless another block holds that key."""
        if key not in self._cache:
            self._cache[key] = block
            self._keys[block] = key
