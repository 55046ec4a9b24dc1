"""Paged KV-cache manager built on the FIFO block allocator."""

from collections.abc import Collection

import torch

from .block_allocator import BlockAllocator


class Request:
    """One sequence: its id, how many tokens it holds, and where they live. Given: keep as is.

    `seq_len` starts at `prompt_len` and grows by one per decoded token. `block_table` starts
    empty; `allocate_for_prefill` fills it.
    """

    def __init__(self, request_id: int, prompt_len: int) -> None:
        if prompt_len < 0:
            raise ValueError(f"prompt_len must be >= 0, got {prompt_len}")
        self.request_id = request_id
        self.seq_len = prompt_len
        self.block_table: list[int] = []

    def __repr__(self) -> str:
        return (
            f"Request(request_id={self.request_id}, seq_len={self.seq_len}, "
            f"block_table={self.block_table})"
        )


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        if num_blocks < 0 or block_size < 1 or head_dim < 1:
            raise ValueError(f"bad sizes {num_blocks}, {block_size}, {head_dim}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self._a = BlockAllocator(num_blocks)

    @property
    def free_blocks(self) -> Collection[int]:
        return self._a._q

    def _nb(self, n: int) -> int:
        return -(-n // self.block_size)

    def allocate_for_prefill(self, req: Request) -> None:
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks")
        req.block_table.extend(self._a.allocate(self._nb(req.seq_len)))

    def allocate_for_decode(self, req: Request) -> None:
        t, n = req.block_table, req.seq_len
        if len(t) != self._nb(n):
            raise ValueError(f"request {req.request_id} has no prefill")
        if n % self.block_size == 0:
            t.append(self._a.allocate(1)[0])
        elif self._a.ref_count(t[-1]) > 1:
            old = t[-1]
            (b,) = self._a.allocate(1)
            self.physical_kv_cache[b].copy_(self.physical_kv_cache[old])
            self._a.free([old])
            t[-1] = b
        req.seq_len = n + 1

    def free(self, req: Request) -> None:
        self._a.free(req.block_table)
        req.block_table.clear()

    def _tab(self, req: Request) -> torch.Tensor:
        return torch.tensor(req.block_table[: self._nb(req.seq_len)], dtype=torch.long)

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        rows = self.physical_kv_cache.index_select(0, self._tab(req))
        return rows.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        bs = self.block_size
        s = self._tab(req).mul_(bs).unsqueeze(1) + torch.arange(bs)
        return s.reshape(-1)[: req.seq_len]

    def fork(self, parent: Request, child_id: int) -> Request:
        t = parent.block_table
        for b in t:
            if self._a.ref_count(b) < 1:
                raise ValueError(f"block {b} of the parent is free")
        c = Request(child_id, parent.seq_len)
        for b in t:
            self._a.incref(b)
        c.block_table = list(t)
        return c
