"""A stand-in for the kit's `kv_cache_manager.py` in a candidate's worker: `Request` as the stub
gives it, and a `KVCacheManager` that holds no manager.

Part 5 runs the candidate's scheduler on the kit's manager, which lives in a worker of its own
(`grader/sandbox/kit_server.py`); see the stand-in `block_allocator.py`, which comes with this
file. Each call sends the request's `seq_len` and `block_table` to the kit's manager, which works
on a copy of the request there, and writes back what it left: a call that raises changes
nothing.

Only what part 5 lets a scheduler use is here: `allocate_for_prefill`, `allocate_for_decode`,
`free`, `free_blocks` (its `len()`), `num_blocks`, `block_size` (and `head_dim`). A call short of
blocks raises a plain RuntimeError: the contract's manager raises RuntimeError, of which the
stub's `OutOfBlocks` is one kind, so a scheduler catches RuntimeError.
"""

import operator
from typing import Any

from .block_allocator import OutOfBlocks, answer


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


class FreeBlocks:
    """`manager.free_blocks` as a scheduler uses it: a live view whose `len()` is the number of
    free blocks now (the kit's manager is asked each time)."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __len__(self) -> int:
        return answer({"op": "get", "handle": self.handle, "name": "free_blocks"})


class KVCacheManager:
    """The kit's manager, served from the kit's worker."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        sizes = [operator.index(size) for size in (num_blocks, block_size, head_dim)]
        self.handle = answer({"op": "new", "class": "KVCacheManager", "args": sizes})
        self.num_blocks, self.block_size, self.head_dim = num_blocks, block_size, head_dim

    @property
    def free_blocks(self) -> FreeBlocks:
        return FreeBlocks(self.handle)

    def allocate_for_prefill(self, req: Request) -> None:
        self.on_request("allocate_for_prefill", req)

    def allocate_for_decode(self, req: Request) -> None:
        self.on_request("allocate_for_decode", req)

    def free(self, req: Request) -> None:
        self.on_request("free", req)

    def on_request(self, name: str, req: Any) -> None:
        """The kit's `name(req)` on a copy of `req`'s length and table; then `req` made like the
        copy, its table in place."""
        table = [operator.index(block_id) for block_id in req.block_table]
        state = [operator.index(req.seq_len), table]
        message = {"op": "request", "handle": self.handle, "name": name, "request": state}
        try:
            seq_len, req.block_table[:] = answer(message)
        except OutOfBlocks as short:
            raise RuntimeError(str(short)) from None
        req.seq_len = seq_len
