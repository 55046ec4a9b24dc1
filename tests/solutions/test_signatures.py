"""The answer key declares everything the stubs declare, the same way (it may add more): a
candidate who fills the stubs in keeps the interface the grader calls."""

import importlib
import inspect
from types import ModuleType

import pytest


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
