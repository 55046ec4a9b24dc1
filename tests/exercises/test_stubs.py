"""What the exercise stubs give for free works, and keeps working once a candidate fills them in.

That the stubs are still stubs is `tests/stubs/`'s to check, and that they declare the answer key's
signatures `tests/solutions/test_signatures.py`'s: both stay out of the candidate kit."""

import pytest
import torch

from exercises import block_allocator, kv_cache_manager, scheduler


def allocator() -> block_allocator.BlockAllocator:
    return block_allocator.BlockAllocator(4)


def pool() -> kv_cache_manager.KVCacheManager:
    return kv_cache_manager.KVCacheManager(num_blocks=4, block_size=4, head_dim=8)


def request() -> kv_cache_manager.Request:
    return kv_cache_manager.Request(request_id=0, prompt_len=3)


def test_the_given_pieces_work() -> None:
    """What the stubs give for free: Request, OutOfBlocks, StepOutput and the pool tensor."""
    req = request()
    assert (req.request_id, req.seq_len, req.block_table) == (0, 3, [])
    with pytest.raises(ValueError):
        kv_cache_manager.Request(0, -1)
    assert issubclass(block_allocator.OutOfBlocks, RuntimeError)
    assert scheduler.StepOutput() == scheduler.StepOutput([], [], [])
    manager = pool()
    assert (manager.num_blocks, manager.block_size, manager.head_dim) == (4, 4, 8)
    assert torch.equal(manager.physical_kv_cache, torch.zeros(4, 4, 8))
    assert allocator().num_blocks == 4
