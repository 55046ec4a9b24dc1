"""Automatic prefix caching with a lazily cleaned min-heap for least-recently-idle eviction.

Block states: held (ref count > 0), cached-and-idle (ref count 0 with a key) and empty (ref
count 0, no key). Empty ids wait on a plain stack. Each time a cached block goes idle it gets a
fresh tick and `(tick, block)` is pushed on a heap; the block's current tick is kept in a dict,
so an entry whose tick no longer matches (the block was reused or evicted since) is stale and
skipped when it surfaces. The heap is rebuilt from the dict whenever stale entries outnumber the
live ones, which keeps every operation amortised O(log idle) and the heap's size bounded.

Keys are chain nodes: a block's tokens plus a link to the key of the block before it. Their hash
is computed once from the parent's hash; equality walks the two chains (stopping as soon as the
links are the same object), so a hash collision can never serve another prefix's tokens.
"""

import heapq
from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class _ChainKey:
    """The exact identity of a prefix that ends on a block boundary."""

    __slots__ = ("digest", "parent", "tokens")

    def __init__(self, parent: "_ChainKey | None", tokens: tuple[int, ...]) -> None:
        self.parent = parent
        self.tokens = tokens
        self.digest = hash((0 if parent is None else parent.digest, tokens))

    def __hash__(self) -> int:
        return self.digest

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _ChainKey):
            return NotImplemented
        return _same_chain(self, other)


def _same_chain(a: "_ChainKey | None", b: "_ChainKey | None") -> bool:
    while a is not b:
        if a is None or b is None or a.digest != b.digest or a.tokens != b.tokens:
            return False
        a, b = a.parent, b.parent
    return True


class _Live:
    """A live request: its blocks, every token it holds, and the keys of its full blocks."""

    __slots__ = ("blocks", "keys", "tokens")

    def __init__(self) -> None:
        self.blocks: list[int] = []
        self.tokens: list[int] = []
        self.keys: list[_ChainKey] = []


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._refs = [0] * num_blocks
        self._empty = list(range(num_blocks - 1, -1, -1))
        self._cache: dict[_ChainKey, int] = {}
        self._key_of: dict[int, _ChainKey] = {}
        self._idle_tick: dict[int, int] = {}
        self._idle_heap: list[tuple[int, int]] = []
        self._clock = 0
        self._live: dict[int, _Live] = {}

    # -- small state helpers ----------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """Blocks with no holder: empty ones plus cached-and-idle ones."""
        return len(self._empty) + len(self._idle_tick)

    def ref_count(self, block_id: int) -> int:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block {block_id} is not in a pool of {self.num_blocks}")
        return self._refs[block_id]

    def block_table(self, request_id: int) -> list[int]:
        return list(self._request(request_id).blocks)

    def _request(self, request_id: int) -> _Live:
        live = self._live.get(request_id)
        if live is None:
            raise ValueError(f"request {request_id} is not live")
        return live

    def _mark_idle(self, block_id: int) -> None:
        self._clock += 1
        self._idle_tick[block_id] = self._clock
        heapq.heappush(self._idle_heap, (self._clock, block_id))
        if len(self._idle_heap) > 2 * len(self._idle_tick) + 32:
            self._idle_heap = [(tick, blk) for blk, tick in self._idle_tick.items()]
            heapq.heapify(self._idle_heap)

    def _hold(self, block_id: int) -> None:
        """One more holder; an idle block leaves the idle set (its heap entry turns stale)."""
        if self._refs[block_id] == 0:
            del self._idle_tick[block_id]
        self._refs[block_id] += 1

    def _take(self) -> int:
        """A block for new contents: an empty one, else the one idle longest, evicted."""
        if self._empty:
            block_id = self._empty.pop()
        else:
            while True:
                tick, block_id = heapq.heappop(self._idle_heap)
                if self._idle_tick.get(block_id) == tick:
                    break
            del self._idle_tick[block_id]
            del self._cache[self._key_of.pop(block_id)]
        self._refs[block_id] = 1
        return block_id

    def _publish(self, live: _Live, index: int, key: _ChainKey) -> None:
        """Record the key of the request's full block `index`, caching it if it is new."""
        block_id = live.blocks[index]
        owner = self._cache.get(key)
        if owner is None:
            self._cache[key] = block_id
            self._key_of[block_id] = key
        elif owner != block_id:
            key = self._key_of[owner]
        live.keys.append(key)

    def _walk_prompt(self, tokens: list[int]) -> tuple[list[_ChainKey], list[int]]:
        """The keys of the prompt's full blocks and the cached blocks its prefix can reuse.

        A key already in the cache is swapped for the cached object, so the next key's parent
        link is that same object and comparing it against the cache stops after one level.
        """
        size = self.block_size
        reusable = (len(tokens) - 1) // size
        keys: list[_ChainKey] = []
        hits: list[int] = []
        parent = None
        for index in range(len(tokens) // size):
            key = _ChainKey(parent, tuple(tokens[index * size : (index + 1) * size]))
            owner = self._cache.get(key)
            if owner is not None:
                key = self._key_of[owner]
            if owner is not None and index < reusable and len(hits) == index:
                hits.append(owner)
            keys.append(key)
            parent = key
        return keys, hits

    # -- the contract -----------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        """Blocks for a new request's prompt; returns how many of its tokens were cached."""
        if request_id in self._live:
            raise ValueError(f"request {request_id} is already live")
        tokens = list(token_ids)
        if not tokens:
            raise ValueError("a prompt needs at least one token")
        size = self.block_size
        keys, hits = self._walk_prompt(tokens)
        fresh = _ceil_div(len(tokens), size) - len(hits)
        revived = sum(1 for block_id in hits if self._refs[block_id] == 0)
        if fresh > self.num_free - revived:
            raise OutOfBlocks(f"OOM: need {fresh} blocks, {self.num_free - revived} can be had")

        live = _Live()
        for block_id in hits:
            self._hold(block_id)
        live.blocks.extend(hits)
        live.blocks.extend(self._take() for _ in range(fresh))
        live.tokens = tokens
        for index, key in enumerate(keys):
            self._publish(live, index, key)
        self._live[request_id] = live
        return len(hits) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        """Count one decoded token, taking a block when it starts one and caching a filled one."""
        live = self._request(request_id)
        size = self.block_size
        position = len(live.tokens)
        if position % size == 0:
            if self.num_free == 0:
                raise OutOfBlocks(f"OOM: request {request_id} needs a block, none can be had")
            live.blocks.append(self._take())
        live.tokens.append(token_id)
        if (position + 1) % size == 0:
            parent = live.keys[-1] if live.keys else None
            key = _ChainKey(parent, tuple(live.tokens[position + 1 - size :]))
            self._publish(live, len(live.keys), key)

    def free(self, request_id: int) -> None:
        """Release the request's blocks, last first; cached ones go idle, the rest empty."""
        live = self._request(request_id)
        for block_id in reversed(live.blocks):
            self._refs[block_id] -= 1
            if self._refs[block_id] == 0:
                if block_id in self._key_of:
                    self._mark_idle(block_id)
                else:
                    self._empty.append(block_id)
        del self._live[request_id]
