"""The file rule: what any submission file may import and read, held by the grading process on
the files' syntax trees (never run) before a worker sees them.

- **Imports** only of the contract's modules (`scan.ALLOWED_IMPORTS`, and `triton` in the kernel's
  file) and, relatively, of the submission's own files; never a name with a leading underscore
  (`torch._C`), nor a submodule of a package that `SUBMODULES` does not list (`torch.package`);
  none in a class body (the class would hold the module as an attribute).
- **A module is only read as `module.name`**, `name` one of its public names, and not one of
  `REFUSED` (what loads or builds code, evaluates annotations or compiles strings, takes
  attribute names as data, makes classes from a namespace, or hands out the fields `dataclasses`
  builds code from): a module reached so is itself one the file may import (`torch.nn`, not
  `dataclasses.sys`). A module is never a value (`m = dataclasses`, `print(torch)`,
  `getattr(dataclasses, ...)`), a module another file of the submission imported included
  (`from .block_allocator import dataclasses`): every read of a module is in sight. Nothing
  reached from a module by name is changed (`torch.Tensor.add = ...`).
- **Of any object, no attribute that reaches past it**: of the special ones (`__name__`), only
  those `DUNDERS` lists (not `__dict__`, a function's `__globals__` or `__code__`, the object
  graph's `__subclasses__`), whether read as `x.attr`, as a name given to `getattr` and its kin,
  or in a `match` pattern; none of `HIDDEN` (a frame's, a generator's); no special name but
  `NAME_DUNDERS` (a class body's `__annotations__` is not one); no `__class__` changed.
- **Names as data only as literals**: no builtin that finds names at run time (`BY_NAME`);
  `getattr`, `setattr`, `delattr`, and an object's `__setattr__` and `__delattr__`, only called
  with a literal name. `type` only as `type(x)`, and no metaclass: a class is made from a class
  statement, whose annotations are names, which `dataclasses` pastes into the code it generates.
  `dataclasses.field()` only as the value of a class body's annotated name.

These are allowlists, but Python's are leaky: what a library hands out can reach further than
the rule sees (README, "What the file rule does not stop"). `breaks` gives, for each file that
breaks the rule, its first line that does, and how; `grade.runnable` then never runs it, so every
check that imports it, itself or through another file, fails, saying so. A worker's own process
can be patched from inside; this rule is decided where the candidate's code never runs.
"""

import ast
import builtins
import contextlib
import importlib
import importlib.util
import symtable
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

from grader.said import Said, said
from grader.scan import (
    ALLOWED_IMPORTS,
    FRAMES,
    KERNEL_FILE,
    TOO_DEEP,
    builtin_reads,
    import_aliases,
)

KERNEL_MODULES = frozenset({"triton"})  # the kernel's file may also import these
# The submodules a file may reach of these packages (each with its own submodules); of the other
# allowed modules, any. torch's others load or build code (`torch.package`, `torch.hub`,
# `torch.utils.cpp_extension`, `torch.fx`...), or reach the interpreter (`torch.multiprocessing`).
SUBMODULES = {
    "torch": (
        "torch.nn", "torch.linalg", "torch.special", "torch.fft", "torch.cuda", "torch.types",
    ),
    "triton": ("triton.language",),
}  # fmt: skip
# Public names of the allowed modules a file may not read, and why: they run code the file does
# not show, or reach attributes by names given as data, or make the code `dataclasses` generates
# from names the file computes.
REFUSED = {
    **dict.fromkeys(
        ["torch.load", "torch.compile", "torch.ops", "torch.classes", "torch.from_file"],
        said("loads or builds code at run time"),
    ),
    **dict.fromkeys(
        ["typing.get_type_hints", "functools.singledispatch", "functools.singledispatchmethod"],
        said("evaluates annotations as code"),
    ),
    "typing.ForwardRef": said("compiles strings as code"),
    "typing.get_args": said("hands out forward references, strings compiled as code"),
    **dict.fromkeys(
        [
            "operator.attrgetter", "operator.methodcaller", "functools.update_wrapper",
            "functools.wraps",
        ],
        said("reaches attributes by names given as data"),
    ),
    **dict.fromkeys(
        ["abc.ABCMeta", "enum.EnumMeta", "enum.EnumType", "dataclasses.make_dataclass"],
        said("makes classes from a namespace"),
    ),
    **dict.fromkeys(
        ["dataclasses.fields", "dataclasses.Field"],
        said("hands out the fields {module} builds code from", module="dataclasses"),
    ),
}  # fmt: skip
# The special attributes (`__name__`) a file may read of any object: those of Python's protocols
# that an honest file calls or names. The others reach past the object: its namespace
# (`__dict__`, `__getstate__`, `__reduce__`), a function's globals and code, the object graph,
# a descriptor's `__get__`, a forward reference's compiled code.
DUNDERS = {
    "__init__", "__new__", "__post_init__", "__init_subclass__", "__call__", "__name__",
    "__qualname__", "__doc__", "__module__", "__class__", "__slots__", "__members__",
    "__match_args__", "__wrapped__", "__cause__", "__context__",
    "__copy__", "__deepcopy__",
    "__len__", "__iter__", "__next__", "__reversed__", "__contains__", "__getitem__",
    "__setitem__", "__delitem__", "__missing__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__bool__", "__repr__", "__str__", "__format__", "__enter__",
    "__exit__", "__setattr__", "__delattr__", "__index__", "__int__", "__float__",
    "__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
    "__matmul__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__neg__",
    "__pos__", "__abs__", "__invert__", "__round__", "__floor__", "__ceil__", "__trunc__",
    "__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__",
    "__iadd__", "__isub__", "__imul__",
}  # fmt: skip
# Attributes of any object, other than special ones, that reach past it: a frame's, a
# traceback's, and a generator's or coroutine's frame, code and what it awaits.
HIDDEN = {name for name in FRAMES if not name.startswith("__")} | {
    "ag_frame", "gi_code", "cr_code", "ag_code", "gi_yieldfrom", "cr_await", "ag_await",
}  # fmt: skip
# The special names a file may bind or read as names, besides `DUNDERS` (a class body's
# `__str__` in `__repr__ = __str__`); a class body's `__annotations__` is not one.
NAME_DUNDERS = {
    "__name__", "__doc__", "__file__", "__qualname__", "__module__", "__class__", "__slots__",
    "__all__", "__hash__", "__match_args__", "__debug__",
}  # fmt: skip
# Builtins that find code or names at run time (`exec`, `eval` and `compile` are
# `scan.decoded_code`'s), and those that reach an attribute by a name.
BY_NAME = frozenset({"__import__", "vars", "globals", "locals", "breakpoint", "__builtins__"})
NAMED = frozenset({"getattr", "setattr", "delattr"})
SETTERS = frozenset({"__setattr__", "__delattr__"})  # an object's own setattr and delattr
# What a file may use of `dataclasses` only where it stands in a class statement: the decorator
# on one, and a field as the value of an annotated name in the body of one it decorates (so no
# class made otherwise, and no field of one, reaches the code dataclasses generates).
DATACLASS, FIELD = "dataclasses.dataclass", "dataclasses.field"
PLACES = {
    DATACLASS: said("uses dataclasses.dataclass other than as a class statement's decorator"),
    FIELD: said("uses dataclasses.field other than as a field in a dataclass's body"),
}


class RuleBroken(Exception):
    """The first break of the file rule: its line and what the file does there."""

    def __init__(self, node: ast.AST, what: Said) -> None:
        super().__init__(what)
        self.line, self.what = getattr(node, "lineno", 1), what


def breaks(files: Mapping[str, bytes]) -> dict[str, Said]:
    """Why each of a submission's `files` (by name) that breaks the file rule does, at its first
    line that does; a file that does not parse is not here (`scan.syntax_errors` has it), one
    too deeply nested for this process to parse is."""
    trees, reasons = {}, {}
    for name, source in files.items():
        try:
            trees[name] = ast.parse(source, filename=name)
        except (SyntaxError, ValueError):
            continue
        except (RecursionError, MemoryError):
            reasons[name] = TOO_DEEP
    shared = Shared(exported(trees, imported_modules), exported(trees, defined_classes))
    for name in sorted(trees):
        if broken := first_break(name, files[name], shared):
            reasons[name] = broken
    return reasons


@dataclass(frozen=True)
class Shared:
    """What each file of a submission gives the others by relative import, by its stem."""

    modules: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # name -> module
    classes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # of class statements


def first_break(name: str, source: bytes, shared: Shared | None = None) -> Said | None:
    """Why `name` breaks the file rule, at its first line that does; None when it keeps it (or
    does not parse). `shared`: what the submission's other files give it (`breaks`)."""
    try:
        tree = ast.parse(source, filename=name)
        table = symtable.symtable(source.decode("utf-8", "replace"), name, "exec")
    except (SyntaxError, ValueError):
        return None
    except (RecursionError, MemoryError):
        return TOO_DEEP
    builtins_read = builtin_reads(table, BY_NAME | NAMED | {"type"})
    reader = Reader(allowed_modules(name), builtins_read, shared or Shared())
    try:
        reader.read(tree)
    except RuleBroken as broken:
        return said("line {line} {what}", line=broken.line, what=broken.what)
    except (RecursionError, MemoryError):
        return TOO_DEEP
    return None


def allowed_modules(name: str) -> frozenset[str]:
    """The top-level modules `name`, a submission file, may import."""
    kernel = name.rsplit("/", 1)[-1] == KERNEL_FILE
    return ALLOWED_IMPORTS | KERNEL_MODULES if kernel else ALLOWED_IMPORTS


def exported(
    trees: Mapping[str, ast.Module], bound: Callable[[ast.Module], dict[str, str]]
) -> dict[str, dict[str, str]]:
    """What each file binds by `bound`, and what it imports so of another file relatively
    (`from .a import m` in b, then `from .b import m` in c), by the file's stem."""
    found = {stem_of(name): bound(tree) for name, tree in trees.items()}
    relative = {
        name: [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        ]
        for name, tree in trees.items()
    }
    changed = True
    while changed:
        changed = False
        for name, imports in relative.items():
            mine = found[stem_of(name)]
            for node in imports:
                theirs = found.get(node.module, {})
                for alias in node.names:
                    local = alias.asname or alias.name
                    if alias.name in theirs and local not in mine:
                        mine[local], changed = theirs[alias.name], True
    return found


def stem_of(name: str) -> str:
    return name.rsplit("/", 1)[-1].removesuffix(".py")


def defined_classes(tree: ast.Module) -> dict[str, str]:
    """The names `tree` binds by a class statement and by nothing else."""
    classes, others = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            classes.add(node.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            others.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            others.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            others |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return {name: name for name in classes - others}


def imported_modules(tree: ast.Module) -> dict[str, str]:
    """The names `tree`'s absolute imports bind to modules, and the name of each module (its
    own: `from typing import sys` binds `sys`). Nothing of a module the rule refuses is looked
    up: the file breaks the rule where it imports it."""
    modules = {}
    for local, dotted in import_aliases(tree).items():
        parent, _, attribute = dotted.rpartition(".")
        if not parent:
            modules[local] = dotted
        elif not unreachable(parent, ALLOWED_IMPORTS | KERNEL_MODULES) and (
            module := module_named(parent, attribute)
        ):
            modules[local] = module
    return modules


@cache
def loaded(dotted: str) -> ModuleType | None:
    """The module `dotted` of an allowed package, as this process imports it (the kit's own
    pinned libraries: never the submission's code); None if it does not import here."""
    try:
        return importlib.import_module(dotted)
    except Exception:  # any failure: not a module here, and the worker's import fails too
        return None


def module_named(module: str, attribute: str) -> str | None:
    """The name of the module `module.attribute` is, if it is one, as the worker would find it
    whatever this process has imported so far: a submodule that importing `module` does not load
    (`torch.nn.utils.prune`) is known by its spec, and not imported here."""
    value = getattr(loaded(module), attribute, None)
    if isinstance(value, ModuleType):
        return value.__name__
    with contextlib.suppress(ImportError, ValueError):
        if value is None and importlib.util.find_spec(f"{module}.{attribute}") is not None:
            return f"{module}.{attribute}"
    return None


def unreachable(module: str, allowed: frozenset[str]) -> Said | None:
    """Why a file may not reach the module named `module` (dotted), by import or attribute; None
    when it may."""
    parts = module.split(".")
    if parts[0] not in allowed:
        modules = ", ".join(sorted(allowed))
        return said("a module outside the contract's list: {modules}", modules=modules)
    if any(part.startswith("_") for part in parts[1:]):
        return said("a private module")
    inside = SUBMODULES.get(parts[0])
    if inside is None or len(parts) == 1:
        return None
    if any(module == sub or module.startswith(f"{sub}.") for sub in inside):
        return None
    return said("a submodule outside the contract's list: {modules}", modules=", ".join(inside))


def special(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def hidden(attribute: str) -> Said | None:
    """Why reading `attribute` of an object reaches past it (`DUNDERS`, `HIDDEN`); None when it
    does not."""
    if special(attribute) and attribute not in DUNDERS:
        return said("reads .{name}, a special attribute the rule does not list", name=attribute)
    if attribute in HIDDEN:
        return said("reads .{name}, a frame's or a generator's", name=attribute)
    return None


def class_scope(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a class body, with those of its `if`, `for`, `with`, `try` and `match`
    blocks: all that run in the class's own scope (not a function's or a nested class's)."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                yield from class_scope([child])
            elif isinstance(child, ast.ExceptHandler | ast.match_case):
                yield from class_scope(child.body)


class Reader(ast.NodeVisitor):
    """Reads one file, raising `RuleBroken` at the first node that breaks the rule."""

    def __init__(self, allowed: frozenset[str], builtins_read: set[str], shared: Shared) -> None:
        self.allowed, self.shared = allowed, shared
        self.builtins_read = builtins_read & BY_NAME
        self.named = builtins_read & NAMED  # `getattr` and its kin, read as the builtins
        self.type_read = builtins_read & {"type"}  # `type`, read as the builtin
        self.annotating = False  # reading an annotation (`type[A]`, `x: type = int`)
        self.modules: dict[str, str] = {}  # local name -> the module it is bound to
        self.own: dict[str, str] = {}  # local name -> the stem of the submission's file it is
        self.classes: set[str] = set()  # names bound by a class statement alone, here or there
        self.imported: set[str] = set()  # names bound by a library's `from m import name`
        self.placed_names: dict[str, str] = {}  # local name -> what of `PLACES` it is
        self.placed: set[int] = set()  # ids of the reads of `PLACES` that stand where they may

    def read(self, tree: ast.Module) -> None:
        self.classes = set(defined_classes(tree))
        self.modules = imported_modules(tree)
        for node in ast.walk(tree):  # every import first: a module's name is known wherever read
            if isinstance(node, ast.Import | ast.ImportFrom):
                self.read_import(node)
        self.visit(tree)

    # -- imports -----------------------------------------------------------------------------

    def read_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.require_module(node, alias.name)
            return
        if any(alias.name == "*" for alias in node.names):
            raise RuleBroken(node, said("imports * from {module}", module=node.module or "."))
        if node.level:
            self.read_own_import(node)
            return
        self.require_module(node, node.module or "")
        for alias in node.names:
            bound = alias.asname or alias.name
            if (dotted := f"{node.module}.{alias.name}") in PLACES:
                self.placed_names[bound] = dotted
            if self.attribute_module(node, node.module, alias.name) is None:
                self.imported.add(bound)

    def read_own_import(self, node: ast.ImportFrom) -> None:
        """`from .stem import name`: a module that file binds is a module here too;
        `from . import stem`: the submission's own module."""
        if node.level > 1:
            raise RuleBroken(node, said("imports from outside the submission's folder"))
        for alias in node.names:
            bound = alias.asname or alias.name
            if node.module is None:
                self.own[bound] = alias.name
            elif alias.name in (theirs := self.shared.modules.get(node.module, {})):
                self.require_module(node, theirs[alias.name])
                self.modules[bound] = theirs[alias.name]
            elif alias.name in self.shared.classes.get(node.module, {}):
                self.classes.add(bound)

    def require_module(self, node: ast.AST, module: str) -> None:
        if reason := unreachable(module, self.allowed):
            raise RuleBroken(node, said("imports {module}, {reason}", module=module, reason=reason))

    # -- modules -----------------------------------------------------------------------------

    def attribute_module(self, node: ast.AST, module: str, attribute: str) -> str | None:
        """Check a read of `module.attribute` (`module` dotted); the module it is, if one."""
        name = f"{module}.{attribute}"
        if attribute.startswith("_"):
            raise RuleBroken(node, said("reads {name}, not a public name", name=name))
        if reason := REFUSED.get(name):
            raise RuleBroken(node, said("reads {name}, which {reason}", name=name, reason=reason))
        if (reached := module_named(module, attribute)) is None:
            return None
        if (reason := unreachable(reached, self.allowed)) and reached == name:
            raise RuleBroken(node, said("reads {name}, {reason}", name=name, reason=reason))
        if reason:
            what = said(
                "reads {name}, which is the module {module}, {reason}",
                name=name,
                module=reached,
                reason=reason,
            )
            raise RuleBroken(node, what)
        return reached

    def module_of(self, node: ast.expr) -> str | None:
        """The dotted module `node` reads (`torch.nn` for `torch.nn`), checking each step; None
        when it is not a module."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in self.own:
                return self.shared.modules.get(self.own[node.value.id], {}).get(node.attr)
            if base := self.module_of(node.value):
                return self.attribute_module(node, base, node.attr)
        return None

    def library_rooted(self, node: ast.expr) -> bool:
        """Whether `node` is reached from a module by name: `torch.Tensor`, `F.pad`."""
        while isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        return isinstance(node, ast.Name) and node.id in self.modules

    def as_value(self, node: ast.AST, module: str) -> RuleBroken:
        return RuleBroken(
            node, said("uses the module {name} as a value, not as module.name", name=module)
        )

    # -- what the file reads -----------------------------------------------------------------

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if why := hidden(node.attr):
            raise RuleBroken(node, why)
        if not isinstance(node.ctx, ast.Load) and node.attr == "__class__":
            raise RuleBroken(
                node, said("changes {name}, an object's class", name=ast.unparse(node))
            )
        if not isinstance(node.ctx, ast.Load) and self.library_rooted(node.value):
            if self.module_of(node.value) is None:  # a read on the way breaks the rule first
                self.visit(node.value)
            raise RuleBroken(node, said("changes {name}, a library's", name=ast.unparse(node)))
        if (module := self.module_of(node)) is not None:  # `torch.nn`, not `torch.nn.Module`
            raise self.as_value(node, module)
        if (base := self.module_of(node.value)) is not None:
            self.require_placed(node, f"{base}.{node.attr}")
            return  # the module's name is read as `module.name` (checked): no bare read
        if isinstance(node.value, ast.Name) and node.value.id in self.own:
            return  # a name of the submission's own module, not a module (checked)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not isinstance(node.ctx, ast.Load) and self.library_rooted(node.value):
            raise RuleBroken(node, said("changes {name}, a library's", name=ast.unparse(node)))
        if self.annotating and isinstance(node.value, ast.Name) and node.value.id == "type":
            self.visit(node.slice)  # `type[A]`, an annotation's (elsewhere it calls like type)
            return
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if (node.id in self.modules or node.id in self.own) and not isinstance(node.ctx, ast.Del):
            raise self.as_value(node, node.id)
        if node.id in self.builtins_read:
            raise RuleBroken(
                node, said("reads {name}, which finds names at run time", name=node.id)
            )
        if special(node.id) and node.id not in NAME_DUNDERS | DUNDERS:
            what = said("uses {name}, a special name the rule does not list", name=node.id)
            raise RuleBroken(node, what)
        if node.id in self.named:
            what = said("reads {name} other than called with a literal name", name=node.id)
            raise RuleBroken(node, what)
        if node.id in self.type_read and isinstance(node.ctx, ast.Load) and not self.annotating:
            raise RuleBroken(
                node, said("reads {name} other than as {form}", name="type", form="type(x)")
            )
        if node.id in self.placed_names:
            self.require_placed(node, self.placed_names[node.id])

    def require_placed(self, node: ast.expr, name: str) -> None:
        """A read of one of `PLACES`: only where it may stand."""
        if name in PLACES and id(node) not in self.placed:
            raise RuleBroken(node, PLACES[name])

    def place(self, node: ast.expr, name: str) -> None:
        """Let `node` read `name` of `PLACES`, if it reads it (as a call's function or bare)."""
        node = node.func if isinstance(node, ast.Call) else node
        module, _, attribute = name.rpartition(".")
        by_name = isinstance(node, ast.Name) and self.placed_names.get(node.id) == name
        by_module = (
            isinstance(node, ast.Attribute)
            and node.attr == attribute
            and isinstance(node.value, ast.Name)
            and self.modules.get(node.value.id) == module
        )
        if by_name or by_module:
            self.placed.add(id(node))

    def visit_arg(self, node: ast.arg) -> None:
        self.annotation(node.annotation)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.annotation(node.annotation)
        for child in (node.target, node.value):
            if child is not None:
                self.visit(child)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for child in [*node.decorator_list, node.args, *node.body]:
            self.visit(child)
        self.annotation(node.returns)

    visit_AsyncFunctionDef = visit_FunctionDef

    def annotation(self, node: ast.expr | None) -> None:
        """Read an annotation, where `type` may stand as a value (`x: type = int`)."""
        if node is not None:
            self.annotating, outer = True, self.annotating
            try:
                self.visit(node)
            finally:
                self.annotating = outer

    def visit_match_case(self, node: ast.match_case) -> None:
        for pattern in ast.walk(node.pattern):
            for attribute in getattr(pattern, "kwd_attrs", []):
                if why := hidden(attribute):
                    raise RuleBroken(pattern, why)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(keyword.arg in ("metaclass", None) for keyword in node.keywords):
            raise RuleBroken(node, said("defines a class with a metaclass"))
        for base in node.bases:
            if not self.is_allowed_base(base):
                raise RuleBroken(
                    base,
                    said("derives a class from {base}, not a class statement's or a library's",
                         base=ast.unparse(base)),
                )  # fmt: skip
        for decorator in node.decorator_list:
            self.place(decorator, DATACLASS)
        decorated = any(id(getattr(d, "func", d)) in self.placed for d in node.decorator_list)
        for statement in class_scope(node.body):
            if isinstance(statement, ast.Import | ast.ImportFrom):
                raise RuleBroken(statement, said("imports a module in a class body"))
        for statement in node.body if decorated else []:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.value, ast.Call):
                self.place(statement.value, FIELD)
        self.generic_visit(node)

    def is_allowed_base(self, base: ast.expr) -> bool:
        """Whether `base`, a class's base, is a class a class statement made (this file's or
        another of the submission's), a library's (`torch.nn.Module`, `typing.Generic[T]`,
        `Collection[int]` imported by name) or a builtin class (`RuntimeError`): never one a
        metaclass made from a namespace."""
        if isinstance(base, ast.Subscript):
            base = base.value
        own = isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name)
        if own and (stem := self.own.get(base.value.id)) is not None:
            return base.attr in self.shared.classes.get(stem, {})
        if isinstance(base, ast.Name):
            builtin = getattr(builtins, base.id, None)
            return base.id in self.classes | self.imported or (
                isinstance(builtin, type) and base.id != "type" and base.id not in self.modules
            )
        return self.library_rooted(base)

    def visit_Call(self, node: ast.Call) -> None:
        callee = node.func
        if isinstance(callee, ast.Name) and callee.id in self.named:
            self.read_by_name(node, callee.id)
        elif isinstance(callee, ast.Attribute) and callee.attr in SETTERS:
            self.read_setter(node, callee)
        elif isinstance(callee, ast.Name) and callee.id in self.type_read:
            if len(node.args) != 1 or node.keywords:
                what = said("calls {name} with other than one argument", name="type()")
                raise RuleBroken(node, what)
            self.visit(node.args[0])
        elif (
            isinstance(callee, ast.Name)
            and callee.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id in self.type_read
        ):
            self.visit(node.args[0])  # `isinstance(x, type)`
        else:
            self.generic_visit(node)

    def read_by_name(self, node: ast.Call, function: str) -> None:
        """`getattr(obj, "name")`, `setattr(...)`, `delattr(...)`: with a literal name that keeps
        the rule, on a module as `module.name` would, and changing nothing of a library's."""
        target = node.args[0] if node.args else None
        name = self.literal_name(node, function, node.args[1:2], node.keywords)
        if target is not None and function != "getattr" and self.library_rooted(target):
            shown = f"{ast.unparse(target)}.{name}"
            raise RuleBroken(node, said("changes {name}, a library's", name=shown))
        if target is not None and (module := self.module_of(target)) is not None:
            if reached := self.attribute_module(node, module, name):
                raise self.as_value(node, reached)
            self.require_placed(node, f"{module}.{name}")
        elif target is not None:
            self.visit(target)
        for argument in node.args[2:]:
            self.visit(argument)

    def read_setter(self, node: ast.Call, callee: ast.Attribute) -> None:
        """`object.__setattr__(self, "name", value)`: a literal name that keeps the rule, and
        nothing of a library's changed."""
        bound = not isinstance(callee.value, ast.Name) or callee.value.id not in ("object", "type")
        names = node.args[0:1] if bound else node.args[1:2]
        name = self.literal_name(node, f".{callee.attr}", names, node.keywords)
        target = callee.value if bound else (node.args[0] if node.args else callee.value)
        if self.library_rooted(target):
            raise RuleBroken(
                node, said("changes {name}, a library's", name=f"{ast.unparse(target)}.{name}")
            )
        self.generic_visit(node)

    def literal_name(
        self, node: ast.Call, function: str, names: list[ast.expr], keywords: list[ast.keyword]
    ) -> str:
        """The literal attribute name `function` is called with; not a hidden one."""
        name = string_of(names[0]) if len(names) == 1 and not keywords else None
        if name is None:
            raise RuleBroken(node, said("calls {name} with a computed name", name=function))
        if why := hidden(name):
            raise RuleBroken(node, why)
        return name


def string_of(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
