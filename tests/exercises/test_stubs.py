"""The exercise stubs: they import and construct cleanly, every method exercises/README.md names
raises NotImplementedError (so a grader can say "not implemented" per method), and their signatures
are the answer key's."""

import importlib
import inspect
from collections.abc import Callable
from types import ModuleType

import pytest
import torch

from exercises import block_allocator, kv_cache_manager, scheduler


def allocator() -> block_allocator.BlockAllocator:
    return block_allocator.BlockAllocator(4)


def pool() -> kv_cache_manager.KVCacheManager:
    return kv_cache_manager.KVCacheManager(num_blocks=4, block_size=4, head_dim=8)


def request() -> kv_cache_manager.Request:
    return kv_cache_manager.Request(request_id=0, prompt_len=3)


def paged_attention_decode(*args: torch.Tensor) -> torch.Tensor:
    """The stub's function; imported late because it needs Triton (Linux only)."""
    pytest.importorskip("triton", reason="Triton installs on Linux only")
    from exercises.paged_attention import paged_attention_decode

    return paged_attention_decode(*args)


STUB_CALLS: dict[str, Callable[[], object]] = {
    "BlockAllocator.num_free": lambda: allocator().num_free,
    "BlockAllocator.allocate": lambda: allocator().allocate(1),
    "BlockAllocator.free": lambda: allocator().free([0]),
    "BlockAllocator.incref": lambda: allocator().incref(0),
    "BlockAllocator.ref_count": lambda: allocator().ref_count(0),
    "KVCacheManager.free_blocks": lambda: pool().free_blocks,
    "KVCacheManager.allocate_for_prefill": lambda: pool().allocate_for_prefill(request()),
    "KVCacheManager.allocate_for_decode": lambda: pool().allocate_for_decode(request()),
    "KVCacheManager.free": lambda: pool().free(request()),
    "KVCacheManager.get_physical_cache": lambda: pool().get_physical_cache(request()),
    "KVCacheManager.slot_mapping": lambda: pool().slot_mapping(request()),
    "KVCacheManager.fork": lambda: pool().fork(request(), 1),
    "Scheduler.add_request": lambda: scheduler.Scheduler(pool(), 2).add_request(0, 3, 2),
    "Scheduler.step": lambda: scheduler.Scheduler(pool(), 2).step(),
    "Scheduler.has_unfinished": lambda: scheduler.Scheduler(pool(), 2).has_unfinished(),
    "paged_attention_decode": lambda: paged_attention_decode(
        torch.zeros(1, 2, 32),
        torch.zeros(1, 4, 2, 32),
        torch.zeros(1, 4, 2, 32),
        torch.zeros(1, 1, dtype=torch.int32),
        torch.ones(1, dtype=torch.int32),
    ),
}


@pytest.mark.parametrize("name", STUB_CALLS)
def test_each_stub_raises_not_implemented(name: str) -> None:
    with pytest.raises(NotImplementedError, match=name):
        STUB_CALLS[name]()


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


def public_signatures(module: ModuleType) -> dict[str, str]:
    """`name -> signature` for the module's own public classes, their methods, and functions."""
    signatures = {}
    for name, value in vars(module).items():
        if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            signatures[name] = str(inspect.signature(value))
        elif inspect.isclass(value):
            for attr, member in vars(value).items():
                if attr == "__init__" or not attr.startswith("_"):
                    shown = str(inspect.signature(member)) if callable(member) else "property"
                    signatures[f"{name}.{attr}"] = shown
    # Annotations name `exercises.x.T` in one package and `solutions.x.T` in the other.
    return {name: shown.replace(f"{module.__package__}.", "") for name, shown in signatures.items()}


@pytest.mark.parametrize(
    "module", ["block_allocator", "kv_cache_manager", "paged_attention", "scheduler"]
)
def test_stubs_have_the_answer_keys_signatures(module: str) -> None:
    """Everything the stub declares, the answer key declares the same way (it may add more)."""
    if module == "paged_attention":
        pytest.importorskip("triton", reason="Triton installs on Linux only")
    stub = importlib.import_module(f"exercises.{module}")
    solved_signatures = public_signatures(importlib.import_module(f"solutions.{module}"))
    for name, signature in public_signatures(stub).items():
        assert solved_signatures.get(name) == signature, name
