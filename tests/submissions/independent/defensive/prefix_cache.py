"""Automatic prefix caching over a private pool of KV blocks.

Each physical block is described by a `_Slot` node. Nodes of blocks that are cached but held by
nobody are threaded on an intrusive doubly linked list (a sentinel `_Ring` closes it), oldest
idle first, so evicting the longest-idle block, parking a freed one and reviving a hit are all
O(1). Empty blocks sit on a plain stack. The cache maps a content key to one block: the key of a
full block is `(parent digest, tokens)`, where the parent digest is Python's hash of the
previous block's key (a fixed root for the first block); since the dict compares keys on a hit,
equal digests with different tokens never share a block.
"""

import operator
from collections.abc import Sequence

_ROOT_DIGEST = 0x5EED


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


def _require(condition: bool, message: str) -> None:
    """Raise ValueError with `message` unless `condition` holds."""
    if not condition:
        raise ValueError(message)


def _as_int(value: object, what: str) -> int:
    """`value` as a plain int; ValueError for anything that is not an integer."""
    _require(not isinstance(value, float), f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


class _Ring:
    """Sentinel of the idle list: `after` is the oldest idle block, `before` the newest."""

    __slots__ = ("after", "before")

    def __init__(self) -> None:
        self.after: _Ring | _Slot = self
        self.before: _Ring | _Slot = self


class _Slot(_Ring):
    """One physical block: its holders, its cache key (None if uncached), its idle-list links."""

    __slots__ = ("block_id", "holders", "key")

    def __init__(self, block_id: int) -> None:
        super().__init__()
        self.block_id = block_id
        self.holders = 0
        self.key: tuple[int, tuple[int, ...]] | None = None


class _Live:
    """A live request: its block table, every token it holds, and its last full block's digest."""

    __slots__ = ("digest", "table", "tokens")

    def __init__(self, table: list[int], tokens: list[int], digest: int) -> None:
        self.table = table
        self.tokens = tokens
        self.digest = digest


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        count = _as_int(num_blocks, "num_blocks")
        size = _as_int(block_size, "block_size")
        _require(count >= 0, f"num_blocks must be >= 0, got {count}")
        _require(size >= 1, f"block_size must be >= 1, got {size}")
        self.num_blocks = count
        self.block_size = size
        self._slots = [_Slot(bid) for bid in range(count)]
        self._empty: list[int] = list(range(count - 1, -1, -1))
        self._idle = _Ring()
        self._idle_count = 0
        self._index: dict[tuple[int, tuple[int, ...]], int] = {}
        self._live: dict[int, _Live] = {}

    # -- inspection ----------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """Blocks with no holder: empty ones plus cached-and-idle ones."""
        return len(self._empty) + self._idle_count

    @property
    def num_cached(self) -> int:
        """How many blocks the cache currently maps a key to (held or idle)."""
        return len(self._index)

    def ref_count(self, block_id: int) -> int:
        """How many requests hold `block_id` now; ValueError when it is out of range."""
        bid = _as_int(block_id, "block id")
        _require(
            0 <= bid < self.num_blocks, f"block id {bid} is out of range [0, {self.num_blocks})"
        )
        return self._slots[bid].holders

    def block_table(self, request_id: int) -> list[int]:
        """The block ids of a live request, in order; ValueError for an unknown id."""
        return list(self._lookup(request_id).table)

    # -- requests ------------------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        """Blocks for a new request's prompt; returns how many prompt tokens were cached."""
        _require(request_id not in self._live, f"request {request_id} is already live")
        _require(token_ids is not None, "token_ids must be a sequence of ints, got None")
        tokens = [_as_int(tok, "token id") for tok in token_ids]
        length = len(tokens)
        _require(length > 0, f"request {request_id} has an empty prompt")
        size = self.block_size
        table_len = (length + size - 1) // size
        full = length // size

        # Keys of every full block, chained from the root.
        keys: list[tuple[int, tuple[int, ...]]] = []
        digest = _ROOT_DIGEST
        for j in range(full):
            key = (digest, tuple(tokens[j * size : (j + 1) * size]))
            keys.append(key)
            digest = hash(key)

        # The cached prefix: full blocks found in the cache that end before the last token.
        reusable = (length - 1) // size
        hits: list[_Slot] = []
        for j in range(reusable):
            bid = self._index.get(keys[j])
            if bid is None:
                break
            hits.append(self._slots[bid])

        # Count before touching anything: hits that are idle now stop being takeable.
        missing = table_len - len(hits)
        idle_hits = 0
        for node in hits:
            if node.holders == 0:
                idle_hits += 1
        takeable = len(self._empty) + self._idle_count - idle_hits
        if missing > takeable:
            raise OutOfBlocks(
                f"OOM: prompt of request {request_id} needs {missing} new blocks, "
                f"only {takeable} can be had"
            )

        # Commit: pin the hits first so that taking blocks can never evict them.
        table: list[int] = []
        for node in hits:
            if node.holders == 0:
                self._unlink(node)
            node.holders += 1
            table.append(node.block_id)
        for _ in range(missing):
            table.append(self._take())

        for j in range(len(hits), full):
            self._publish(self._slots[table[j]], keys[j])

        self._live[request_id] = _Live(table, tokens, digest)
        return len(hits) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        """One decoded token; takes a block when the token opens one, caches a filled block."""
        live = self._lookup(request_id)
        token = _as_int(token_id, "token id")
        size = self.block_size
        position = len(live.tokens)
        if position % size == 0:
            if self.num_free == 0:
                raise OutOfBlocks(f"OOM: request {request_id} needs a block for its next token")
            live.table.append(self._take())
        live.tokens.append(token)
        if (position + 1) % size == 0:
            key = (live.digest, tuple(live.tokens[position + 1 - size :]))
            live.digest = hash(key)
            self._publish(self._slots[live.table[-1]], key)

    def free(self, request_id: int) -> None:
        """Release the request's blocks, last to first; cached ones become idle, others empty."""
        live = self._lookup(request_id)
        for bid in reversed(live.table):
            node = self._slots[bid]
            node.holders -= 1
            if node.holders > 0:
                continue
            if node.key is None:
                self._empty.append(bid)
                continue
            self._park(node)
        del self._live[request_id]

    # -- helpers -------------------------------------------------------------------------------

    def _lookup(self, request_id: int) -> _Live:
        live = self._live.get(request_id)
        if live is None:
            raise ValueError(f"request {request_id} is not live")
        return live

    def _take(self) -> int:
        """One block for a holder: an empty one, else the longest-idle cached one (evicted)."""
        if self._empty:
            bid = self._empty.pop()
        else:
            victim = self._idle.after
            if victim is self._idle:
                raise OutOfBlocks("OOM: no empty or idle block left")
            self._unlink(victim)
            del self._index[victim.key]
            victim.key = None
            bid = victim.block_id
        self._slots[bid].holders = 1
        return bid

    def _publish(self, node: _Slot, key: tuple[int, tuple[int, ...]]) -> None:
        """Cache `node` under `key` unless the key already names a block."""
        if key in self._index or node.key is not None:
            return
        self._index[key] = node.block_id
        node.key = key

    def _park(self, node: _Slot) -> None:
        """Append `node` to the idle list as its most recently idle block."""
        newest = self._idle.before
        node.before = newest
        node.after = self._idle
        newest.after = node
        self._idle.before = node
        self._idle_count += 1

    def _unlink(self, node: _Slot) -> None:
        """Take `node` off the idle list."""
        node.before.after = node.after
        node.after.before = node.before
        node.after = node
        node.before = node
        self._idle_count -= 1
