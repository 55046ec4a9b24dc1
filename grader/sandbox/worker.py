"""The sandboxed worker: the only process that imports and runs a candidate's code.

The grader starts it as `python -S -s -P worker.py CONFIG_JSON` (`process.py`), or a zygote
forks it and calls `serve` (`zygote.py`), inside its own namespaces (`isolation.py`), so
neither site-packages' `.pth` files nor the kit's folders are on its import path. Where it
starts as root it first becomes the user it is told (`become`), and where it is told so it
forbids itself new processes (`seccomp.py`). Then it adds just the folders torch and triton
live in, and the folder holding its private copy of the submission, imported as the package
`submission`.

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
it refuses (`watchers.wrapper_may_run`) is attention computed by torch; with `strided`, its first
three arguments reach the wrapper as views of larger buffers (`workloads.strided`). The `workload`
op runs one of the kit's timed workloads (`workloads.py`) on an object of the candidate's.

A part that runs the candidate's code on the kit's allocator or manager gives this worker
stand-ins of their modules, which reach the kit's own worker on a pair of pipes (`kit_link`); that
worker is this file too, told to serve them and nothing else (`kit_server.py`).

The `batch` op runs several requests in turn, up to the first that raises, and replies `[their
values, that one's error or null]`; a request of the batch may take what an earlier one returned
as its object (`"handle": {"$earlier": index}`).

This file runs in the untrusted process and imports nothing from the kit by name: the codec
(`wire.py`), the watchers (`watchers.py`), the interpreter's speed-up (`interpreter.py`) and the
workloads (`workloads.py`) are loaded from the copies beside it. The grading process never
imports this file.
Nothing this process says is evidence: the grader checks every value it is sent, and what it
reports of itself (Triton launches, torch ops in the kernel's wrapper) only guides honest
candidates.
"""

import builtins
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback
import types
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
watchers = load_sibling("watchers")
interpreter = load_sibling("interpreter")
workloads = load_sibling("workloads")


class KitImportBlocker(importlib.abc.MetaPathFinder):
    """Refuses imports of the kit's own packages and records each attempt as an integrity event:
    a message of the kit's `checks` catalog, as its record (`grader/said.py`)."""

    def __init__(self, events: list[dict]) -> None:
        self.events = events

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.split(".")[0].startswith(KIT_PACKAGES):
            blocked = "tried to import {module} (blocked: the kit is not importable)"
            self.events.append({"id": blocked, "params": {"module": repr(fullname)}})
            raise ImportError(f"{fullname!r} cannot be imported while grading")
        return None


class Worker:
    """The objects the grader holds handles to, and the operations it may ask for."""

    def __init__(self, events: list[dict], tools: dict[str, str]) -> None:
        self.events = events
        self.tool_paths = tools
        self.tools: dict[str, Any] = {}
        self.objects: dict[int, Any] = {}
        self.next_handle = 1

    def tool(self, name: str) -> Any:
        """One of the kit's standalone helper modules (`launch.TOOLS`), loaded from its copy."""
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
            interpreter.speed_up()  # where the modules loaded Triton's interpreter
            if not request.get("count_launches"):
                return self.encode(function(*modules, *args, **kwargs))
            with (
                watchers.count_kernel_launches() as launches,
                watchers.guarded(modules, request["guarded"]) as ops,
            ):
                value = function(*modules, *args, **kwargs)
            return {"$tuple": [len(launches), ops, self.encode(value)]}
        if op == "launch":
            module = importlib.import_module(f"{PACKAGE}.{request['module']}")
            args = [on_kernel_device(arg) for arg in args]
            kwargs = {key: on_kernel_device(arg) for key, arg in kwargs.items()}
            if request.get("strided"):  # q, k_cache and v_cache as views of larger buffers
                args[:3] = [workloads.strided(arg) for arg in args[:3]]
            poison_allocator_like(args[0])
            interpreter.speed_up()
            with (
                watchers.count_kernel_launches() as launches,
                watchers.torch_ops_outside_kernels(args) as ops,
            ):
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
            return workloads.WORKLOADS[request["name"]](target, *args, **kwargs)
        raise ValueError(f"unknown op {op!r}")


def error_reply(error: BaseException) -> dict:
    """An exception as data: its class name, the names of its bases and a short traceback; the
    record of its message where it is a message of the kit's (`EngineError.said`)."""
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
        "said": said if isinstance(said := vars(error).get("said"), dict) else None,
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
    serve(config)


def serve(config: dict) -> None:
    """Answer the grader's requests on stdin, as `config` says, until stdin closes: this
    process as the grader started it (`main`), or forked by a zygote (`zygote.py`)."""
    if config["no_children"]:
        load_sibling("seccomp").forbid_processes()
    channel_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)  # a candidate's print() lands in the log, never on the channel
    sys.stdout = sys.stderr  # line-buffered: the log is complete when the grader reads it
    sys.path[:] = [path for path in sys.path if path and path not in config["site"]]
    sys.path += config["site"]
    sys.path.insert(0, config["package_parent"])
    events: list[dict] = []  # records of messages (`KitImportBlocker`)
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
