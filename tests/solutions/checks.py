"""Checks shared by the manager's tests."""

from collections.abc import Callable

import pytest
import torch

from solutions.kv_cache_manager import KVCacheManager, Request


def state(manager: KVCacheManager, *requests: Request) -> tuple:
    """Everything a call may change: the free count, the pool, and each request."""
    return (
        len(manager.free_blocks),
        manager.physical_kv_cache.clone(),
        [(r.seq_len, list(r.block_table)) for r in requests],
    )


def assert_refused(
    error: type[Exception], call: Callable[[], object], manager: KVCacheManager, *requests: Request
) -> None:
    """`call()` raises `error` and leaves the manager and `requests` exactly as they were."""
    before = state(manager, *requests)
    with pytest.raises(error):
        call()
    after = state(manager, *requests)
    assert before[0] == after[0], "free block count changed"
    assert torch.equal(before[1], after[1]), "physical_kv_cache changed"
    assert before[2] == after[2], "a request's seq_len or block_table changed"
