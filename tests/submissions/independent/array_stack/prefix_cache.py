"""Automatic prefix caching over a private pool of block ids.

State, per block b:
- held:            _holders[b] > 0;
- cached and idle: _holders[b] == 0 and b in _idle (then _key_of[b] is not None);
- empty:           _holders[b] == 0 and b in _empty (then _key_of[b] is None).
`_idle` is a plain dict used for its insertion order: the first key is the block idle
longest. A block that becomes idle is (re)inserted at the end; one that is reused or evicted
is popped out. `_cache` maps each cache key to the one block registered under it, and
`_key_of` is its inverse.

A cache key is the tuple `(parent_digest, block_tokens)`: dict equality compares the tokens
themselves, so a hash collision can never serve the wrong tokens. `parent_digest` is the
`hash` of the previous block's key (a fixed root for the first block).
"""

from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


_ROOT = 0x9E3779B97F4A7C15  # parent digest of every first block


class _Seq:
    """A live request: its blocks, its tokens, and the digest of its last full block."""

    def __init__(self, blocks: list[int], tokens: list[int], digest: int) -> None:
        self.blocks = blocks
        self.tokens = tokens
        self.digest = digest


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._holders = [0] * num_blocks
        self._key_of: list[tuple | None] = [None] * num_blocks
        self._cache: dict[tuple, int] = {}
        self._idle: dict[int, None] = {}
        self._empty = list(range(num_blocks - 1, -1, -1))
        self._seqs: dict[int, _Seq] = {}

    @property
    def num_free(self) -> int:
        # Every unheld block is in exactly one of the two pools.
        return len(self._empty) + len(self._idle)

    def ref_count(self, block_id: int) -> int:
        if not isinstance(block_id, int) or not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id!r} out of range [0, {self.num_blocks})")
        return self._holders[block_id]

    def block_table(self, request_id: int) -> list[int]:
        return list(self._lookup(request_id).blocks)

    def _lookup(self, request_id: int) -> _Seq:
        seq = self._seqs.get(request_id)
        if seq is None:
            raise ValueError(f"unknown request id {request_id!r}")
        return seq

    # Pool moves ---------------------------------------------------------------------------

    def _take(self) -> int:
        """One unheld block, now with one holder. The caller checked that one exists."""
        if self._empty:
            b = self._empty.pop()
        else:
            b = next(iter(self._idle))  # idle longest
            del self._idle[b]
            del self._cache[self._key_of[b]]
            self._key_of[b] = None
        self._holders[b] = 1
        return b

    def _register(self, block: int, key: tuple) -> None:
        """Cache `block` under `key` unless an older block already has that key."""
        if key not in self._cache:
            self._cache[key] = block
            self._key_of[block] = key

    # Requests -----------------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        if request_id in self._seqs:
            raise ValueError(f"request id {request_id!r} is live")
        tokens = list(token_ids)
        if not tokens:
            raise ValueError("the prompt is empty")
        bs = self.block_size
        n_blocks = -(-len(tokens) // bs)
        n_full = len(tokens) // bs
        # A hit must end at or before token len-1: the last prompt token is always computed.
        hit_limit = (len(tokens) - 1) // bs

        # Phase 1 (read only): find the hits, then check the rest can be taken.
        hits: list[int] = []
        digest = _ROOT
        keys: list[tuple] = []
        for j in range(n_full):
            key = (digest, tuple(tokens[j * bs : (j + 1) * bs]))
            keys.append(key)
            digest = hash(key)
            if len(hits) == j and j < hit_limit:
                b = self._cache.get(key)
                if b is not None:
                    hits.append(b)
        idle_hits = sum(1 for b in hits if self._holders[b] == 0)
        need = n_blocks - len(hits)
        available = len(self._empty) + len(self._idle) - idle_hits
        if need > available:
            raise OutOfBlocks(f"OOM: need {need} blocks, {available} can be had")

        # Phase 2: claim the hits first, so the takes below can never evict them.
        for b in hits:
            if self._holders[b] == 0:
                del self._idle[b]
            self._holders[b] += 1
        blocks = hits + [self._take() for _ in range(need)]

        # Phase 3: offer every full block to the cache (hits are already there).
        for j in range(len(hits), n_full):
            self._register(blocks[j], keys[j])

        self._seqs[request_id] = _Seq(blocks, tokens, digest)
        return len(hits) * bs

    def append_token(self, request_id: int, token_id: int) -> None:
        seq = self._lookup(request_id)
        bs = self.block_size
        position = len(seq.tokens)
        if position % bs == 0:
            if not self._empty and not self._idle:
                raise OutOfBlocks("OOM: no block for the next token")
            seq.blocks.append(self._take())
        seq.tokens.append(token_id)
        if (position + 1) % bs == 0:
            key = (seq.digest, tuple(seq.tokens[position + 1 - bs :]))
            seq.digest = hash(key)
            self._register(seq.blocks[-1], key)

    def free(self, request_id: int) -> None:
        seq = self._lookup(request_id)
        # Last block first: a request's tail becomes evictable before its head.
        for b in reversed(seq.blocks):
            left = self._holders[b] - 1
            self._holders[b] = left
            if left == 0:
                if self._key_of[b] is None:
                    self._empty.append(b)
                else:
                    self._idle[b] = None  # newest idle goes last
        del self._seqs[request_id]
