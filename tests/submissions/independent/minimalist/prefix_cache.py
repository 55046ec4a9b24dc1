"""Automatic prefix caching: chained block keys, shared hits, LRU eviction of idle blocks."""

from collections import OrderedDict
from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class PrefixCache:
    """Keys are interned: (parent key id, block tokens) -> a small int, so hits compare tokens."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0 or block_size < 1:
            raise ValueError("need num_blocks >= 0 and block_size >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.refs = [0] * num_blocks
        self.empty = list(range(num_blocks))
        self.idle: OrderedDict[int, None] = OrderedDict()
        self.cache: dict[int, int] = {}  # key -> block
        self.key_of: dict[int, int] = {}  # block -> key, for cached blocks
        self.ids: dict[tuple, int] = {}
        self.reqs: dict[int, tuple[list[int], list[int], list[int]]] = {}  # table, tokens, keys

    @property
    def num_free(self) -> int:
        return len(self.empty) + len(self.idle)

    def ref_count(self, block_id: int) -> int:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block {block_id} out of range")
        return self.refs[block_id]

    def _req(self, request_id: int) -> tuple[list[int], list[int], list[int]]:
        if request_id not in self.reqs:
            raise ValueError(f"unknown request {request_id}")
        return self.reqs[request_id]

    def block_table(self, request_id: int) -> list[int]:
        return list(self._req(request_id)[0])

    def _key(self, parent: int, tokens: Sequence[int]) -> int:
        return self.ids.setdefault((parent, tuple(tokens)), len(self.ids))

    def _take(self) -> int:
        if self.empty:
            b = self.empty.pop()
        else:
            b = self.idle.popitem(last=False)[0]
            del self.cache[self.key_of.pop(b)]
        self.refs[b] = 1
        return b

    def _register(self, key: int, block: int) -> None:
        if key not in self.cache:
            self.cache[key] = block
            self.key_of[block] = key

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        if request_id in self.reqs or not token_ids:
            raise ValueError(f"request {request_id} is live or its prompt is empty")
        bs, n = self.block_size, len(token_ids)
        keys, parent = [], -1
        for j in range(n // bs):
            parent = self._key(parent, token_ids[j * bs : (j + 1) * bs])
            keys.append(parent)
        hits = []
        while (len(hits) + 1) * bs < n and keys[len(hits)] in self.cache:
            hits.append(self.cache[keys[len(hits)]])
        need = -(-n // bs) - len(hits)
        if need > self.num_free - sum(self.refs[b] == 0 for b in hits):
            raise OutOfBlocks(f"OOM: need {need} blocks, {self.num_free} free")
        for b in hits:
            self.idle.pop(b, None)
            self.refs[b] += 1
        table = hits + [self._take() for _ in range(need)]
        for key, b in zip(keys, table, strict=False):
            self._register(key, b)
        self.reqs[request_id] = (table, list(token_ids), keys)
        return len(hits) * bs

    def append_token(self, request_id: int, token_id: int) -> None:
        table, tokens, keys = self._req(request_id)
        if len(tokens) % self.block_size == 0:
            if not self.num_free:
                raise OutOfBlocks("OOM: no block for the next token")
            table.append(self._take())
        tokens.append(token_id)
        if len(tokens) % self.block_size == 0:
            keys.append(self._key(keys[-1] if keys else -1, tokens[-self.block_size :]))
            self._register(keys[-1], table[-1])

    def free(self, request_id: int) -> None:
        table = self._req(request_id)[0]
        del self.reqs[request_id]
        for b in reversed(table):
            self.refs[b] -= 1
            if not self.refs[b]:
                if b in self.key_of:
                    self.idle[b] = None
                else:
                    self.empty.append(b)
