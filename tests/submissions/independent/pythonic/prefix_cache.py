"""Automatic prefix caching over a private pool of block ids.

A block is held (it has holders), cached-and-idle (no holder, but its key is still in the cache,
waiting in an LRU queue) or empty. The cache is two dicts that mirror each other, key -> block
and block -> key, with an OrderedDict of idle cached blocks giving the eviction order. Keys are
chained hashes; each cached block also remembers its parent key and its tokens, so a hash
collision is caught on lookup instead of serving the wrong tokens.
"""

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

_ROOT_KEY = hash(("prefix-cache", "root"))


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM."""


@dataclass
class _Sequence:
    """A live request: its blocks, the keys of its full blocks, the tokens past the last one."""

    blocks: list[int]
    keys: list[int]
    tail: list[int] = field(default_factory=list)

    @property
    def last_key(self) -> int:
        return self.keys[-1] if self.keys else _ROOT_KEY


def _chain(tokens: Sequence[int], block_size: int) -> Iterator[tuple[int, int, tuple[int, ...]]]:
    """Yield `(parent_key, key, block_tokens)` for every full block of `tokens`, in order."""
    parent = _ROOT_KEY
    for start in range(0, len(tokens) - block_size + 1, block_size):
        chunk = tuple(tokens[start : start + block_size])
        key = hash((parent, chunk))
        yield parent, key, chunk
        parent = key


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
        self._empty = list(range(num_blocks - 1, -1, -1))  # a stack: pops 0, 1, 2, ...
        self._idle: OrderedDict[int, None] = OrderedDict()  # oldest idle first
        self._block_of: dict[int, int] = {}  # key -> block
        self._key_of: dict[int, int] = {}  # block -> key
        self._contents: dict[int, tuple[int, tuple[int, ...]]] = {}  # block -> (parent, tokens)
        self._seqs: dict[int, _Sequence] = {}

    # -- queries ---------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        return len(self._empty) + len(self._idle)

    def ref_count(self, block_id: int) -> int:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block id {block_id} is out of range")
        return self._holders[block_id]

    def block_table(self, request_id: int) -> list[int]:
        return list(self._live(request_id).blocks)

    def _live(self, request_id: int) -> _Sequence:
        try:
            return self._seqs[request_id]
        except KeyError:
            raise ValueError(f"unknown request id {request_id}") from None

    def _lookup(self, parent: int, key: int, chunk: tuple[int, ...]) -> int | None:
        """The cached block for this key, if its recorded contents really match."""
        block = self._block_of.get(key)
        if block is not None and self._contents[block] == (parent, chunk):
            return block
        return None

    # -- block state changes ---------------------------------------------------------------

    def _hold(self, block: int) -> None:
        if self._holders[block] == 0:
            self._idle.pop(block, None)
        self._holders[block] += 1

    def _take(self) -> int:
        """An empty block, or else the one idle the longest (its key leaves the cache)."""
        if self._empty:
            block = self._empty.pop()
        else:
            block, _ = self._idle.popitem(last=False)
            self._forget(block)
        self._holders[block] = 1
        return block

    def _remember(self, block: int, parent: int, key: int, chunk: tuple[int, ...]) -> None:
        if key in self._block_of:
            return  # an older block already owns this key
        self._block_of[key] = block
        self._key_of[block] = key
        self._contents[block] = (parent, chunk)

    def _forget(self, block: int) -> None:
        key = self._key_of.pop(block)
        del self._block_of[key]
        del self._contents[block]

    def _release(self, block: int) -> None:
        self._holders[block] -= 1
        if self._holders[block]:
            return
        if block in self._key_of:
            self._idle[block] = None
        else:
            self._empty.append(block)

    # -- the contract ----------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        if request_id in self._seqs:
            raise ValueError(f"request id {request_id} is already live")
        tokens = list(token_ids)
        if not tokens:
            raise ValueError("a prompt needs at least one token")

        size = self.block_size
        full = list(_chain(tokens, size))
        hits: list[int] = []
        for index, (parent, key, chunk) in enumerate(full):
            if (index + 1) * size > len(tokens) - 1:
                break
            block = self._lookup(parent, key, chunk)
            if block is None:
                break
            hits.append(block)

        needed = -(-len(tokens) // size) - len(hits)
        idle_hits = sum(1 for block in hits if self._holders[block] == 0)
        available = self.num_free - idle_hits
        if needed > available:
            raise OutOfBlocks(f"OOM: need {needed} blocks, {available} can be had")

        for block in hits:
            self._hold(block)
        blocks = hits + [self._take() for _ in range(needed)]
        for block, (parent, key, chunk) in zip(blocks, full, strict=False):
            self._remember(block, parent, key, chunk)

        self._seqs[request_id] = _Sequence(
            blocks=blocks,
            keys=[key for _, key, _ in full],
            tail=tokens[len(full) * size :],
        )
        return len(hits) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        seq = self._live(request_id)
        if not seq.tail and len(seq.blocks) == len(seq.keys):
            if not self.num_free:
                raise OutOfBlocks("OOM: no block left for a new token")
            seq.blocks.append(self._take())
        seq.tail.append(token_id)
        if len(seq.tail) == self.block_size:
            parent, chunk = seq.last_key, tuple(seq.tail)
            key = hash((parent, chunk))
            self._remember(seq.blocks[-1], parent, key, chunk)
            seq.keys.append(key)
            seq.tail = []

    def free(self, request_id: int) -> None:
        seq = self._live(request_id)
        for block in reversed(seq.blocks):
            self._release(block)
        del self._seqs[request_id]
