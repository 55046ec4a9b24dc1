"""The sandboxed worker: the only process that imports and runs a candidate's code.

The grader starts it as `python -S -s -P worker.py CONFIG_JSON` (see `sandbox.py`), so neither
site-packages' `.pth` files nor the kit's folders are on its import path; it adds just the
folders torch and triton live in, then the folder holding its private copy of the submission,
imported as the package `submission`.

It answers one JSON request per line on stdin with one JSON reply per line on the channel that
was its stdout; the candidate's own prints go to stderr (a log file the grader reads on a crash).
Values cross as JSON: None, bool, int, float, str, lists, and the tags below; everything else
stays here and crosses as a numbered handle.

    {"$tuple": [...]}, {"$dict": {...}}                 a tuple, a dict with str keys
    {"$tensor": {"dtype", "shape", "data": base64}}     a tensor's raw bytes (CPU, contiguous)
    {"$handle": n, "type": name, "methods": [...]}      an object that stays in the worker
    {"$ellipsis": true}, {"$slice": [start, stop, step]}, {"$iter": [...]}  (arguments only)

This file runs in the untrusted process and imports nothing from the kit; the grader imports it
only for `tensor_to_wire` / `tensor_from_wire`, which never unpickle.
"""

import base64
import builtins
import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

PACKAGE = "submission"
KIT_PACKAGES = ("grader", "kernels", "solutions", "exercises", "tests", "__editable__")
TENSOR_DTYPES = (
    "float16", "bfloat16", "float32", "float64", "bool", "uint8", "int8", "int16", "int32", "int64"
)  # fmt: skip


def tensor_to_wire(tensor: Any) -> dict:
    """A tensor as plain JSON: dtype name, shape and base64 of its bytes (copied to the CPU)."""
    import torch

    tensor = tensor.detach().to("cpu").contiguous()
    dtype = str(tensor.dtype).removeprefix("torch.")
    raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    data = base64.b64encode(raw).decode("ascii")
    return {"$tensor": {"dtype": dtype, "shape": list(tensor.shape), "data": data}}


def tensor_from_wire(wire: dict) -> Any:
    """The tensor `tensor_to_wire` encoded; only known dtypes, never a pickle."""
    import torch

    dtype_name, shape = wire["dtype"], [int(size) for size in wire["shape"]]
    if dtype_name not in TENSOR_DTYPES:
        raise ValueError(f"unexpected tensor dtype {dtype_name!r}")
    dtype = getattr(torch, dtype_name)
    raw = bytearray(base64.b64decode(wire["data"], validate=True))
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)


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
        """One of the kit's standalone helper modules (`sandbox.TOOLS`), loaded from its copy."""
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
        if value is None or kind in (bool, int, float, str):
            return value
        if kind is list:
            return [self.encode(item) for item in value]
        if kind is tuple:
            return {"$tuple": [self.encode(item) for item in value]}
        if kind is dict and all(type(key) is str for key in value):
            return {"$dict": {key: self.encode(item) for key, item in value.items()}}
        if "torch" in sys.modules and isinstance(value, sys.modules["torch"].Tensor):
            return tensor_to_wire(value)
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
            return [self.decode(item) for item in value]
        if not isinstance(value, dict):
            return value
        if "$handle" in value:
            return self.objects[value["$handle"]]
        if "$tuple" in value:
            return tuple(self.decode(item) for item in value["$tuple"])
        if "$iter" in value:
            return iter([self.decode(item) for item in value["$iter"]])
        if "$tensor" in value:
            return tensor_from_wire(value["$tensor"])
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
        if op == "hello":
            return {"python": sys.version.split()[0], "pid": os.getpid()}
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
            with count_kernel_launches() as launches:
                value = function(*modules, *args, **kwargs)
            return {"$tuple": [len(launches), self.encode(value)]}
        if op == "launch":
            module = importlib.import_module(f"{PACKAGE}.{request['module']}")
            args = [on_kernel_device(arg) for arg in args]
            kwargs = {key: on_kernel_device(arg) for key, arg in kwargs.items()}
            poison_allocator_like(args[0])
            with count_kernel_launches() as launches:
                value = getattr(module, request["name"])(*args, **kwargs)
            return {"$tuple": [len(launches), self.encode(value)]}
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
            return len(target)
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
    """Records each launch of a `@triton.jit` kernel (compiled or interpreted) in the block."""
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    launches: list = []
    originals = {kind: kind.run for kind in (JITFunction, InterpretedFunction)}

    def counting(original: Callable) -> Callable:
        def run(self: Any, *args: Any, warmup: bool = False, **kwargs: Any) -> Any:
            if not warmup:
                launches.append(getattr(self, "__name__", "kernel"))
            return original(self, *args, warmup=warmup, **kwargs)

        return run

    for kind, original in originals.items():
        kind.run = counting(original)
    try:
        yield launches
    finally:
        for kind, original in originals.items():
            kind.run = original


# -- timed workloads: kit code, run here so that the grader times whole loops, not round trips --


def allocate_free_rounds(allocator: Any, batch: int, rounds: int) -> int:
    """`rounds` times: allocate `batch` blocks and free them again; returns the blocks handed."""
    handed = 0
    for _ in range(rounds):
        ids = allocator.allocate(batch)
        allocator.free(ids)
        handed += len(ids)
    return handed


def gather_rounds(manager: Any, requests: list, rounds: int) -> list:
    """`rounds` times: bump one cached value, then gather every request.

    Returns the bumped value as the last gather read it (== `rounds`: a gather that serves stale
    results is caught) and the shapes of the last gathers.
    """
    pool, first_block = manager.physical_kv_cache, requests[0].block_table[0]
    pool[first_block, 0, 0] = 0.0
    gathered = []
    for _ in range(rounds):
        pool[first_block, 0, 0] += 1.0
        gathered = [manager.get_physical_cache(request) for request in requests]
    return [float(gathered[0][0, 0]), [list(tensor.shape) for tensor in gathered]]


def slot_mapping_rounds(manager: Any, requests: list, rounds: int) -> list:
    """`rounds` times: the slot mapping of every request; returns the shapes of the last ones."""
    slots = []
    for _ in range(rounds):
        slots = [manager.slot_mapping(request) for request in requests]
    return [list(tensor.shape) for tensor in slots]


WORKLOADS: dict[str, Callable[..., Any]] = {
    "allocate_free_rounds": allocate_free_rounds,
    "gather_rounds": gather_rounds,
    "slot_mapping_rounds": slot_mapping_rounds,
}


def main() -> None:
    config = json.loads(sys.argv[1])
    channel_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)  # a candidate's print() lands in the log, never on the channel
    sys.stdout = sys.stderr  # line-buffered: the log is complete when the grader reads it
    sys.path[:] = [path for path in sys.path if path] + config["site"]
    sys.path.insert(0, config["package_parent"])
    events: list[str] = []
    sys.meta_path.insert(0, KitImportBlocker(events))
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
