"""Prefix cache: chained block keys in a dict, idle cached blocks on an index-linked LRU list."""

from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class _Key:
    """A full block's tokens plus its parent's key; equality walks the chain exactly."""

    __slots__ = ("h", "p", "t")

    def __init__(self, p: "_Key | None", t: tuple) -> None:
        self.p = p
        self.t = t
        self.h = hash((0 if p is None else p.h, t))

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, o: object) -> bool:
        a = self
        while a is not o:
            if not isinstance(o, _Key) or a.h != o.h or a.t != o.t:
                return False
            a, o = a.p, o.p
            if a is None or o is None:
                return a is o
        return True


class _Req:
    __slots__ = ("key", "tab", "tail")

    def __init__(self, tab: list[int], key: _Key | None, tail: list) -> None:
        self.tab = tab
        self.key = key
        self.tail = tail


class PrefixCache:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 0 or block_size < 1:
            raise ValueError(f"bad sizes {num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        n = num_blocks
        self._rc = [0] * n
        self._bk: list[_Key | None] = [None] * n
        self._c: dict[_Key, int] = {}
        self._e = list(range(n - 1, -1, -1))
        self._nx = [n] * (n + 1)  # node n is the sentinel; nx[n] is the oldest idle block
        self._pv = [n] * (n + 1)
        self._idle = 0
        self._reqs: dict[int, _Req] = {}

    @property
    def num_free(self) -> int:
        return len(self._e) + self._idle

    def ref_count(self, block_id: int) -> int:
        if not 0 <= block_id < self.num_blocks:
            raise ValueError(f"block {block_id} out of range")
        return self._rc[block_id]

    def _get(self, rid: int) -> _Req:
        r = self._reqs.get(rid)
        if r is None:
            raise ValueError(f"unknown request {rid}")
        return r

    def block_table(self, request_id: int) -> list[int]:
        return list(self._get(request_id).tab)

    def _unlink(self, b: int) -> None:
        p, q = self._pv[b], self._nx[b]
        self._nx[p] = q
        self._pv[q] = p
        self._idle -= 1

    def _link(self, b: int) -> None:
        s = self.num_blocks
        p = self._pv[s]
        self._nx[p] = b
        self._pv[b] = p
        self._nx[b] = s
        self._pv[s] = b
        self._idle += 1

    def _take(self) -> int:
        if self._e:
            b = self._e.pop()
        else:
            b = self._nx[self.num_blocks]
            self._unlink(b)
            del self._c[self._bk[b]]
            self._bk[b] = None
        self._rc[b] = 1
        return b

    def _put(self, k: _Key, b: int) -> _Key:
        o = self._c.get(k)
        if o is None:
            self._c[k] = b
            self._bk[b] = k
            return k
        return self._bk[o]

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        if request_id in self._reqs:
            raise ValueError(f"request {request_id} is live")
        t = tuple(token_ids)
        n, bs = len(t), self.block_size
        if not n:
            raise ValueError("empty prompt")
        hits: list[int] = []
        k = None
        while (len(hits) + 1) * bs <= n - 1:
            j = len(hits) * bs
            b = self._c.get(_Key(k, t[j : j + bs]))
            if b is None:
                break
            hits.append(b)
            k = self._bk[b]
        need = -(-n // bs) - len(hits)
        avail = self.num_free - sum(1 for b in hits if not self._rc[b])
        if need > avail:
            raise OutOfBlocks(f"OOM: need {need} blocks, {avail} free")
        for b in hits:
            if not self._rc[b]:
                self._unlink(b)
            self._rc[b] += 1
        tab = hits + [self._take() for _ in range(need)]
        for i in range(len(hits), n // bs):
            k = self._put(_Key(k, t[i * bs : (i + 1) * bs]), tab[i])
        self._reqs[request_id] = _Req(tab, k, list(t[n - n % bs :]))
        return len(hits) * bs

    def append_token(self, request_id: int, token_id: int) -> None:
        r = self._get(request_id)
        if not r.tail:
            if not self.num_free:
                raise OutOfBlocks("OOM: need 1 block, 0 free")
            r.tab.append(self._take())
        r.tail.append(token_id)
        if len(r.tail) == self.block_size:
            r.key = self._put(_Key(r.key, tuple(r.tail)), r.tab[-1])
            r.tail = []

    def free(self, request_id: int) -> None:
        r = self._get(request_id)
        del self._reqs[request_id]
        for b in reversed(r.tab):
            self._rc[b] -= 1
            if not self._rc[b]:
                if self._bk[b] is None:
                    self._e.append(b)
                else:
                    self._link(b)
