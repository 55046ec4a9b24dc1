"""Automatic prefix caching over a private block pool.

A full block's identity is the chain of token tuples from the prompt's start through it. Each
such identity is a `_Key` node pointing at its parent's node and carrying a chain hash computed
as `hash((parent hash, tokens))`; the cache is a dict from chain hash to the blocks cached
under that hash (a bucket, so two prefixes whose hashes collide never share an entry). A hit
is confirmed by comparing tokens and parents, never by the hash alone.
"""

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


_ROOT_HASH = 0x51ED_2701


@dataclass(eq=False, repr=False)
class _Key:
    """The identity of a full block: its tokens and its parent's identity (None: the root)."""

    parent: "_Key | None"
    tokens: tuple
    digest: int


def _same_prefix(a: "_Key | None", b: "_Key | None") -> bool:
    # Walk both chains upward until they meet at a shared node (usually at once).
    while a is not b:
        if a is None or b is None or a.digest != b.digest or a.tokens != b.tokens:
            return False
        a, b = a.parent, b.parent
    return True


def _make_key(parent: "_Key | None", tokens: tuple) -> _Key:
    parent_digest = _ROOT_HASH if parent is None else parent.digest
    return _Key(parent, tokens, hash((parent_digest, tokens)))


@dataclass
class _Seq:
    """A live request: its blocks, all its tokens, and the keys of its full blocks."""

    blocks: list[int]
    tokens: list
    keys: list[_Key] = field(default_factory=list)


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
        self._empty = list(range(num_blocks - 1, -1, -1))  # stack, lowest id on top
        self._idle: OrderedDict[int, None] = OrderedDict()  # cached, unheld; oldest first
        self._cache: dict[int, list[int]] = {}  # chain hash -> blocks cached under it
        self._cached_key: list[_Key | None] = [None] * num_blocks
        self._seqs: dict[int, _Seq] = {}

    # state queries ---------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        return len(self._empty) + len(self._idle)

    def ref_count(self, block_id: int) -> int:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} out of range [0, {self.num_blocks})")
        return self._holders[block_id]

    def block_table(self, request_id: int) -> list[int]:
        return list(self._seq(request_id).blocks)

    def _seq(self, request_id: int) -> _Seq:
        seq = self._seqs.get(request_id)
        if seq is None:
            raise ValueError(f"unknown request id {request_id}")
        return seq

    # cache map -------------------------------------------------------------------------

    def _lookup(self, key: _Key) -> int | None:
        for b in self._cache.get(key.digest, ()):
            if _same_prefix(self._cached_key[b], key):
                return b
        return None

    def _insert(self, block: int, key: _Key) -> _Key:
        """Cache `block` under `key` unless the key is cached already; the canonical key."""
        found = self._lookup(key)
        if found is not None:
            return self._cached_key[found]
        self._cache.setdefault(key.digest, []).append(block)
        self._cached_key[block] = key
        return key

    def _uncache(self, block: int) -> None:
        key = self._cached_key[block]
        bucket = self._cache[key.digest]
        bucket.remove(block)
        if not bucket:
            del self._cache[key.digest]
        self._cached_key[block] = None

    def _take(self) -> int:
        if self._empty:
            block = self._empty.pop()
        else:
            block, _ = self._idle.popitem(last=False)
            self._uncache(block)
        self._holders[block] = 1
        return block

    # requests --------------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        if request_id in self._seqs:
            raise ValueError(f"request id {request_id} is live")
        tokens = list(token_ids)
        if not tokens:
            raise ValueError("empty prompt")
        size = self.block_size
        n_full = len(tokens) // size
        n_blocks = -(-len(tokens) // size)
        hit_limit = (len(tokens) - 1) // size  # blocks lying inside all but the last token

        keys: list[_Key] = []
        hits: list[int] = []
        parent = None
        for j in range(n_full):
            key = _make_key(parent, tuple(tokens[j * size : (j + 1) * size]))
            if len(hits) == j < hit_limit:
                block = self._lookup(key)
                if block is not None:
                    hits.append(block)
                    key = self._cached_key[block]
            keys.append(key)
            parent = key

        idle_hits = sum(1 for b in hits if self._holders[b] == 0)
        need = n_blocks - len(hits)
        if need > self.num_free - idle_hits:
            raise OutOfBlocks(f"OOM: need {need} blocks, {self.num_free - idle_hits} free")

        for b in hits:
            if self._holders[b] == 0:
                del self._idle[b]
            self._holders[b] += 1
        table = hits + [self._take() for _ in range(need)]
        for j in range(len(hits), n_full):
            keys[j] = self._insert(table[j], keys[j])
        self._seqs[request_id] = _Seq(table, tokens, keys)
        return len(hits) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        seq = self._seq(request_id)
        size = self.block_size
        pos = len(seq.tokens)
        if pos % size == 0:
            if self.num_free == 0:
                raise OutOfBlocks("OOM: need 1 block, 0 free")
            seq.blocks.append(self._take())
        seq.tokens.append(token_id)
        if (pos + 1) % size == 0:
            j = pos // size
            parent = seq.keys[-1] if seq.keys else None
            key = _make_key(parent, tuple(seq.tokens[j * size :]))
            seq.keys.append(self._insert(seq.blocks[j], key))

    def free(self, request_id: int) -> None:
        seq = self._seq(request_id)
        del self._seqs[request_id]
        for b in reversed(seq.blocks):
            self._holders[b] -= 1
            if self._holders[b] == 0:
                if self._cached_key[b] is not None:
                    self._idle[b] = None
                else:
                    self._empty.append(b)
