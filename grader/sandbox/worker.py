"""The sandboxed worker: the only process that imports and runs a candidate's code.

The grader starts it as `python -S -s -P worker.py CONFIG_JSON` (`process.py`), inside its own
namespaces (`isolation.py`), so neither site-packages' `.pth` files nor the kit's folders are
on its import path. Where it starts as root it first becomes the user it is told (`become`),
and where it is told so it forbids itself new processes (`seccomp.py`). Then it adds just the
folders torch and triton live in, and the folder holding its private copy of the submission,
imported as the package `submission`.

It answers one JSON request per line on stdin with one JSON reply per line on the channel that
was its stdout; the candidate's own prints go to stderr (a log file the grader reads on a crash).
Values cross as JSON: None, bool, int, float, str, lists, and the tags below; everything else
stays here and crosses as a numbered handle.

    {"$tuple": [...]}, {"$dict": {...}}                 a tuple, a dict with str keys
    {"$tensor": {"dtype", "shape", "data": base64}}     a tensor's raw bytes (CPU, contiguous)
    {"$handle": n, "type": name, "methods": [...]}      an object that stays in the worker
    {"$ellipsis": true}, {"$slice": [start, stop, step]}, {"$iter": [...]}  (arguments only)

The `launch` op calls a kernel's wrapper and replies `(Triton kernel launches, the aten ops it ran
outside them that no wrapper needs, its value)`: a torch dispatch mode watches the call, and what
it refuses (`wrapper_may_run`) is attention computed by torch.

A part that runs the candidate's code on the kit's allocator or manager gives this worker
stand-ins of their modules, which reach the kit's own worker on a pair of pipes (`kit_link`); that
worker is this file too, told to serve them and nothing else (`kit_server.py`).

The `batch` op runs several requests in turn, up to the first that raises, and replies `[their
values, that one's error or null]`; a request of the batch may take what an earlier one returned
as its object (`"handle": {"$earlier": index}`).

This file runs in the untrusted process and imports nothing from the kit by name: the codec
(`wire.py`) is loaded from the copy beside it. The grading process never imports this file.
Nothing this process says is evidence: the grader checks every value it is sent, and what it
reports of itself (Triton launches, torch ops in the kernel's wrapper) only guides honest
candidates.
"""

import builtins
import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any, TextIO

PACKAGE = "submission"
KIT_PACKAGES = ("grader", "kernels", "full_kit", "solutions", "exercises", "tests", "__editable__")


def load_sibling(name: str) -> Any:
    """A module of the kit's that sits beside this file (the wire codec), loaded by its path:
    the worker imports nothing from the kit by name."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"kit_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


wire = load_sibling("wire")


class KitImportBlocker(importlib.abc.MetaPathFinder):
    """Refuses imports of the kit's own packages and records each attempt as an integrity event."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.split(".")[0].startswith(KIT_PACKAGES):
            self.events.append(f"tried to import {fullname!r} (blocked: the kit is not importable)")
            raise ImportError(f"{fullname!r} cannot be imported while grading")
        return None


class Worker:
    """The objects the grader holds handles to, and the operations it may ask for."""

    def __init__(self, events: list[str], tools: dict[str, str]) -> None:
        self.events = events
        self.tool_paths = tools
        self.tools: dict[str, Any] = {}
        self.objects: dict[int, Any] = {}
        self.next_handle = 1

    def tool(self, name: str) -> Any:
        """One of the kit's standalone helper modules (`process.TOOLS`), loaded from its copy."""
        if name not in self.tools:
            spec = importlib.util.spec_from_file_location(f"kit_tool_{name}", self.tool_paths[name])
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self.tools[name] = module
        return self.tools[name]

    # -- values in and out -------------------------------------------------------------------

    def encode(self, value: Any) -> Any:
        """Plain values by value, tensors by their bytes, anything else as a handle."""
        kind = type(value)
        if kind in wire.PLAIN_TYPES:
            return value
        if kind is list:
            return list(value) if wire.plain_items(value) else [self.encode(item) for item in value]
        if kind is tuple:
            return {"$tuple": [self.encode(item) for item in value]}
        if kind is dict and all(type(key) is str for key in value):
            return {"$dict": {key: self.encode(item) for key, item in value.items()}}
        if "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor):
            return wire.tensor_to_wire(value)
        return self.handle(value)

    def handle(self, value: Any) -> dict:
        number, self.next_handle = self.next_handle, self.next_handle + 1
        self.objects[number] = value
        kind = type(value)
        try:
            methods = [
                name
                for name in dir(kind)
                if not name.startswith("_") and callable(getattr(kind, name, None))
            ]
        except Exception:
            methods = []
        return {"$handle": number, "type": kind.__qualname__, "methods": methods}

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return value if wire.plain_items(value) else [self.decode(item) for item in value]
        if not isinstance(value, dict):
            return value
        if "$handle" in value:
            return self.objects[value["$handle"]]
        if "$tuple" in value:
            return tuple(self.decode(item) for item in value["$tuple"])
        if "$iter" in value:
            return iter([self.decode(item) for item in value["$iter"]])
        if "$tensor" in value:
            return wire.tensor_from_wire(value["$tensor"])
        if "$slice" in value:
            return slice(*value["$slice"])
        if "$ellipsis" in value:
            return Ellipsis
        raise ValueError(f"unknown tag in {sorted(value)}")

    # -- operations --------------------------------------------------------------------------

    def run(self, request: dict) -> Any:
        for number in request.get("release", ()):
            self.objects.pop(number, None)
        op = request["op"]
        args = [self.decode(arg) for arg in request.get("args", ())]
        kwargs = {key: self.decode(arg) for key, arg in request.get("kwargs", {}).items()}
        if op == "import":
            importlib.import_module(f"{PACKAGE}.{request['module']}")
            return None
        if op == "new":
            module = importlib.import_module(f"{PACKAGE}.{request['module']}")
            return self.encode(getattr(module, request["name"])(*args, **kwargs))
        if op == "tool":
            modules = [
                importlib.import_module(f"{PACKAGE}.{name}") for name in request.get("modules", ())
            ]
            function = getattr(self.tool(request["tool"]), request["name"])
            if not request.get("count_launches"):
                return self.encode(function(*modules, *args, **kwargs))
            with count_kernel_launches() as launches, guarded(modules, request["guarded"]) as ops:
                value = function(*modules, *args, **kwargs)
            return {"$tuple": [len(launches), ops, self.encode(value)]}
        if op == "launch":
            module = importlib.import_module(f"{PACKAGE}.{request['module']}")
            args = [on_kernel_device(arg) for arg in args]
            kwargs = {key: on_kernel_device(arg) for key, arg in kwargs.items()}
            poison_allocator_like(args[0])
            with count_kernel_launches() as launches, torch_ops_outside_kernels(args) as ops:
                value = getattr(module, request["name"])(*args, **kwargs)
            return {"$tuple": [len(launches), list(ops), self.encode(value)]}
        if op == "batch":  # several requests in one round trip, up to the first that raises
            values = []
            for each in request["requests"]:
                try:
                    if isinstance(each.get("handle"), dict):  # what an earlier request returned
                        returned = values[each["handle"]["$earlier"]]
                        if not (isinstance(returned, dict) and "$handle" in returned):
                            raise TypeError(f"{returned!r:.80} is a value, not an object here")
                        each["handle"] = returned["$handle"]
                    values.append(self.run(each))
                except BaseException as error:  # the candidate's exception is the result
                    return [values, error_reply(error)]
            return [values, None]
        target = self.objects[request["handle"]]
        if op == "call":
            return self.encode(getattr(target, request["name"])(*args, **kwargs))
        if op == "getattr":
            value = getattr(target, request["name"])
            return self.handle(value) if request.get("as_handle") else self.encode(value)
        if op == "getattrs":
            return [self.encode(getattr(target, name)) for name in request["names"]]
        if op == "setattr":
            setattr(target, request["name"], args[0])
            return None
        if op == "getitem":
            return self.encode(target[args[0]])
        if op == "setitem":
            target[args[0]] = args[1]
            return None
        if op == "len":
            return len(getattr(target, request["name"]) if "name" in request else target)
        if op == "workload":
            return WORKLOADS[request["name"]](target, *args, **kwargs)
        raise ValueError(f"unknown op {op!r}")


def error_reply(error: BaseException) -> dict:
    """An exception as data: its class name, the names of its bases and a short traceback."""
    names = [kind.__name__ for kind in type(error).__mro__]
    builtin = next(
        (name for name in names if isinstance(getattr(builtins, name, None), type)), "Exception"
    )
    frames = error.__traceback__
    while frames is not None and frames.tb_frame.f_code.co_filename == __file__:
        frames = frames.tb_next  # the worker's own frames say nothing to the candidate
    shown = traceback.format_exception(type(error), error, frames, limit=-8)
    return {
        "type": type(error).__qualname__,
        "builtin": builtin,
        "message": str(error)[:2000],
        "traceback": "".join(shown)[-6000:],
    }


def on_kernel_device(value: Any) -> Any:
    """A tensor argument where the kernel runs: tensors cross the wire on the CPU, and a worker
    with CUDA that is not interpreting (`TRITON_INTERPRET`) runs the kernel natively on it."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not isinstance(value, torch.Tensor):
        return value
    if not torch.cuda.is_available():
        raise RuntimeError(
            "the grader runs the kernel natively, but this worker sees no CUDA device: a problem "
            "of the grading machine, not of the submission"
        )
    return value.to("cuda")


def poison_allocator_like(tensor: Any) -> None:
    """Fill, then release, memory the size of `tensor`: an output the next call allocates and
    does not fully write then likely reads NaN, not the zeros of fresh pages."""
    import torch

    if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
        torch.full_like(tensor, float("nan"))


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
        def __torch_dispatch__(self, op: Any, types: Any, args: tuple = (), kwargs: Any = None):
            kwargs = kwargs or {}
            name = f"{op.namespace}.{op.overloadpacket.__name__}"
            if name not in seen and not wrapper_may_run(op, args, kwargs, float_memory):
                seen.append(name)
            return op(*args, **kwargs)

    with Recorder():
        yield seen


# -- timed workloads: kit code, run here so that the grader times whole loops, not round trips --
# Each returns evidence of its work that the grading process checks against what it asked for
# (`grader.checks.allocator_timing`, `grader.checks.gather_timing`): what a call asks comes with
# it, drawn afresh each time, so that no answer can be prepared before it. The gather's sums
# weigh every token and lane of its rows, and the slot mapping's every token and slot: no sum of
# the pool or of the signs made once per call stands in for a round's work.


def allocate_free_rounds(allocator: Any, sizes: list) -> list:
    """For each of `sizes`: allocate that many blocks, then free the ones the allocation before
    got (the last at the end). Returns the ids each allocation handed out, a list per call."""
    handed, previous = [], []
    for size in sizes:
        ids = allocator.allocate(size)
        allocator.free(previous)
        handed.append(list(ids))
        previous = ids
    allocator.free(previous)
    return handed


def shuffle_tables(manager: Any, requests: list, generator: Any) -> None:
    """Give each request a fresh block table: the next blocks its `seq_len` needs from a random
    permutation of the manager's pool, drawn from `generator`."""
    import torch

    order = torch.randperm(manager.num_blocks, generator=generator).tolist()
    start = 0
    for request in requests:
        used = -(-request.seq_len // manager.block_size)
        request.block_table = order[start : start + used]
        start += used


def signs(shape: tuple, generator: Any, dtype: Any) -> Any:
    """A tensor of `shape` and `dtype` of +1 and -1, drawn from `generator`."""
    import torch

    return torch.randint(0, 2, shape, generator=generator, dtype=dtype) * 2 - 1


def weighed_rounds(
    manager: Any, requests: list, rounds: int, generator: Any, call: Any, weights: list, weigh: Any
) -> list:
    """`rounds` times: fresh block tables for the requests (`shuffle_tables`), then `call` of
    each, weighed by `weigh(result, weight)` where its shape is its weight's. Returns the shapes
    of the last round's results and, per round, the sum of the weighings."""
    sums = []
    for _ in range(rounds):
        shuffle_tables(manager, requests, generator)
        total, shapes = 0.0, []
        for request, weight in zip(requests, weights, strict=True):
            result = call(request)
            shapes.append(list(result.shape))
            if result.shape == weight.shape:
                total += weigh(result, weight)
        sums.append(total)
    return [shapes, sums]


def gather_rounds(manager: Any, requests: list, seed: int, rounds: int) -> list:
    """`weighed_rounds` of `get_physical_cache`: each request's rows weighed by `signs` per token
    and lane, drawn from `seed` first (the pool holds whole numbers: the sums are exact)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    lanes = manager.head_dim
    weights = [signs((r.seq_len, lanes), generator, torch.float32) for r in requests]
    return weighed_rounds(
        manager, requests, rounds, generator, manager.get_physical_cache, weights,
        lambda rows, weight: float((weight * rows).sum()),
    )  # fmt: skip


def slot_mapping_rounds(manager: Any, requests: list, seed: int, rounds: int) -> list:
    """`weighed_rounds` of `slot_mapping`: a whole number per slot of the pool, `values[slots]`,
    weighed by `signs` per token, each drawn from `seed` first (float64 whole numbers: the sums
    are exact)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    slots_in_pool = manager.num_blocks * manager.block_size
    values = torch.randint(0, 1 << 20, (slots_in_pool,), generator=generator, dtype=torch.float64)
    weights = [signs((r.seq_len,), generator, torch.float64) for r in requests]
    return weighed_rounds(
        manager, requests, rounds, generator, manager.slot_mapping, weights,
        lambda slots, weight: float(values[slots] @ weight),
    )  # fmt: skip


WORKLOADS: dict[str, Callable[..., Any]] = {
    "allocate_free_rounds": allocate_free_rounds,
    "gather_rounds": gather_rounds,
    "slot_mapping_rounds": slot_mapping_rounds,
}


def kit_link(channel_in: TextIO, channel_out: TextIO) -> types.ModuleType:
    """The module `kit_link`, for the stand-ins of the kit's modules (`stand_ins/`), once the
    kit's worker says it is ready: its `ask(message)` sends `message` to the kit's worker, on the
    pipes the grader gave the two, and returns the answer, `{"ok": value}` or `{"error": {"type",
    "builtin", "message"}}`. Where the kit's worker is gone, this worker ends too (the grader
    then starts both afresh for the next check): nothing the candidate's code catches."""

    def line() -> str:
        read = channel_in.readline()
        if not read:
            print("the kit's worker, which serves this part's kit objects, stopped", flush=True)
            os._exit(70)
        return read

    def ask(message: dict) -> dict:
        channel_out.write(json.dumps(message) + "\n")
        channel_out.flush()
        return json.loads(line())

    line()  # {"ready": true}
    module = types.ModuleType("kit_link")
    module.ask = ask
    return module


def answer_key_module(name: str) -> types.ModuleType:
    """One of the kit's modules, in the kit's worker, whose package is the answer key's files."""
    return importlib.import_module(f"{PACKAGE}.{name}")


def become(user: int) -> None:
    """Become `user` (uid and gid, no other group) before any other code runs. The grader runs as
    root, and bubblewrap left this process root with its capabilities dropped but the two that
    allow this, which changing the uid takes away."""
    os.setgroups([])
    os.setresgid(user, user, user)
    os.setresuid(user, user, user)
    if 0 in os.getresuid():
        raise SystemExit("the worker could not give up root, so it runs no submission")


def main() -> None:
    config = json.loads(sys.argv[1])
    if config["user"] is not None:
        become(config["user"])
    if config["no_children"]:
        load_sibling("seccomp").forbid_processes()
    channel_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)  # a candidate's print() lands in the log, never on the channel
    sys.stdout = sys.stderr  # line-buffered: the log is complete when the grader reads it
    sys.path[:] = [path for path in sys.path if path] + config["site"]
    sys.path.insert(0, config["package_parent"])
    events: list[str] = []
    sys.meta_path.insert(0, KitImportBlocker(events))
    if config["kit_modules"]:  # the kit's worker, for a candidate's stand-ins (`kit_server.py`)
        for name in config["kit_modules"]:  # before it says it is ready: torch takes a while
            answer_key_module(name)
        load_sibling("kit_server").serve(channel_in, channel_out, answer_key_module)
        return
    if config["kit_link"]:
        reads, writes = config["kit_link"]
        sys.modules["kit_link"] = kit_link(os.fdopen(reads, "r"), os.fdopen(writes, "w"))
    worker = Worker(events, config.get("tools", {}))
    for line in channel_in:
        request = json.loads(line)
        try:
            reply = {"ok": worker.run(request)}
        except BaseException as error:  # the candidate's exception is the result
            reply = {"error": error_reply(error)}
        reply["events"], events[:] = list(events), []
        channel_out.write(json.dumps(reply) + "\n")
        channel_out.flush()


if __name__ == "__main__":
    main()
