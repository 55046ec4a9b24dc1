"""Candidate objects as local-looking proxies, so that checks read like ordinary code.

    allocator = submission.module("block_allocator").BlockAllocator(8)   # built in the worker
    ids = allocator.allocate(3)        # a plain list, decoded from JSON
    with pytest.raises(ValueError):    # the candidate's ValueError, re-raised here
        allocator.free([ids[0], ids[0]])

Plain values and tensors come back by value; any other object stays in the worker and comes back
as a `Remote` handle. An exception the candidate's code raises comes back as a `RemoteError` that
is also an instance of the nearest built-in class it derives from (so `pytest.raises(ValueError)`
works), except `NotImplementedError`, which ends the check as "not implemented" (it is a
`RuntimeError`, and must never pass for the `RuntimeError` of running out of blocks).

Every call is written to the submission's `Transcript` (`transcript.py`): after a failure it is
the counterexample, as code the candidate can paste and run.
"""

import builtins
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from grader.said import from_record, said
from grader.sandbox.process import (
    BadReply,
    ImportFailed,
    NotCalled,
    NotImplementedInSubmission,
    NotSubmitted,
    Sandbox,
    SubmissionFailure,
)
from grader.sandbox.transcript import (
    SHOWN_RESULT_CHARS,
    Handle,
    Iter,
    Line,
    Shown,
    Transcript,
    one_line,
)
from grader.sandbox.wire import plain_items, tensor_from_wire, tensor_to_wire
from grader.text import clean

READS = frozenset({"getattr", "getattrs", "len", "getitem"})  # requests that change nothing
# Lists, tuples and dicts nested in a returned value, at most: far more than any value of the
# contract's, and few enough for this process's recursive code (`decode`, `Transcript.code`).
VALUE_DEPTH = 100


class RemoteError(Exception):
    """An exception raised by the candidate's code in the worker."""

    def __init__(self, type_name: str, message: str, traceback: str) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name, self.message, self.traceback = type_name, message, traceback
        self.recorded: tuple[Transcript, Line] | None = None
        self.candidates = True  # raised in the candidate's worker, not the answer key's

    def expected(self, kind: type[Exception], required: bool = True) -> None:
        """The check wanted this exception: the counterexample's line becomes `assert
        raises(kind, lambda: ...)` (without `assert` where the check only tolerated it)."""
        if self.recorded is not None:
            transcript, line = self.recorded
            transcript.expect_raise(line, kind, required)


_error_classes: dict[tuple[str, str], type[RemoteError]] = {}
MAX_ERROR_CLASSES = 1000  # a submission may invent any number of exception names


def remote_error(info: dict) -> RemoteError:
    """A `RemoteError` subclass named like the candidate's class, under its nearest built-in;
    its name, message and traceback cleaned and bounded (`text.clean`): the candidate wrote them."""
    builtin = getattr(builtins, str(info.get("builtin")), Exception)
    if not (isinstance(builtin, type) and issubclass(builtin, Exception)):
        builtin = Exception
    type_name = info.get("type")
    if not isinstance(type_name, str) or not type_name.replace(".", "_").isidentifier():
        type_name = "Exception"
    type_name = type_name[:80]
    message, traceback = clean(str(info.get("message"))), clean(str(info.get("traceback")), 4000)
    kits = from_record(info.get("said"), len(message))  # the kit's own message (`stop`), or None
    message = kits if kits is not None and kits == message else message
    for base in builtin.__mro__:  # the nearest built-in whose constructor takes one message
        key = (type_name, base.__name__)
        if key not in _error_classes and len(_error_classes) < MAX_ERROR_CLASSES:
            bases = (RemoteError,) if base in (Exception, BaseException) else (RemoteError, base)
            _error_classes[key] = type(type_name, bases, {})
        try:
            return _error_classes.get(key, RemoteError)(type_name, message, traceback)
        except TypeError:
            continue
    return RemoteError(type_name, message, traceback)


class Submission:
    """The candidate's package in a worker: modules to build objects from."""

    def __init__(self, sandbox: Sandbox, package: str) -> None:
        self.sandbox = sandbox
        interpreted = sandbox.extra_env.get("TRITON_INTERPRET") == "1"
        self.transcript = Transcript(package, interpreted)
        self.import_failures: dict[str, ImportFailed] = {}
        self.imported: set[str] = set()

    def module(self, name: str) -> "RemoteModule":
        """`submission.<name>`, imported in the worker once; a failed import fails every later
        use of the module in this grading, in every part the worker serves, restarts included
        (not one refused before it was tried: `NotCalled`, or the part's budget spent)."""
        if f"{name}.py" not in self.sandbox.files:
            raise NotSubmitted(said("{file} was not submitted", file=f"{name}.py"))
        if name in self.import_failures:
            raise self.import_failures[name]
        if self.sandbox.process is None:
            self.imported.clear()
        if name not in self.imported:
            try:
                seconds = self.sandbox.limits.import_seconds
                self.call({"op": "import", "module": name}, f"import {name}", seconds)
            except (Exception, SubmissionFailure) as error:
                if self.sandbox.budget_spent() or isinstance(error, NotCalled):
                    raise
                failure = ImportFailed(
                    said("{file} could not be imported: {error}", file=f"{name}.py", error=error)
                )
                self.import_failures[name] = failure
                raise failure from None
            self.imported.add(name)
        return RemoteModule(self, name)

    def tool(self, tool: str, function: str, *args: Any, modules: tuple[str, ...] = (),
             watch: str | None = None, seconds: float | None = None,
             **kwargs: Any) -> Any:  # fmt: skip
        """`function(*modules, *args, **kwargs)` of the kit's helper `tool` (`launch.TOOLS`),
        run in the worker on the submission's `modules` (imported there first), within `seconds`
        (default: the per-call limit). With `watch`, the name of a candidate's function the tool
        calls: `(Triton kernel launches during the call, the aten ops that function ran outside
        them and may not (watchers.wrapper_may_run), the tool's value)`."""
        for name in modules:
            self.module(name)
        message = self.call_message("tool", args, kwargs, tool=tool, name=function)
        message |= {"modules": list(modules), "count_launches": watch is not None}
        message |= {"guarded": watch} if watch else {}
        shown = ", ".join([*modules, self.transcript.arguments(args, kwargs)]).strip(", ")
        return self.remote_call(message, f"{tool}.{function}({shown})", seconds=seconds)

    def call(self, message: dict, description: str, seconds: float | None = None) -> Any:
        """One request to the worker, within `seconds` (default: the per-call limit); its value
        decoded, or the candidate's exception raised."""
        reply = self.sandbox.request(message, seconds or self.sandbox.limits.call_seconds)
        if "error" in reply:
            raise self.raised(reply["error"], description)
        return self.decoded(reply["ok"], description)

    def batch(self, requests: list["Batched"]) -> Iterator[Any]:
        """`requests` (as `attribute`, `length`, `method` and `fields_of_earlier` make them) in
        one round trip, run in order up to the first that raises.

        Their values come one by one, each decoded and entered in the transcript when the check
        takes it, as its own request would be then; the request that raised raises in its turn.
        A check that takes them in order, of attributes and methods the object has, leaves the
        transcript one request each would. The limits of one request hold for the whole batch:
        its time, its reply's size and the integrity events it may add."""
        if not requests:
            raise ValueError("a batch of no requests")
        message = {"op": "batch", "requests": [request.message for request in requests]}
        reply = self.sandbox.request(message, self.sandbox.limits.call_seconds)
        match reply.get("ok"):
            case [list(values), None] if len(values) == len(requests):
                error = None
            case [list(values), dict(error)] if len(values) < len(requests):
                pass
            case _:
                self.sandbox.fail(BadReply("the worker's reply to a batch is malformed"))
        return self.taken(requests, values, error)

    def taken(self, requests: list["Batched"], values: list, error: dict | None) -> Iterator[Any]:
        """`batch`'s values, each decoded and entered in the transcript as it is taken; then the
        error of the request that raised."""
        for request, value in zip(requests, values, strict=False):
            decoded = self.decoded(value, request.description)
            name_hint = request.message["name"] if request.message["op"] == "getattr" else None
            yield self.entered(request.message, request.line, decoded, name_hint)
        if error is not None:
            request = requests[len(values)]
            failure = self.raised(error, request.description)
            if isinstance(failure, RemoteError):
                self.entered_error(request.line, failure)
            raise failure

    def raised(self, info: dict, description: str) -> RemoteError | NotImplementedInSubmission:
        """What the candidate's code raised in the worker (`info`), to raise here."""
        if info.get("builtin") == "NotImplementedError":
            return NotImplementedInSubmission(
                said("{call} raises NotImplementedError", call=description)
            )
        error = remote_error(info)
        error.candidates = not self.sandbox.answer_key
        return error

    def decoded(self, value: Any, description: str) -> Any:
        """`value` as the worker encoded it, decoded; a malformed one fails the check."""
        try:
            return self.decode(value)
        except Exception as error:  # every malformed value is the worker's doing
            self.sandbox.fail(
                BadReply(
                    said(
                        "the worker's reply to {call} is malformed: {error}",
                        call=description,
                        error=error,
                    )
                )
            )

    def call_message(self, op: str, args: tuple, kwargs: dict, **fields: Any) -> dict:
        """A request to call something in the worker with `args` and `kwargs`, encoded."""
        encoded = {key: self.encode(arg) for key, arg in kwargs.items()}
        return {"op": op, **fields, "args": self.encode(list(args)), "kwargs": encoded}

    def encode(self, value: Any) -> Any:
        if isinstance(value, Shown):
            return self.encode(value.value)
        if isinstance(value, Remote):
            return {"$handle": object.__getattribute__(value, "_handle")}
        if isinstance(value, torch.Tensor):
            return tensor_to_wire(value)
        if isinstance(value, list):
            return list(value) if plain_items(value) else [self.encode(item) for item in value]
        if isinstance(value, tuple):
            return {"$tuple": [self.encode(item) for item in value]}
        if isinstance(value, Iter):
            return {"$iter": self.encode(value.items)}
        if isinstance(value, slice):
            return {"$slice": [value.start, value.stop, value.step]}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if value is None or type(value) in (bool, int, float, str):
            return value
        raise TypeError(f"cannot send {type(value).__name__} to the worker")

    def decode(self, value: Any, depth: int = VALUE_DEPTH) -> Any:
        if depth < 0:
            raise ValueError(f"a value nested more than {VALUE_DEPTH} deep")
        if isinstance(value, list):
            if plain_items(value):
                return value
            return [self.decode(item, depth - 1) for item in value]
        if not isinstance(value, dict):
            return value
        if "$tuple" in value:
            return tuple(self.decode(item, depth - 1) for item in value["$tuple"])
        if "$dict" in value:
            return {key: self.decode(item, depth - 1) for key, item in value["$dict"].items()}
        if "$tensor" in value:
            return tensor_from_wire(value["$tensor"])
        if "$handle" in value:
            type_name, methods = value["type"], value["methods"]
            if not (isinstance(type_name, str) and type_name.isidentifier()):
                raise ValueError(f"a handle's type is not a name: {str(type_name)[:80]!r}")
            return Remote(self, int(value["$handle"]), type_name[:80], [str(m) for m in methods])
        raise ValueError(f"unexpected value from the worker: {sorted(value)}")

    def remote_call(
        self,
        message: dict,
        line: str,
        name_hint: str | None = None,
        seconds: float | None = None,
        call: str = "",
    ) -> Any:
        """A request that goes into the transcript as `line` (`call`: the same as an expression,
        where `line` is a statement), with its result or exception."""
        try:
            value = self.call(message, line.split("(")[0], seconds)
        except RemoteError as error:
            self.entered_error(line, error, call)
            raise
        return self.entered(message, line, value, name_hint, call)

    def entered(
        self, message: dict, line: str, value: Any, name_hint: str | None = None, call: str = ""
    ) -> Any:
        """`value`, what `message` returned, entered in the transcript as `line`."""
        transcript = self.transcript
        if isinstance(value, Remote):
            variable = transcript.variable(name_hint or value._type)
            object.__setattr__(value, "_name", variable)
            transcript.record(line, value=value, code=f"{variable} = {line}")
        elif value is None:
            transcript.record(line, call=call)
        else:
            outcome = f"-> {transcript.code(value, SHOWN_RESULT_CHARS)}"
            transcript.record(line, outcome, value=value, read=message["op"] in READS)
        return value

    def entered_error(self, line: str, error: RemoteError, call: str = "") -> None:
        """`error`, what the request on `line` raised, entered in the transcript."""
        raised = said("raises {error}", error=one_line(error, SHOWN_RESULT_CHARS - len("raises ")))
        recorded = self.transcript.record(line, raised, call=call, raised=True)
        error.recorded = (self.transcript, recorded)


class RemoteModule:
    """A module of the submission; calling one of its attributes builds an object in the worker."""

    def __init__(self, submission: Submission, name: str) -> None:
        self.submission, self.name = submission, name

    def call_counting_launches(
        self, function: str, *args: Any, strided: bool = False, **kwargs: Any
    ) -> tuple[int, tuple[str, ...], Any]:
        """`function(*args, **kwargs)` (a kernel's wrapper): how many `@triton.jit` kernels it
        launched, the aten ops it ran outside them that no wrapper needs
        (`watchers.wrapper_may_run`: attention computed by torch, e.g. `("aten.bmm",
        "aten._softmax")`), and its value. With `strided`, the first three arguments reach it as
        views of larger buffers (`workloads.strided`)."""
        submission = self.submission
        submission.transcript.imports.setdefault(self.name, set()).add(function)
        message = submission.call_message(
            "launch", args, kwargs, module=self.name, name=function, strided=strided
        )
        transcript = submission.transcript
        line = f"{function}({transcript.arguments(args, kwargs)})"
        try:
            reply = submission.call(message, function)
        except RemoteError as error:
            submission.entered_error(line, error)
            raise
        match reply:
            case (int(launches), list(ops), value) if all(type(op) is str for op in ops):
                torch_ops = tuple(clean(op, 80) for op in ops[:20])
            case _:
                submission.sandbox.fail(
                    BadReply(said("the worker's reply to {call} is malformed", call=function))
                )
        room = SHOWN_RESULT_CHARS - len(f"-> , {launches} Triton kernel launch(es)")
        outcome = said(
            "-> {value}, {launches} Triton kernel launch(es)",
            value=one_line(transcript.code(value, room), room),
            launches=launches,
        )
        transcript.record(line, outcome, value=value)
        return launches, torch_ops, value

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)

        def build(*args: Any, **kwargs: Any) -> Any:
            submission = self.submission
            submission.transcript.imports.setdefault(self.name, set()).add(attribute)
            message = submission.call_message("new", args, kwargs, module=self.name, name=attribute)
            line = f"{attribute}({submission.transcript.arguments(args, kwargs)})"
            return submission.remote_call(message, line)

        return build


class Remote(Handle):
    """An object that lives in the worker: attribute reads, method calls, `len`, `[]`."""

    __slots__ = ("__weakref__", "_handle", "_methods", "_submission", "_type")

    def __init__(self, submission: Submission, handle: int, type_name: str, methods: list) -> None:
        for slot, value in [
            ("_submission", submission),
            ("_handle", handle),
            ("_type", type_name),
            ("_methods", frozenset(methods)),
            ("_name", "obj"),
        ]:
            object.__setattr__(self, slot, value)
        sandbox = submission.sandbox
        weakref.finalize(self, sandbox.release, handle, sandbox.generation)

    def _request(
        self, op: str, line: str, name_hint: str | None = None, call: str = "", **fields: Any
    ) -> Any:
        message = {"op": op, "handle": self._handle, "type": self._type, **fields}
        return self._submission.remote_call(message, line, name_hint, call=call)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in self._methods:
            return RemoteMethod(self, name)
        return self._request("getattr", f"{self._name}.{name}", name_hint=name, name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        code = self._submission.transcript.code(value)
        encoded = self._submission.encode([value])
        line, call = f"{self._name}.{name} = {code}", f"setattr({self._name}, {name!r}, {code})"
        self._request("setattr", line, call=call, name=name, args=encoded)

    def fields(self, *names: str) -> tuple:
        """The attributes `names`, read in one round trip."""
        line = f"({', '.join(f'{self._name}.{name}' for name in names)})"
        return tuple(self._request("getattrs", line, names=list(names)))

    def ref(self, name: str) -> "Remote":
        """The attribute `name` as a handle (e.g. a tensor to write into), not as a value."""
        line = f"{self._name}.{name}"
        message = {"op": "getattr", "handle": self._handle, "name": name, "as_handle": True}
        try:
            value = self._submission.call(message, line)
        except RemoteError as error:  # the read is the counterexample's last line
            self._submission.entered_error(line, error)
            raise
        object.__setattr__(value, "_name", line)
        return value

    def __len__(self) -> int:
        return self._request("len", f"len({self._name})")

    def __getitem__(self, key: Any) -> Any:
        code = self._submission.transcript.subscript(key)
        args = self._submission.encode([key])
        return self._request("getitem", f"{self._name}[{code}]", args=args)

    def __setitem__(self, key: Any, value: Any) -> None:
        transcript = self._submission.transcript
        code = transcript.code(value)
        line = f"{self._name}[{transcript.subscript(key)}] = {code}"
        call = f"{self._name}.__setitem__({transcript.code(key)}, {code})"
        self._request("setitem", line, call=call, args=self._submission.encode([key, value]))

    def workload(self, name: str, *args: Any) -> Any:
        """Run one of the worker's timed workloads (`workloads.WORKLOADS`) on this object."""
        line = f"{name}({self._name}, ...)"
        return self._request("workload", line, name=name, args=self._submission.encode(list(args)))

    def __repr__(self) -> str:
        return f"<{self._type} {self._name} in the worker>"


class RemoteMethod:
    """A bound method of a `Remote`: one request per call."""

    def __init__(self, owner: Remote, name: str) -> None:
        self.owner, self.name = owner, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        submission = object.__getattribute__(self.owner, "_submission")
        owner_name = object.__getattribute__(self.owner, "_name")
        line = f"{owner_name}.{self.name}({submission.transcript.arguments(args, kwargs)})"
        handle, kind = (object.__getattribute__(self.owner, slot) for slot in ("_handle", "_type"))
        message = submission.call_message(
            "call", args, kwargs, handle=handle, type=kind, name=self.name
        )
        return submission.remote_call(message, line)


@dataclass(frozen=True)
class Batched:
    """A request for `Submission.batch`: its message, its line in the transcript, and what a
    failure calls it (`manager.free_blocks` raises NotImplementedError)."""

    message: dict
    line: str
    description: str


def attribute(remote: Remote, name: str) -> Batched:
    """`remote.name`, read."""
    handle, kind = (object.__getattribute__(remote, slot) for slot in ("_handle", "_type"))
    shown = f"{object.__getattribute__(remote, '_name')}.{name}"
    message = {"op": "getattr", "handle": handle, "type": kind, "name": name}
    return Batched(message, shown, shown)


def length(remote: Remote, name: str) -> Batched:
    """`len(remote.name)`."""
    read = attribute(remote, name)
    return Batched(read.message | {"op": "len"}, f"len({read.line})", read.description)


def method(remote: Remote, name: str, *args: Any) -> Batched:
    """`remote.name(*args)`."""
    read = attribute(remote, name)
    submission = object.__getattribute__(remote, "_submission")
    message = read.message | submission.call_message("call", args, {})
    line = f"{read.line}({submission.transcript.arguments(args, {})})"
    return Batched(message, line, read.description)


def fields_of_earlier(index: int, shown: str, *names: str) -> Batched:
    """`(shown.name, ...)`: the attributes `names` of what request `index` of the same batch
    returned, shown as `shown`."""
    line = f"({', '.join(f'{shown}.{name}' for name in names)})"
    return Batched({"op": "getattrs", "handle": {"$earlier": index}, "names": [*names]}, line, line)


def sandbox_of(remote: Remote) -> Sandbox:
    """The sandbox whose worker holds `remote` (to read that worker's CPU time)."""
    return object.__getattribute__(remote, "_submission").sandbox


def transcript_of(remote: Remote) -> Transcript:
    """The transcript the calls on `remote` go into."""
    return object.__getattribute__(remote, "_submission").transcript


def rename(remote: Remote, name: str) -> None:
    """From now on `remote` is shown as `name` (`steps[3]`)."""
    object.__setattr__(remote, "_name", name)
