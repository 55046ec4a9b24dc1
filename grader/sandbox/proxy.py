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

Every call is written to a `Transcript`: after a failure it is the counterexample, as code the
candidate can paste and run.
"""

import builtins
import re
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from grader.sandbox.process import (
    BadReply,
    ImportFailed,
    NotCalled,
    NotImplementedInSubmission,
    NotSubmitted,
    Sandbox,
    SubmissionFailure,
)
from grader.sandbox.wire import plain_items, tensor_from_wire, tensor_to_wire
from grader.text import clean

SHOWN_TENSOR_ELEMENTS = 64
SHOWN_RESULT_CHARS = 160
VARIABLE_NAMES = {"BlockAllocator": "allocator", "KVCacheManager": "manager", "Request": "req"}
# Defined at the top of a counterexample that expects an exception: `assert raises(ValueError,
# lambda: allocator.free([8]))`. A one-line `with` block pasted into the REPL makes the statement
# after it a SyntaxError.
RAISES_HELPER = (
    "def raises(kind, call):",
    "    try:",
    "        call()",
    "    except kind:",
    "        return True",
    "    return False",
    "",
)
# Before a counterexample imports the candidate's modules: the folder it runs in (the one that
# holds the graded files, whatever its name) as the package they were graded in, so that their
# relative imports (`from .block_allocator import ...`) resolve there. The reports say where.
PACKAGE_HERE = (
    "import sys",
    "import types",
    'sys.modules["{package}"] = types.ModuleType("{package}")',
    'sys.modules["{package}"].__path__ = ["."]',
)
# A counterexample's last assert, by its comparison, and how its message shows both sides.
ASSERTS = {
    "==": ("got == expected", "expected {expected!r}, got {got!r}"),
    "<=": ("got <= expected", "expected at most {expected!r}, got {got!r}"),
    "!=": ("got != expected", "expected not {expected!r}, got {got!r}"),
    "equal": ("torch.equal(got, expected)", "expected {expected!r}, got {got!r}"),
}
PLAIN = (type(None), bool, int, float, str)  # values whose identity says nothing
READS = frozenset({"getattr", "getattrs", "len", "getitem"})  # requests that change nothing


class RemoteError(Exception):
    """An exception raised by the candidate's code in the worker."""

    def __init__(self, type_name: str, message: str, traceback: str) -> None:
        super().__init__(f"{type_name}: {message}" if message else type_name)
        self.type_name, self.message, self.traceback = type_name, message, traceback
        self.recorded: tuple[Transcript, Line] | None = None

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


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass(eq=False)
class Line:
    """One statement of a transcript, and what the grader saw it do."""

    expression: str  # a call or a read; or a statement, with `call` its form as an expression
    outcome: str = ""  # the comment after it: `-> value`, `raises ...`
    value: Any = None  # what it returned (kept, so that its identity finds this line)
    read: bool = False  # an attribute, an item or a length: reading it again changes nothing
    call: str = ""  # for a statement, the same as one expression (`setattr(req, ...)`)
    raised: bool = False  # it raised, and the check did not expect it to
    code: str = ""  # as the script shows it, without the comment: `expression` by default

    def __post_init__(self) -> None:
        self.code = self.code or self.expression

    def __str__(self) -> str:
        return f"{self.code}  # {self.outcome}" if self.outcome else self.code


class Shown:
    """An argument sent as `value` and shown in the transcript as `code`: an id the candidate
    handed out, written as where it came from (`ids[0]`), so that the counterexample runs the
    same on any implementation that follows the contract."""

    def __init__(self, value: Any, code: str) -> None:
        self.value, self.code = value, code


class Transcript:
    """The calls made on the candidate's code in the current example, as a runnable script.

    A failing check ends it in an assert that states the property it enforces (`fail`,
    `fail_to_raise`), in the transcript's names; `render` writes the whole script: the imports,
    the `raises` helper where it is used, every call, and that assert last.
    """

    def __init__(self, package: str, interpreted: bool = False) -> None:
        self.package = package
        self.interpreted = interpreted  # the worker runs Triton's interpreter: so must the script
        self.reset()

    def reset(self) -> None:
        self.imports: dict[str, set[str]] = {}
        self.kit_imports: set[str] = set()
        self.aliases: dict[int, tuple[Any, str, Line | None]] = {}
        self.lines: list[Line] = []
        self.ending: list[str] = []
        self.counts: Counter[str] = Counter()
        self.uses_torch = False
        self.uses_raises = False

    def variable(self, type_name: str) -> str:
        return self.fresh(VARIABLE_NAMES.get(type_name) or snake_case(type_name))

    def fresh(self, base: str) -> str:
        """A variable name not used yet in this transcript: `base`, `base2`, ..."""
        self.counts[base] += 1
        return base if self.counts[base] == 1 else f"{base}{self.counts[base]}"

    def code(self, value: Any) -> str:
        """`value` as Python source, or as a short description where the source would be huge."""
        if isinstance(value, Shown):
            return value.code
        alias = self.alias(value)
        if alias is not None:
            return alias
        if isinstance(value, Remote):
            return object.__getattribute__(value, "_name")
        if isinstance(value, torch.Tensor):
            self.uses_torch = True
            if value.numel() <= SHOWN_TENSOR_ELEMENTS:
                return f"torch.tensor({value.tolist()!r}, dtype={value.dtype})"
            return f"<tensor {list(value.shape)} {value.dtype}>"
        if isinstance(value, Iter):
            return f"iter({value.items!r})"
        if value is Ellipsis:
            return "..."
        if isinstance(value, list):
            if plain_items(value):  # as the loop below writes it, much faster
                return repr(value)
            return f"[{', '.join(self.code(item) for item in value)}]"
        if isinstance(value, tuple):
            return f"({self.subscript(value)}{',' if len(value) == 1 else ''})"
        return repr(value)

    def alias(self, value: Any) -> str | None:
        """The name `value` was given, while the line that gives it is still in the transcript."""
        if isinstance(value, PLAIN) or id(value) not in self.aliases:
            return None
        kept, name, line = self.aliases[id(value)]
        if kept is not value or not (line is None or any(line is own for own in self.lines)):
            return None
        return name

    def subscript(self, key: Any) -> str:
        """`key` as written between brackets: `pool[1, ...]`, not `pool[(1, ...)]`."""
        if isinstance(key, tuple):
            return ", ".join(self.code(item) for item in key)
        return self.code(key)

    def arguments(self, args: tuple, kwargs: dict) -> str:
        shown = [self.code(arg) for arg in args]
        shown += [f"{key}={self.code(arg)}" for key, arg in kwargs.items()]
        return ", ".join(shown)

    def define(self, line: str, **values: Any) -> None:
        """Record `line`, code that makes `values`; from then on they are shown by their names."""
        self.lines.append(Line(line))
        self.aliases.update({id(value): (value, name, None) for name, value in values.items()})

    def insert_before(self, line: Line, statements: tuple[str, ...]) -> None:
        """`statements` just before `line`, which is in the transcript."""
        index = next(index for index, own in enumerate(self.lines) if own is line)
        self.lines[index:index] = [Line(statement) for statement in statements]

    def needs(self, statement: str) -> None:
        """An import the script needs: torch, or the kit's (`from kernels.reference import
        token_slots`)."""
        if statement == "import torch":
            self.uses_torch = True
        else:
            self.kit_imports.add(statement)

    def record(self, line: str, outcome: str = "", **fields: Any) -> Line:
        """Record `line` (`Line`'s `fields` say what it did); returns it. The `outcome`, a
        comment that may quote the candidate's text, is kept on one line: no line break of a
        message may end the comment and start code in the counterexample."""
        outcome = " ".join(outcome.splitlines())
        if len(outcome) > SHOWN_RESULT_CHARS:
            outcome = outcome[: SHOWN_RESULT_CHARS - 3] + "..."
        self.lines.append(Line(line, outcome, **fields))
        return self.lines[-1]

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Calls made inside stay out of the transcript unless one of them fails."""
        mark = len(self.lines)
        yield
        del self.lines[mark:]

    def source(self, value: Any, hint: str = "value") -> str:
        """Code that gives `value` where the script ends: the read that returned it, read again
        where it is the last line; else a name the line that returned it now assigns (a copy of
        what a read returned: the candidate's own object may change later); else `value` written
        out. A plain value (an int...) is traced to the last line only."""
        alias = self.alias(value)
        if alias is not None:
            return alias
        line = self.producer(value)
        if line is None or isinstance(value, Remote):
            return self.code(value)
        if line.read and line is self.lines[-1]:
            return line.expression
        name = self.name(line, hint)
        self.aliases[id(value)] = (value, name, line)
        return name

    def name(self, line: Line, hint: str) -> str:
        """`line` now assigns what it gives to a new variable (a copy, for a read); its name."""
        name = self.fresh(hint)
        line.code = (
            f"{name} = {copied(line.expression, line.value) if line.read else line.expression}"
        )
        return name

    def producer(self, value: Any) -> Line | None:
        """The latest line that returned `value` (the last line only, for a plain value)."""
        if isinstance(value, PLAIN):
            last = self.lines[-1] if self.lines else None
            same = last is not None and type(last.value) is type(value) and last.value == value
            return last if same and not last.raised else None
        return next((line for line in reversed(self.lines) if line.value is value), None)

    def expect_raise(self, line: Line, kind: type[Exception], required: bool = True) -> None:
        """`line` raised `kind`, as the check wanted (`required`) or allowed."""
        self.uses_raises = True
        line.raised = False
        check = "assert " if required else ""
        line.code = f"{check}raises({kind.__name__}, lambda: {line.call or line.expression})"

    def fail(self, got: str, expected: str, op: str = "==", before: tuple[str, ...] = ()) -> None:
        """End the script in `assert <got> <op> <expected>` (code in the transcript's names; `op`
        one of `ASSERTS`), its message showing both; `before`: statements that come first."""
        test, message = ASSERTS[op]
        self.uses_torch |= op == "equal" or "torch." in got + expected
        assertion = [f"got = {got}", f"expected = {expected}", f'assert {test}, f"{message}"']
        self.ending = [*before, *assertion]

    def fail_in(self, call: str) -> None:
        """End the script in `call`, which raised the candidate's exception."""
        self.ending = [call]

    def fail_to_raise(self, kind: type[Exception]) -> None:
        """The last line's call should have raised `kind` and did not (it returned, or raised
        something else): the script ends in it, as `assert raises(kind, lambda: ...)`."""
        if not self.lines:
            return
        line = self.lines.pop()
        self.uses_raises = True
        call = f"raises({kind.__name__}, lambda: {line.call or line.expression})"
        self.ending = [f'assert {call}, "expected {kind.__name__}, got no exception"']

    def render(self, failure: str = "") -> str:
        """The script: its imports, the calls, and with `failure` (what the check found) a
        `# fails:` comment, then the statement that fails: the check's assert (`fail`), or the
        call that raised, or where the check stated neither, `assert False, failure`."""
        body, ending = [str(line) for line in self.lines], list(self.ending)
        if failure and not ending:
            if self.lines and self.lines[-1].raised:
                ending = [body.pop()]
            else:
                ending = [f"assert False, {failure!r}"]
        tail = [f"# fails: {failure}"] if failure else []
        return "\n".join([*self.head(), *body, *tail, *ending])

    def head(self) -> list[str]:
        """The script's first lines: the interpreter switch, imports (`PACKAGE_HERE` before the
        candidate's), the `raises` helper."""
        kernel = self.interpreted and "paged_attention" in self.imports
        head = ["import os", 'os.environ["TRITON_INTERPRET"] = "1"'] if kernel else []
        head += ["import torch"] if self.uses_torch else []
        head += sorted(self.kit_imports)
        head += [line.format(package=self.package) for line in PACKAGE_HERE] if self.imports else []
        head += [
            f"from {self.package}.{module} import {', '.join(sorted(names))}"
            for module, names in sorted(self.imports.items())
        ]
        return head + (list(RAISES_HELPER) if self.uses_raises else [])


def copied(expression: str, value: Any) -> str:
    """`expression`, a read, as a copy of what it gives now: `list(req.block_table)`."""
    if isinstance(value, list):
        return f"list({expression})"
    if isinstance(value, torch.Tensor):
        return f"{expression}.clone()"
    return expression


class Iter:
    """An argument that reaches the candidate as a one-shot iterator over `items`."""

    def __init__(self, items: list) -> None:
        self.items = items


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
            raise NotSubmitted(f"{name}.py was not submitted")
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
                failure = ImportFailed(f"{name}.py could not be imported: {error}")
                self.import_failures[name] = failure
                raise failure from None
            self.imported.add(name)
        return RemoteModule(self, name)

    def tool(self, tool: str, function: str, *args: Any, modules: tuple[str, ...] = (),
             watch: str | None = None, seconds: float | None = None,
             **kwargs: Any) -> Any:  # fmt: skip
        """`function(*modules, *args, **kwargs)` of the kit's helper `tool` (`process.TOOLS`),
        run in the worker on the submission's `modules` (imported there first), within `seconds`
        (default: the per-call limit). With `watch`, the name of a candidate's function the tool
        calls: `(Triton kernel launches during the call, the aten ops that function ran outside
        them and may not (worker.wrapper_may_run), the tool's value)`."""
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
            return NotImplementedInSubmission(f"{description} raises NotImplementedError")
        return remote_error(info)

    def decoded(self, value: Any, description: str) -> Any:
        """`value` as the worker encoded it, decoded; a malformed one fails the check."""
        try:
            return self.decode(value)
        except Exception as error:  # every malformed value is the worker's doing
            self.sandbox.fail(
                BadReply(f"the worker's reply to {description} is malformed: {error}")
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
            return {"$iter": [self.encode(item) for item in value.items]}
        if isinstance(value, slice):
            return {"$slice": [value.start, value.stop, value.step]}
        if value is Ellipsis:
            return {"$ellipsis": True}
        if value is None or type(value) in (bool, int, float, str):
            return value
        raise TypeError(f"cannot send {type(value).__name__} to the worker")

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return value if plain_items(value) else [self.decode(item) for item in value]
        if not isinstance(value, dict):
            return value
        if "$tuple" in value:
            return tuple(self.decode(item) for item in value["$tuple"])
        if "$dict" in value:
            return {key: self.decode(item) for key, item in value["$dict"].items()}
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
            outcome = f"-> {transcript.code(value)}"
            transcript.record(line, outcome, value=value, read=message["op"] in READS)
        return value

    def entered_error(self, line: str, error: RemoteError, call: str = "") -> None:
        """`error`, what the request on `line` raised, entered in the transcript."""
        recorded = self.transcript.record(line, f"raises {error}", call=call, raised=True)
        error.recorded = (self.transcript, recorded)


class RemoteModule:
    """A module of the submission; calling one of its attributes builds an object in the worker."""

    def __init__(self, submission: Submission, name: str) -> None:
        self.submission, self.name = submission, name

    def call_counting_launches(
        self, function: str, *args: Any, **kwargs: Any
    ) -> tuple[int, tuple[str, ...], Any]:
        """`function(*args, **kwargs)` (a kernel's wrapper): how many `@triton.jit` kernels it
        launched, the aten ops it ran outside them that no wrapper needs (`worker.wrapper_may_run`:
        attention computed by torch, e.g. `("aten.bmm", "aten._softmax")`), and its value."""
        submission = self.submission
        submission.transcript.imports.setdefault(self.name, set()).add(function)
        message = submission.call_message("launch", args, kwargs, module=self.name, name=function)
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
                submission.sandbox.fail(BadReply(f"the worker's reply to {function} is malformed"))
        outcome = f"-> {transcript.code(value)}, {launches} Triton kernel launch(es)"
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


class Remote:
    """An object that lives in the worker: attribute reads, method calls, `len`, `[]`."""

    __slots__ = ("__weakref__", "_handle", "_methods", "_name", "_submission", "_type")

    def __init__(self, submission: Submission, handle: int, type_name: str, methods: list) -> None:
        for slot, value in [
            ("_submission", submission),
            ("_handle", handle),
            ("_type", type_name),
            ("_methods", frozenset(methods)),
            ("_name", "obj"),
        ]:
            object.__setattr__(self, slot, value)
        weakref.finalize(self, submission.sandbox.release, handle)

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
        """Run one of the worker's timed workloads (`worker.WORKLOADS`) on this object."""
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
