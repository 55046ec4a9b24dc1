"""Paged KV-cache manager: block tables on top of the reference-counted block allocator.

Every request's logical block `j` maps to physical block `block_table[j]`; token `i` lives at
row `i % block_size` of block `block_table[i // block_size]`. Each method checks the request and
the pool first and only then changes anything, so a raising call leaves everything untouched.
"""

from collections.abc import Collection, Iterator

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


def _require(condition: bool, message: str) -> None:
    """Raise ValueError with `message` unless `condition` holds."""
    if not condition:
        raise ValueError(message)


def _require_request(req: object) -> None:
    """ValueError unless `req` carries the attributes of a Request."""
    _require(
        hasattr(req, "seq_len") and hasattr(req, "block_table") and hasattr(req, "request_id"),
        f"expected a Request, got {type(req).__name__}",
    )


def _blocks_for(tokens: int, block_size: int) -> int:
    """How many blocks of `block_size` slots `tokens` tokens occupy (integer ceiling)."""
    return (tokens + block_size - 1) // block_size


class _FreeBlockView(Collection[int]):
    """A live, read-only view of the allocator's free ids: O(1) `len`, O(1) membership."""

    def __init__(self, allocator: BlockAllocator) -> None:
        self._allocator = allocator

    def __len__(self) -> int:
        return self._allocator.num_free

    def __iter__(self) -> Iterator[int]:
        return iter(self._allocator.iter_free())

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, int) or isinstance(item, bool):
            return False
        if not 0 <= item < self._allocator.num_blocks:
            return False
        return self._allocator.ref_count(item) == 0

    def __repr__(self) -> str:
        return f"<{len(self)} free blocks>"


class KVCacheManager:
    """Owns the physical KV pool and gives requests blocks as their sequences grow."""

    def __init__(self, num_blocks: int, block_size: int, head_dim: int) -> None:
        for name, value in (
            ("num_blocks", num_blocks),
            ("block_size", block_size),
            ("head_dim", head_dim),
        ):
            _require(
                isinstance(value, int) and not isinstance(value, bool),
                f"{name} must be an int, got {value!r}",
            )
        _require(num_blocks >= 0, f"num_blocks must be >= 0, got {num_blocks}")
        _require(block_size >= 1, f"block_size must be >= 1, got {block_size}")
        _require(head_dim >= 1, f"head_dim must be >= 1, got {head_dim}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self._allocator = BlockAllocator(num_blocks)
        self._free_view = _FreeBlockView(self._allocator)

    @property
    def free_blocks(self) -> Collection[int]:
        """The free block ids, as a sized view (its `len()` is the number of free blocks)."""
        return self._free_view

    @property
    def allocator(self) -> BlockAllocator:
        """The allocator behind the pool (reference counts live there)."""
        return self._allocator

    # -- checks --------------------------------------------------------------------------------

    def _check_request(self, req: Request) -> None:
        """ValueError unless `req` looks like a request whose table matches its length."""
        _require_request(req)
        _require(
            isinstance(req.seq_len, int) and req.seq_len >= 0,
            f"request {req.request_id} has an invalid seq_len {req.seq_len!r}",
        )
        expected = _blocks_for(req.seq_len, self.block_size)
        _require(
            len(req.block_table) == expected,
            f"request {req.request_id} holds {len(req.block_table)} blocks but its "
            f"{req.seq_len} tokens need {expected}; was it prefilled?",
        )

    def _check_held(self, req: Request) -> None:
        """ValueError unless every block of `req`'s table is an allocated id of this pool."""
        for bid in req.block_table:
            _require(
                isinstance(bid, int) and 0 <= bid < self.num_blocks,
                f"request {req.request_id} names block {bid!r}, outside this pool",
            )
            _require(
                self._allocator.ref_count(bid) > 0,
                f"request {req.request_id} names block {bid}, which is free",
            )

    # Part 2 ----------------------------------------------------------------------------------

    def allocate_for_prefill(self, req: Request) -> None:
        """Give `req` exactly `ceil(req.seq_len / block_size)` new blocks, in logical order."""
        _require_request(req)
        _require(
            not req.block_table,
            f"request {req.request_id} already holds blocks {req.block_table}; "
            "prefill happens once",
        )
        _require(
            isinstance(req.seq_len, int) and req.seq_len >= 0,
            f"request {req.request_id} has an invalid seq_len {req.seq_len!r}",
        )
        needed = _blocks_for(req.seq_len, self.block_size)
        # Raises OutOfBlocks (a RuntimeError) before anything is taken when the pool is short.
        fresh = self._allocator.allocate(needed)
        req.block_table.extend(fresh)

    def allocate_for_decode(self, req: Request) -> None:
        """Account for one more token, taking a block (or copying a shared one) as needed."""
        self._check_request(req)
        position = req.seq_len  # 0-based slot of the token being added
        offset = position % self.block_size

        if offset == 0:
            # The token opens a new logical block.
            (fresh,) = self._allocator.allocate(1)
            req.block_table.append(fresh)
            req.seq_len = position + 1
            return

        last = req.block_table[-1]
        holders = self._allocator.ref_count(last)
        _require(holders > 0, f"request {req.request_id} writes into block {last}, which is free")
        if holders > 1:
            # Copy-on-write: the token would land in a block someone else also reads.
            (fresh,) = self._allocator.allocate(1)
            self.physical_kv_cache[fresh].copy_(self.physical_kv_cache[last])
            self._allocator.free([last])
            req.block_table[-1] = fresh
        req.seq_len = position + 1

    def free(self, req: Request) -> None:
        """Drop one reference per block of `req` and empty its table."""
        _require_request(req)
        self._check_held(req)
        self._allocator.free(req.block_table)
        req.block_table.clear()

    # Part 3 ----------------------------------------------------------------------------------

    def _table_tensor(self, req: Request) -> torch.Tensor:
        """The blocks `req.seq_len` tokens occupy, as an int64 tensor (validated)."""
        _require_request(req)
        used = _blocks_for(req.seq_len, self.block_size)
        _require(
            len(req.block_table) >= used,
            f"request {req.request_id} has {req.seq_len} tokens but only "
            f"{len(req.block_table)} blocks",
        )
        table = torch.tensor(req.block_table[:used], dtype=torch.long)
        if used:
            low = int(table.min())
            high = int(table.max())
            _require(
                low >= 0 and high < self.num_blocks,
                f"request {req.request_id} names a block outside [0, {self.num_blocks})",
            )
        return table

    def get_physical_cache(self, req: Request) -> torch.Tensor:
        """`[req.seq_len, head_dim]`: the request's rows in logical order, in one gather."""
        table = self._table_tensor(req)
        blocks = self.physical_kv_cache.index_select(0, table)
        return blocks.reshape(-1, self.head_dim)[: req.seq_len]

    def slot_mapping(self, req: Request) -> torch.Tensor:
        """`LongTensor[req.seq_len]`: the flat slot of every token of `req`."""
        table = self._table_tensor(req)
        offsets = torch.arange(self.block_size, dtype=torch.long)
        slots = table.unsqueeze(1) * self.block_size + offsets.unsqueeze(0)
        return slots.reshape(-1)[: req.seq_len]

    # Part 6 ----------------------------------------------------------------------------------

    def fork(self, parent: Request, child_id: int) -> Request:
        """A new request sharing every one of `parent`'s blocks (one more reference each)."""
        self._check_request(parent)
        self._check_held(parent)
        child = Request(child_id, parent.seq_len)
        for bid in parent.block_table:
            self._allocator.incref(bid)
        child.block_table = list(parent.block_table)
        return child
