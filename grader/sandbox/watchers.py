"""The kernel's watchers, in the worker: the Triton kernels a call launches, and the torch ops
a kernel's Python wrapper runs outside them that no wrapper needs (attention computed by torch).

Loaded by the worker from its copy beside it (`worker.load_sibling`); stdlib at module level,
torch and triton imported when a watcher runs. What they report only guides an honest candidate:
the worker's own code can patch them (the kernel rule, read by the grading process, is the
verdict: `grader/kernel_rule.py`).
"""

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def count_kernel_launches() -> Iterator[list]:
    """Records each launch of a `@triton.jit` kernel (compiled or interpreted) in the block.

    Torch dispatch modes (`torch_ops_outside_kernels`) are suspended while a kernel runs, since
    the interpreter copies tensors with torch ops, and while an autotuner benchmarks its configs
    (Triton's `do_bench` summarises its timings with torch ops)."""
    from torch.utils._python_dispatch import _disable_current_modes
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    launches: list = []
    originals = {kind: kind.run for kind in (JITFunction, InterpretedFunction)}
    original_bench = Autotuner._bench

    def counting(original: Callable) -> Callable:
        def run(self: Any, *args: Any, warmup: bool = False, **kwargs: Any) -> Any:
            if not warmup:
                launches.append(getattr(self, "__name__", "kernel"))
            with _disable_current_modes():
                return original(self, *args, warmup=warmup, **kwargs)

        return run

    def bench(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _disable_current_modes():
            return original_bench(self, *args, **kwargs)

    for kind, original in originals.items():
        kind.run = counting(original)
    Autotuner._bench = bench
    try:
        yield launches
    finally:
        for kind, original in originals.items():
            kind.run = original
        Autotuner._bench = original_bench


# aten ops a wrapper may run outside its Triton kernels on any tensor (an in-place op by its name
# without the trailing underscore): allocation, views, copies, dtype and device moves, fills and
# metadata. Any other op there computes something: attention computed by torch.
WRAPPER_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "scalar_tensor", "arange", "fill", "zero", "masked_fill", "copy", "_to_copy",
    "clone", "contiguous", "cat", "stack", "view", "reshape", "_unsafe_view", "_reshape_alias",
    "as_strided", "expand", "permute", "transpose", "t", "select", "slice", "narrow", "split",
    "split_with_sizes", "unbind", "unsqueeze", "squeeze", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "resolve_conj", "resolve_neg", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "is_contiguous",
})  # fmt: skip
# ... and these too where every tensor is integer or bool and none shares memory with a float
# argument: bookkeeping on lengths and tables (`int(seq_lens.max())`, `(seq_lens + 15) // 16`).
INTEGER_OPS = frozenset({
    "add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "neg", "abs", "pow", "clamp",
    "clamp_min", "clamp_max", "minimum", "maximum", "max", "min", "amax", "amin", "sum", "prod",
    "cumsum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "where", "any", "all", "nonzero",
    "sort", "argsort", "argmax", "argmin", "index", "index_select", "gather", "index_put",
    "masked_select", "_local_scalar_dense", "unique", "_unique2", "is_nonzero", "equal",
})  # fmt: skip


def wrapper_may_run(op: Any, args: tuple, kwargs: dict, float_memory: set[int]) -> bool:
    """Whether a kernel's Python wrapper may run aten `op` on `args`, `kwargs` (`WRAPPER_OPS`,
    `INTEGER_OPS`, or `index_put` of one value: a fill); `float_memory` holds the data pointers
    of the call's float arguments' storages."""
    import torch
    from torch.utils._pytree import tree_leaves

    name = op.overloadpacket.__name__.rstrip("_") if op.namespace == "aten" else ""
    if name in WRAPPER_OPS:
        return True
    values = args[2] if name == "index_put" and len(args) > 2 else None
    if isinstance(values, torch.Tensor) and values.numel() <= 1:
        return True
    tensors = [leaf for leaf in tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]
    return name in INTEGER_OPS and not any(
        tensor.layout != torch.strided
        or tensor.is_floating_point()
        or tensor.is_complex()
        or tensor.untyped_storage().data_ptr() in float_memory
        for tensor in tensors
    )


@contextlib.contextmanager
def guarded(modules: list, name: str) -> Iterator[list[str]]:
    """While the block runs, each call of the modules' function `name` (the candidate's kernel,
    called by a kit tool) runs under `torch_ops_outside_kernels`; yields what they ran."""
    seen: list[str] = []
    originals = [(module, getattr(module, name)) for module in modules if hasattr(module, name)]

    def watched(original: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            with torch_ops_outside_kernels([*args, *kwargs.values()]) as ops:
                value = original(*args, **kwargs)
            seen.extend(op for op in ops if op not in seen)
            return value

        return call

    for module, original in originals:
        setattr(module, name, watched(original))
    try:
        yield seen
    finally:
        for module, original in originals:
            setattr(module, name, original)


@contextlib.contextmanager
def torch_ops_outside_kernels(arguments: list) -> Iterator[list[str]]:
    """The names (`aten.bmm`) of the aten ops run in the block that `wrapper_may_run` refuses,
    each once, in the order first run: attention computed by torch, given the call's
    `arguments`. Ops run while a Triton kernel runs are not seen (`count_kernel_launches`)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    float_memory = {
        tensor.untyped_storage().data_ptr()
        for tensor in arguments
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point()
    } - {0}
    seen: list[str] = []

    class Recorder(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            """Torch's guard that keeps `torch.compile` out of the recorder, only where Dynamo
            is loaded (there it costs nothing): elsewhere nothing compiles, and the guard's
            first use would import `torch._dynamo`, 1.4 CPU-s of every worker."""
            return "torch._dynamo" in sys.modules

        def __torch_dispatch__(self, op: Any, types: Any, args: tuple = (), kwargs: Any = None):
            kwargs = kwargs or {}
            name = f"{op.namespace}.{op.overloadpacket.__name__}"
            if name not in seen and not wrapper_may_run(op, args, kwargs, float_memory):
                seen.append(name)
            return op(*args, **kwargs)

    with Recorder():
        yield seen
