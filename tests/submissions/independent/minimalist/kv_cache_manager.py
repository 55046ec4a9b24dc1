"""A paged KV-cache manager: block tables over a shared pool, with fork and copy-on-write."""

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
            raise ValueError("need num_blocks >= 0, block_size >= 1 and head_dim >= 1")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self.allocator = BlockAllocator(num_blocks)

    @property
    def free_blocks(self) -> list[int]:
        return self.allocator.free_ids

    def allocate_for_prefill(self, req: Request) -> None:
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks")
        n = -(-req.seq_len // self.block_size)
        req.block_table.extend(self.allocator.allocate(n))

    def allocate_for_decode(self, req: Request) -> None:
        table = req.block_table
        if req.seq_len % self.block_size == 0:
            table.append(self.allocator.allocate(1)[0])
        elif self.allocator.ref_count(table[-1]) > 1:
            new = self.allocator.allocate(1)[0]
            self.physical_kv_cache[new] = self.physical_kv_cache[table[-1]]
            self.allocator.free([table[-1]])
            table[-1] = new
        req.seq_len += 1

    def free(self, req: Request) -> None:
        self.allocator.free(req.block_table)
        req.block_table = []

    def _blocks(self, req: Request) -> torch.Tensor:
        n = -(-req.seq_len // self.block_size)
        return torch.tensor(req.block_table[:n], dtype=torch.long)

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        rows = self.physical_kv_cache[self._blocks(req)]
        return rows.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        offsets = torch.arange(self.block_size)
        slots = self._blocks(req)[:, None] * self.block_size + offsets
        return slots.reshape(-1)[: req.seq_len]

    def fork(self, parent: Request, child_id: int) -> Request:
        child = Request(child_id, parent.seq_len)
        for b in parent.block_table:
            self.allocator.incref(b)
        child.block_table = list(parent.block_table)
        return child
