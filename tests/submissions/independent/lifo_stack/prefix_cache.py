"""Automatic prefix caching over a private pool of KV blocks.

Blocks are empty (on a LIFO stack), cached-and-idle (in an `OrderedDict` whose order is the
order they went idle, so the front is the eviction victim), or held (reference count > 0).
Cache keys are chained objects that compare their whole prefix exactly, so a hash collision
can never hand out another prompt's tokens.
"""

from collections import OrderedDict
from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class _ChainKey:
    """Identity of a full block: its tokens plus the key of the block before it."""

    __slots__ = ("_digest", "parent", "tokens")

    def __init__(self, parent: "_ChainKey | None", tokens: tuple[int, ...]) -> None:
        """Chain `tokens` onto `parent` (None for the first block of a sequence)."""
        self.parent = parent
        self.tokens = tokens
        parent_digest = 0 if parent is None else parent._digest
        self._digest: int = hash((parent_digest, tokens))

    def __hash__(self) -> int:
        """The chained digest, computed once."""
        return self._digest

    def __eq__(self, other: object) -> bool:
        """Exact comparison of the two full prefixes, walking up until they share a node."""
        if not isinstance(other, _ChainKey):
            return NotImplemented
        left: _ChainKey | None = self
        right: _ChainKey | None = other
        while left is not right:
            if left is None or right is None:
                return False
            if left._digest != right._digest or left.tokens != right.tokens:
                return False
            left, right = left.parent, right.parent
        return True


class _Sequence:
    """Per-request state: its block table, length, unfinished tail and last full key."""

    __slots__ = ("last_key", "length", "table", "tail")

    def __init__(self) -> None:
        """An empty sequence with no blocks."""
        self.table: list[int] = []
        self.length: int = 0
        self.tail: list[int] = []
        self.last_key: _ChainKey | None = None


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        """A pool of `num_blocks` empty blocks of `block_size` tokens; ValueError on bad sizes."""
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._empty: list[int] = list(range(num_blocks - 1, -1, -1))
        self._idle: OrderedDict[int, None] = OrderedDict()
        self._holders: list[int] = [0] * num_blocks
        self._key_of: list[_ChainKey | None] = [None] * num_blocks
        self._cache: dict[_ChainKey, int] = {}
        self._requests: dict[int, _Sequence] = {}

    @property
    def num_free(self) -> int:
        """Blocks with no holder: empty ones plus cached-and-idle ones."""
        return len(self._empty) + len(self._idle)

    def ref_count(self, block_id: int) -> int:
        """How many requests hold `block_id` now; ValueError when it is out of range."""
        if isinstance(block_id, bool) or not isinstance(block_id, int):
            raise ValueError(f"block id must be an int, got {block_id!r}")
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} outside 0..{self.num_blocks - 1}")
        return self._holders[block_id]

    def block_table(self, request_id: int) -> list[int]:
        """The block ids of a live request, in order; ValueError for an unknown id."""
        return list(self._lookup(request_id).table)

    # Private helpers ---------------------------------------------------------------------

    def _lookup(self, request_id: int) -> _Sequence:
        """The live sequence `request_id`, or ValueError."""
        seq = self._requests.get(request_id)
        if seq is None:
            raise ValueError(f"unknown request id {request_id}")
        return seq

    def _take_block(self) -> int:
        """An empty block if any, else evict the block idle longest. Caller checked supply."""
        if self._empty:
            block = self._empty.pop()
        else:
            block, _ = self._idle.popitem(last=False)
            key = self._key_of[block]
            if key is not None:
                del self._cache[key]
                self._key_of[block] = None
        self._holders[block] = 1
        return block

    def _hold(self, block: int) -> None:
        """Add a holder to a cached block, pulling it out of the idle list if needed."""
        if self._holders[block] == 0:
            del self._idle[block]
        self._holders[block] += 1

    def _register(self, block: int, key: _ChainKey) -> _ChainKey:
        """Cache `block` under `key` unless the key is cached already; return the live key."""
        existing = self._cache.get(key)
        if existing is not None:
            return self._key_of[existing] or key
        self._cache[key] = block
        self._key_of[block] = key
        return key

    # Public API --------------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        """Give a new request blocks for its prompt, sharing its cached prefix; return how many
        prompt tokens were already cached. All or nothing."""
        if request_id in self._requests:
            raise ValueError(f"request id {request_id} is already live")
        tokens = list(token_ids)
        if not tokens:
            raise ValueError("the prompt must hold at least one token")
        size = self.block_size
        total = len(tokens)
        n_blocks = (total + size - 1) // size
        n_full = total // size

        # 1. Longest cached run from the first block, within the first total - 1 tokens.
        hits: list[int] = []
        chain: _ChainKey | None = None
        while len(hits) < n_full and (len(hits) + 1) * size <= total - 1:
            start = len(hits) * size
            probe = _ChainKey(chain, tuple(tokens[start : start + size]))
            block = self._cache.get(probe)
            if block is None:
                break
            hits.append(block)
            chain = self._key_of[block]

        # 2. Count the supply before touching anything.
        fresh_needed = n_blocks - len(hits)
        idle_hits = sum(1 for b in hits if self._holders[b] == 0)
        supply = self.num_free - idle_hits
        if fresh_needed > supply:
            raise OutOfBlocks(f"OOM: need {fresh_needed} blocks, {supply} can be had")

        # 3. Pin the hits, then take the rest one at a time in table order.
        for block in hits:
            self._hold(block)
        table = list(hits)
        for _ in range(fresh_needed):
            table.append(self._take_block())

        # 4. Cache every full block past the hits whose key is new.
        for index in range(len(hits), n_full):
            start = index * size
            key = _ChainKey(chain, tuple(tokens[start : start + size]))
            chain = self._register(table[index], key)

        seq = _Sequence()
        seq.table = table
        seq.length = total
        seq.tail = tokens[n_full * size :]
        seq.last_key = chain
        self._requests[request_id] = seq
        return len(hits) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        """Add one decoded token, taking a block when it starts one and caching the block it
        fills. OutOfBlocks, and nothing changed, when no block can be had."""
        seq = self._lookup(request_id)
        size = self.block_size
        if seq.length % size == 0:
            if self.num_free == 0:
                raise OutOfBlocks("OOM: need 1 block, 0 free")
            seq.table.append(self._take_block())
        seq.tail.append(token_id)
        seq.length += 1
        if seq.length % size == 0:
            key = _ChainKey(seq.last_key, tuple(seq.tail))
            seq.last_key = self._register(seq.table[-1], key)
            seq.tail = []

    def free(self, request_id: int) -> None:
        """Release the request's blocks from last to first; a block left without holders
        becomes the most recently idle if cached, else empty. The id is then unknown."""
        seq = self._lookup(request_id)
        for block in reversed(seq.table):
            self._holders[block] -= 1
            if self._holders[block] == 0:
                if self._key_of[block] is not None:
                    self._idle[block] = None
                else:
                    self._empty.append(block)
        del self._requests[request_id]
