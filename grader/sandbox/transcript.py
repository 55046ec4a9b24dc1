"""A grading's calls on the candidate's code as a script the candidate can paste and run.

Every call a check makes through a proxy (`proxy.py`) goes into the `Transcript` as a line of
code, with what it returned or raised as a comment. A failing check ends the script in an assert
that states the property it enforces; the report shows that script as the counterexample. Values
the grader handed out are written as where they came from (`Shown`: `ids[0]`, not `7`), objects
in the worker by their variable names (`Handle`), large tensors by their shape.
"""

import math
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from grader.said import Said, Script, said, script, written
from grader.sandbox.folding import folded_lines
from grader.sandbox.wire import plain_items

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
# A counterexample's last assert, by its comparison, and how its message shows both sides (the
# f-string's template, an entry of the `checks` catalog, as `Script` writes it).
ASSERTS = {
    "==": ("got == expected", "expected {expected!r}, got {got!r}"),
    "<=": ("got <= expected", "expected at most {expected!r}, got {got!r}"),
    "!=": ("got != expected", "expected not {expected!r}, got {got!r}"),
    "equal": ("torch.equal(got, expected)", "expected {expected!r}, got {got!r}"),
}
PLAIN = (type(None), bool, int, float, str)  # values whose identity says nothing
COMMENT = "  # "  # between a line's code and its comment


def one_line(text: object, limit: int = SHOWN_RESULT_CHARS) -> str:
    """`text`, which may quote the candidate, as a comment holds it: on one line (no line break
    may end the comment and start code in the counterexample), cut to `limit` characters."""
    text = " ".join(str(text).splitlines())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Commented(str):
    """A line of code that ends in a message (`commented`): `before` it, then the message as
    `form` writes it (`said.Script`)."""

    before: str
    message: str  # a `Said`; for the form "fstring", the f-string's template
    form: str


def commented(code: str, message: str, form: str = "comment") -> Commented:
    """`code  # message` (a comment), or `code` then `message` as `form` writes it; the message
    kept whole."""
    before = f"{code}{COMMENT}" if form == "comment" else code
    line = Commented(before + written(message, form))
    line.before, line.message, line.form = before, message, form
    return line


def as_written(line: str) -> "str | tuple[str, str, str]":
    """A line as `said.script` takes it: code, or the code before its message, the message and
    its form."""
    return (line.before, line.message, line.form) if isinstance(line, Commented) else line


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Handle:
    """An object the transcript shows by its variable name, `_name`: a handle on an object that
    lives in the worker (`proxy.Remote`)."""

    __slots__ = ("_name",)


class Iter:
    """An argument that reaches the candidate as a one-shot iterator over `items` (a list, or a
    `Shown` one, written as its code: `iter(ids)`)."""

    def __init__(self, items: "list | Shown") -> None:
        self.items = items


@dataclass(eq=False)
class Line:
    """One statement of a transcript, and what the grader saw it do."""

    expression: str  # a call or a read; or a statement, with `call` its form as an expression
    outcome: str = ""  # the comment after it: `-> value`, `raises ...` (a message: a `Said`)
    value: Any = None  # what it returned (kept, so that its identity finds this line)
    read: bool = False  # an attribute, an item or a length: reading it again changes nothing
    call: str = ""  # for a statement, the same as one expression (`setattr(req, ...)`)
    raised: bool = False  # it raised, and the check did not expect it to
    code: str = ""  # as the script shows it, without the comment: `expression` by default

    def __post_init__(self) -> None:
        self.code = self.code or self.expression

    def __str__(self) -> str:
        return f"{self.code}{COMMENT}{self.outcome}" if self.outcome else self.code

    def written(self) -> "str | tuple[str, Said, str]":
        """The line as `said.script` takes it: code, or code and the message it ends in."""
        if isinstance(self.outcome, Said):
            return (f"{self.code}{COMMENT}", self.outcome, "comment")
        return str(self) if self.outcome else as_written(self.code)


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

    def code(self, value: Any, limit: float = math.inf) -> str:
        """`value` as Python source, or as a short description where the source would be huge.
        Where a `limit` is given, a list's items past about `limit` characters are left out
        ("..."), unread: a comment cut to `limit` (`one_line`) shows the same, and a tensor among
        them no longer asks the script for `import torch`, which none of its lines would use."""
        if isinstance(value, Shown):
            return value.code
        alias = self.alias(value)
        if alias is not None:
            return alias
        if isinstance(value, Handle):
            return object.__getattribute__(value, "_name")
        if isinstance(value, torch.Tensor):
            self.uses_torch = True
            if value.numel() <= SHOWN_TENSOR_ELEMENTS:
                return f"torch.tensor({value.tolist()!r}, dtype={value.dtype})"
            return f"<tensor {list(value.shape)} {value.dtype}>"
        if isinstance(value, Iter):
            return f"iter({self.code(value.items, limit)})"
        if value is Ellipsis:
            return "..."
        if isinstance(value, list):
            if plain_items(value):  # as the loop below writes it, much faster
                return repr(value)
            return f"[{self.listed(value, limit)}]"
        if isinstance(value, tuple):
            return f"({self.subscript(value)}{',' if len(value) == 1 else ''})"
        return repr(value)

    def listed(self, values: list, limit: float) -> str:
        """The code of `values`, joined by ", ": those after the first `limit` characters left
        out, for a "..." (the text then agrees with the whole on more than its first `limit`
        characters)."""
        shown, size = [], 0
        for item in values:
            if size > limit:
                shown.append("...")
                break
            shown.append(self.code(item, limit))
            size += len(shown[-1]) + len(", ")
        return ", ".join(shown)

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
        comment, is kept on one line (`one_line`; a message, its parts that quote the candidate)."""
        outcome = outcome if isinstance(outcome, Said) else one_line(outcome)
        self.lines.append(Line(line, outcome, **fields))
        return self.lines[-1]

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """Calls made inside stay out of the transcript unless one of them fails."""
        mark = len(self.lines)
        yield
        del self.lines[mark:]

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Calls made inside leave the transcript as it was, even one that fails: calls made
        after its script was written, which it does not replay."""
        imports = {module: set(names) for module, names in self.imports.items()}
        kept = (self.lines[:], self.ending[:], imports, set(self.kit_imports), dict(self.aliases),
                Counter(self.counts), self.uses_torch, self.uses_raises)  # fmt: skip
        try:
            yield
        finally:
            (self.lines, self.ending, self.imports, self.kit_imports, self.aliases, self.counts,
             self.uses_torch, self.uses_raises) = kept  # fmt: skip

    def source(self, value: Any, hint: str = "value") -> str:
        """Code that gives `value` where the script ends: the read that returned it, read again
        where it is the last line; else a name the line that returned it now assigns (a copy of
        what a read returned: the candidate's own object may change later); else `value` written
        out. A plain value (an int...) is traced to the last line only."""
        alias = self.alias(value)
        if alias is not None:
            return alias
        line = self.producer(value)
        if line is None or isinstance(value, Handle):
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
        assertion = [
            f"got = {got}",
            f"expected = {expected}",
            commented(f"assert {test}, ", message, "fstring"),
        ]
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
        missed = said("expected {kind}, got no exception", kind=kind.__name__)
        self.ending = [commented(f"assert {call}, ", missed, "string")]

    def render(self, failure: str = "") -> Script:
        """The script: its imports, the calls, and with `failure` (what the check found, a line)
        a `# fails:` comment, then the statement that fails: the check's assert (`fail`), or the
        call that raised, or where the check stated neither, `assert False, failure`."""
        body, ending = [line.written() for line in self.lines], list(map(as_written, self.ending))
        if failure and not ending:
            if self.lines and self.lines[-1].raised:
                ending = [body.pop()]
            else:
                ending = [("assert False, ", failure, "repr")]
        tail = [("# ", said("fails: {message}", message=failure), "comment")] if failure else []
        return script(with_constants_folded([*self.head(), *body, *tail, *ending]))

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


def with_constants_folded(
    lines: list["str | tuple[str, str, str]"],
) -> list["str | tuple[str, str, str]"]:
    """`lines` as `said.script` takes them, the code of each with its constant sub-expressions
    written as their values (`folding.py`)."""
    codes = folded_lines(line[0] if isinstance(line, tuple) else line for line in lines)
    return [
        (code, *line[1:]) if isinstance(line, tuple) else code
        for code, line in zip(codes, lines, strict=True)
    ]


def copied(expression: str, value: Any) -> str:
    """`expression`, a read, as a copy of what it gives now: `list(req.block_table)`."""
    if isinstance(value, list):
        return f"list({expression})"
    if isinstance(value, torch.Tensor):
        return f"{expression}.clone()"
    return expression
