"""The kernel rule: what `paged_attention.py` may do outside its Triton kernels, read by the
grading process from the file's syntax tree (never run).

Anywhere in the file: imports only of the contract's modules and `triton` (none of the submission's
other files: it is graded alone); nothing that runs or finds code by name (`exec`, `eval`,
`compile`, `__import__`, `vars`, `globals`, `getattr` with a computed name, the interpreter's hidden
attributes, torch's internals, Triton's launch machinery); no change to an attribute but those of
objects of the file's own classes, no second binding of torch's or triton's names or of a
module-level function's, no decorator but `DECORATORS`, no class with a special method Python calls
on its own (`__len__`, `__instancecheck__`...) or a metaclass; `paged_attention_decode` one plain
`def` of the module whose first three parameters take `q`, `k_cache` and `v_cache`; and in a
kernel's body, which Triton's interpreter runs as Python on the CPU, no module but Triton's and no
function of the file but kernels.

Outside the kernels, the data of `q`, `k_cache` and `v_cache`, of whatever is made from them, and
of every tensor a kernel launch, a function of the file or an in-place copy may have written
(with the tensors that view it: `Function.taint`), may only be viewed, copied, filled, converted,
measured (shapes, strides, dtypes) and handed to a launch or to a function of the file: no
arithmetic, comparison, truth test, iteration, computed index or any other call on it, no store
of it in an attribute, an item or a name of another scope, and no launch given it in a tuple or
list. The values of `block_tables` never index it (a gather from the cache is the kernel's work).
Integer bookkeeping on `seq_lens`, `block_tables`, shapes and strides is free.

`first_break` gives a line that breaks it, and how; `grade.runnable` then never runs the
file: every kernel check and the engine check fail, saying so, and the kernel part scores 0. This
is the kernel's verdict, which nothing in a worker can change: the worker's torch dispatch mode
and launch count only guide an honest candidate. It was written against 30 honest wrappers and
over 100 ways around it (`tests/grader/test_kernel_rule.py` keeps a sample of each); a way it
still misses is a gap to close here, with its case added there.
"""

import ast
from collections.abc import Iterable, Iterator

from grader.said import said
from grader.scan import (
    ALLOWED_IMPORTS,
    FRAMES,
    JIT_DECORATORS,
    LOADER,
    OBJECT_GRAPH,
    escape_reason,
    import_aliases,
)

ENTRY = "paged_attention_decode"
TENSORS = 3  # the entry's first parameters (q, k_cache, v_cache): their data is a kernel's alone
IMPORTS = ALLOWED_IMPORTS | {"triton"}
RULE = (
    "outside its @triton.jit kernels, paged_attention.py may only allocate, view, copy, fill and "
    "convert tensors, do integer bookkeeping and launch its kernels (exercises/README.md, part 4)"
)
BY_NAME = {"exec", "eval", "compile", "__import__", "vars", "globals", "locals", "breakpoint"}
BY_NAME |= {"__builtins__", "__loader__", "__spec__"}
NAMED = {"getattr", "setattr", "delattr", "hasattr"}  # only with a literal name
HIDDEN = FRAMES | OBJECT_GRAPH | LOADER | {"__dict__", "__class__", "__getattribute__"}
# What the tensors' data may be given to: methods that view, copy, fill or convert it (their
# result holds it), that measure it or allocate beside it (theirs does not).
VIEWS = {
    "view", "view_as", "reshape", "reshape_as", "contiguous", "to", "type", "float", "half",
    "bfloat16", "double", "long", "int", "short", "bool", "clone", "detach", "copy_", "fill_",
    "zero_", "unsqueeze", "squeeze", "expand", "expand_as", "permute", "transpose", "t", "flatten",
    "unflatten", "narrow", "select", "as_strided", "cpu", "cuda", "unbind", "split", "chunk",
    "masked_fill", "masked_fill_", "index_fill", "index_fill_",
}  # fmt: skip
MEASURES = {
    "stride", "size", "dim", "ndimension", "numel", "nelement", "element_size", "is_contiguous",
    "storage_offset", "is_floating_point", "get_device",
    "new_empty", "new_zeros", "new_ones", "new_full",
}  # fmt: skip
MEASURED = {  # attributes
    "shape", "dtype", "device", "is_cuda", "ndim", "layout", "itemsize", "nbytes",
    "requires_grad", "is_leaf", "is_sparse", "is_quantized", "is_meta",
}  # fmt: skip
TORCH_MEASURES = {"torch.is_tensor", "torch.is_floating_point", "torch.numel"}
TORCH_MEASURES |= {"torch.cuda.device_of", "torch.cuda.device", "torch.device"}
TORCH_MEASURES |= {"torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like"}
BUILTIN_MEASURES = {"len", "isinstance", "type"}  # `type` of one argument
SCALARS = BUILTIN_MEASURES | {"int", "float", "bool"}
SCALAR_OF_SCALARS = {"min", "max", "abs", "round", "divmod"}  # a number when given numbers
CONTAINERS = (ast.Dict, ast.Set, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
INDEXING = {"select", "narrow", "as_strided", "index_fill", "index_fill_"}  # constants only
CLASS_DUNDERS = {"__init__", "__call__", "__post_init__"}  # a class of the file may define
KERNEL_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics"}
TRUSTED = {"torch", "triton"}  # modules whose names the reading trusts: never bound again
DECORATORS = {"functools.lru_cache", "functools.cache", "functools.wraps", "dataclasses.dataclass"}
DECORATORS |= {"functools.cached_property"}
DECORATORS |= {"torch.no_grad", "torch.inference_mode"}
DECORATORS |= {"staticmethod", "classmethod", "property"} | KERNEL_DECORATORS
SCALAR_METHODS = {
    "stride", "size", "dim", "ndimension", "numel", "nelement", "element_size", "storage_offset",
    "get_device", "item", "bit_length",
}  # fmt: skip


class RuleBroken(Exception):
    """The first break of the kernel rule: its line and what the file does there."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(f"line {line} {what}: {RULE}")


def first_break(source: bytes) -> str | None:
    """Why `paged_attention.py` breaks the kernel rule, at the first line the reading meets that
    does; None when it keeps it (or does not parse: `scan.syntax_errors` has that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    try:
        Reader(tree).read()
    except RuleBroken as broken:
        return str(broken)
    except (RecursionError, MemoryError):
        return f"line 1 is too deeply nested for the grader to read: {RULE}"
    return None


def shown(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return f"`{text if len(text) <= 60 else text[:57] + '...'}`"


class Reader:
    """Reads one kernel file: the rules that hold everywhere (`everywhere`), then the code outside
    its kernels, the module first, each function within the one that defines it (`Function`),
    again until what its functions are given and give back settles."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree, self.aliases = tree, import_aliases(tree)
        self.methods: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for node in ast.walk(tree):
            for item in node.body if isinstance(node, ast.ClassDef) else ():
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    self.methods.setdefault(item.name, []).append(item)
        in_classes = {id(item) for items in self.methods.values() for item in items}
        top: set[str] = set()
        for node in tree.body:  # the module's names, each bound once
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name in top or node.name in self.aliases:
                    raise RuleBroken(node.lineno, f"defines {node.name} a second time")
                top.add(node.name)
        self.top = top - {ENTRY}
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.same_named: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and id(node) not in in_classes
            ):
                self.functions.setdefault(node.name, node)
                self.same_named.setdefault(node.name, []).append(node)
        self.kernels = {
            name for name, nodes in self.same_named.items() if all(map(self.is_kernel, nodes))
        }
        self.launchers = self.launching()
        self.given: dict[str, set[str]] = {}  # by function: its parameters given tainted data
        self.given_table: dict[str, set[str]] = {}  # and those given the block table's data
        self.module_scalars: set[str] = set()  # the module's names bound to numbers
        self.kernel_params: dict[tuple[str, str], set[bool]] = {}  # whether given kernels only
        classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        self.instances = {  # the module's names bound to an object of one of its classes
            target.id
            for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") in classes
            for target in node.targets if isinstance(target, ast.Name)
        }  # fmt: skip
        self.gives: set[str] = set()  # the functions that return tainted data
        self.self_attributes: set[str] = set()  # attributes of `self` that hold tainted data
        self.objects = self.instances | {  # names bound anywhere to an object of a file's class
            target.id
            for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") in classes
            for target in node.targets if isinstance(target, ast.Name)
        }  # fmt: skip

    def launching(self) -> set[str]:
        """The functions of the file that launch a kernel, themselves or through another."""
        calls = {
            name: {
                call.func.value.id if isinstance(call.func, ast.Subscript) else call.func.id
                for call in ast.walk(node)
                if isinstance(call, ast.Call)
                and isinstance(getattr(call.func, "value", call.func), ast.Name)
                and isinstance(call.func, ast.Subscript | ast.Name)
            }
            for name, node in self.functions.items()
        }
        launchers: set[str] = set()
        while grown := {n for n, called in calls.items() if called & (self.kernels | launchers)}:
            if grown <= launchers:
                return launchers
            launchers |= grown
        return launchers

    def is_kernel(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Decorated by `triton.jit` (of the imported triton), and by nothing but Triton's."""
        decorators = [self.module_of(getattr(item, "func", item)) for item in node.decorator_list]
        return bool(JIT_DECORATORS & set(decorators)) and set(decorators) <= KERNEL_DECORATORS

    def dotted(self, node: ast.expr) -> str | None:
        """`a.b.c` with `a` resolved through the imports; a literal `getattr(a, "b")` as `a.b`."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute) and (base := self.dotted(node.value)):
            return f"{base}.{node.attr}"
        if is_literal_getattr(node) and (base := self.dotted(node.args[0])):
            return f"{base}.{node.args[1].value}"
        return None

    def module_of(self, node: ast.expr) -> str | None:
        """The dotted name of `node` where it is rooted at an imported name, else None."""
        root = node
        while isinstance(root, ast.Attribute) or is_literal_getattr(root):
            root = root.value if isinstance(root, ast.Attribute) else root.args[0]
        if isinstance(root, ast.Name) and root.id in self.aliases:
            return self.dotted(node)
        return None

    def read(self) -> None:
        self.entry()
        for node in ast.walk(self.tree):
            self.everywhere(node)
        entry = self.functions[ENTRY]
        params = [arg.arg for arg in [*entry.args.posonlyargs, *entry.args.args]]
        self.given[ENTRY] = set(params[:TENSORS])
        self.given_table[ENTRY] = set(params[TENSORS : TENSORS + 1])  # block_tables
        self.entry_params = set(params)
        while True:
            before = self.state()
            Function(self, ENTRY_MODULE, self.tree.body, set(), set()).run()
            if before == self.state():
                return

    def state(self) -> tuple:
        """What a reading of the file learns of its functions: it only grows, until it settles."""
        given = {name: set(params) for name, params in self.given.items()}
        return given, set(self.gives), set(self.self_attributes)

    def entry(self) -> None:
        """`paged_attention_decode` is one plain `def` of the module, bound nowhere else."""
        defs = [
            node
            for node in self.tree.body
            if isinstance(node, ast.FunctionDef) and node.name == ENTRY and not node.decorator_list
        ]
        bindings = [
            node
            for node in ast.walk(self.tree)
            if (isinstance(node, ast.Name) and node.id == ENTRY
                and not isinstance(node.ctx, ast.Load))
            or (isinstance(node, ast.alias) and (node.asname or node.name) == ENTRY)
            or (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == ENTRY)
        ]  # fmt: skip
        if len(defs) != 1 or len(bindings) != 1:
            line = next((node.lineno for node in bindings if hasattr(node, "lineno")), 1)
            raise RuleBroken(line, f"defines {ENTRY} other than by one plain def of the module")
        args = defs[0].args
        if len([*args.posonlyargs, *args.args]) < TENSORS:
            raise RuleBroken(defs[0].lineno, f"defines {ENTRY} without q, k_cache and v_cache as "
                             "its first three parameters")  # fmt: skip

    def everywhere(self, node: ast.AST) -> None:
        """The rules that hold in the whole file, kernels included."""
        if isinstance(node, ast.ImportFrom) and node.level:
            module = "." * node.level + (node.module or "")
            raise RuleBroken(node.lineno, f"imports {module}: paged_attention.py is graded alone, "
                             "without your other files")  # fmt: skip
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                module = getattr(node, "module", None) or alias.name
                if module.split(".")[0] not in IMPORTS:
                    raise RuleBroken(node.lineno, f"imports {module}, outside the modules the "
                                     "contract lists")  # fmt: skip
        if isinstance(node, ast.Name) and node.id in BY_NAME:
            raise RuleBroken(node.lineno, f"reads {node.id}, which runs or finds code by name")
        if isinstance(node, ast.ClassDef):
            dunders = [
                name for item in node.body
                for name in (
                    [item.name] if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    else bound(item.targets[0]) if isinstance(item, ast.Assign)
                    else bound(item.target) if isinstance(item, ast.AnnAssign) else []
                )
                if name.startswith("__") and name not in CLASS_DUNDERS
            ]  # fmt: skip
            if node.keywords or dunders:
                what = dunders[0] if dunders else "a metaclass"
                raise RuleBroken(node.lineno, f"gives the class {node.name} {what}, which Python "
                                 "calls on its own")  # fmt: skip
        if "self" in set(bound_by(node)) and not isinstance(node, ast.arg):
            raise RuleBroken(node.lineno, "binds self, which names a method's own object")
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            root = node.value
            while isinstance(root, ast.Attribute | ast.Subscript):
                root = root.value
            if getattr(root, "id", None) not in {"self", *self.objects}:
                raise RuleBroken(node.lineno, f"changes {shown(node)}: only the attributes of an "
                                 "object of a class of the file may change")  # fmt: skip
        modules = {name for name, dotted in self.aliases.items() if dotted.split(".")[0] in TRUSTED}
        bound_here = {*bound_by(node)} & (modules | self.top)
        if bound_here:
            raise RuleBroken(node.lineno, f"binds {min(bound_here)} again, the name of an "
                             "import or of a function of the file")  # fmt: skip
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                name = self.module_of(getattr(decorator, "func", decorator))
                name = name or getattr(getattr(decorator, "func", decorator), "id", None)
                if name not in DECORATORS:
                    raise RuleBroken(decorator.lineno, f"decorates {node.name} with "
                                     f"{shown(decorator)}, which may replace it")  # fmt: skip
            if node.name in self.functions and self.is_kernel(node):
                self.kernel_body(node)
        if isinstance(node, ast.Attribute) and node.attr in HIDDEN:
            raise RuleBroken(node.lineno, f"reads .{node.attr}, the interpreter's internals")
        named = isinstance(node, ast.Call) and getattr(node.func, "id", None) in NAMED
        if named and not is_literal_getattr(node):
            raise RuleBroken(node.lineno, f"calls {node.func.id} with a computed name")
        if named:
            attribute = node.args[1].value
            if attribute in HIDDEN | BY_NAME or attribute.startswith("__"):
                raise RuleBroken(node.lineno, f"reads {attribute} by name, the interpreter's "
                                 "internals")  # fmt: skip
            root = getattr(node.args[0], "id", None)
            if node.func.id in ("setattr", "delattr") and root not in {"self", *self.objects}:
                raise RuleBroken(
                    node.lineno,
                    f"changes {shown(node.args[0])}.{attribute}: only the attributes of an "
                    "object of a class of the file may change",
                )
        if isinstance(node, ast.Attribute | ast.Name | ast.Call) and (name := self.module_of(node)):
            if reason := escape_reason(name):
                raise RuleBroken(
                    node.lineno, said("uses {name} ({reason})", name=name, reason=reason)
                )
            if isinstance(node, ast.Call):
                changed = node.func.id in ("setattr", "delattr")
            else:
                changed = not isinstance(node.ctx, ast.Load) and "." in name
            if changed:
                raise RuleBroken(node.lineno, f"changes {name}, a module's attribute")

    def kernel_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A kernel's body runs as Python under Triton's interpreter (the CPU's checks): it may
        reach no module but Triton's, and call no function of the file but kernels."""
        for inner in ast.walk(node):
            name = self.module_of(inner) if isinstance(inner, ast.Name | ast.Attribute) else None
            if name and name.split(".")[0] != "triton":
                raise RuleBroken(inner.lineno, f"uses {name} inside the @triton.jit kernel "
                                 f"{node.name}")  # fmt: skip
            called = isinstance(inner, ast.Call) and getattr(inner.func, "id", None)
            if called in self.functions and called not in self.kernels:
                raise RuleBroken(inner.lineno, f"calls {called}, not a kernel, inside the "
                                 f"@triton.jit kernel {node.name}")  # fmt: skip


ENTRY_MODULE = "<module>"


def bound_by(node: ast.AST) -> Iterator[str]:
    """The names `node` binds (an assignment target, a parameter, an import's alias)."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
        yield node.name


def is_literal_getattr(node: ast.AST) -> bool:
    """`getattr(x, "name")` (and `setattr`, `hasattr`...) with a literal name."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in NAMED
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


class Function:
    """Reads one function's body (or the module's, or a class's), outside kernels, in the order
    it runs. `taint` holds its names that hold the tensors' data: it only grows, and a loop's
    body is read twice, so that what a later line taints is seen by the earlier ones. `scalars`
    holds the names last bound to a number (a shape, a stride, `int(...)`, arithmetic), which a
    launch cannot write into. The functions it defines are read after it, with its taint."""

    def __init__(
        self, reader: Reader, name: str, body: list[ast.stmt], taint: set[str], params: set[str]
    ) -> None:
        self.reader, self.name, self.body = reader, name, body
        self.taint = set(taint) | reader.given.get(name, set())
        self.table = set(reader.given_table.get(name, set()))  # the block table's data
        self.made = own_names(body)  # the names it binds itself
        self.scalars = reader.module_scalars - self.made
        self.own = self.made | params
        # what a launch cannot write into, for want of room: the entry's own `block_tables`,
        # `seq_lens` and `scale`, and their views and conversions
        self.unwritable = reader.entry_params - self.taint if name == ENTRY else set()
        self.items: dict[str, list[bool]] = {}  # a name bound to a tuple or list written out
        self.views: set[tuple[str, str]] = set()  # (a, b): a was bound to a view of b
        self.packs: dict[str, set[str]] = {}  # a name bound to a tuple written out: its names
        self.kernel_names: set[str] = set()  # names bound to one of the file's kernels
        self.defined: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

    def run(self) -> None:
        self.statements(self.body)
        if self.name == ENTRY_MODULE:
            self.reader.module_scalars = set(self.scalars)
        for node in self.defined:
            if not self.reader.is_kernel(node):
                Function(self.reader, node.name, node.body, self.taint, params_of(node)).run()

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                self.expression(decorator)
            arguments = getattr(node, "args", None)  # a class has none
            defaults = [*arguments.defaults, *arguments.kw_defaults] if arguments else []
            if self.any_held(defaults):
                self.broken(node, "binds, as a default,")
            if isinstance(node, ast.ClassDef):
                self.statements(node.body)
            else:
                self.defined.append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            held = node.value is not None and self.expression(node.value)
            for target in targets:
                self.bind(target, held, node.value)
        elif isinstance(node, ast.AugAssign):
            if self.expression(node.value) | bool(bound(node.target) & self.taint):
                self.broken(node, "computes on")
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.bind_items(node.target, node.iter)
            for _ in range(2):
                self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.While):
            for _ in range(2):
                self.truth(node.test)
                self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.If):
            self.truth(node.test)
            self.statements(node.body)
            self.statements(node.orelse)
        elif isinstance(node, ast.Assert):
            self.truth(node.test)
            self.expression(node.msg)
        elif isinstance(node, ast.Return):
            if self.expression(node.value):
                self.reader.gives.add(self.name)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, self.expression(item.context_expr), None)
                else:
                    self.expression(item.context_expr)
            self.statements(node.body)
        elif isinstance(node, ast.Match) and self.expression(node.subject):
            self.broken(node.subject, "matches on")
        else:  # try, raise, del, match, an expression...
            for child in ast.iter_child_nodes(node):
                self.child(child)

    def child(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self.statement(node)
        elif isinstance(node, ast.expr):
            self.expression(node)
        elif isinstance(node, ast.ExceptHandler | ast.match_case):
            for part in ast.iter_child_nodes(node):
                self.child(part)

    def bind(self, target: ast.expr, held: bool, value: ast.expr | None) -> None:
        """An assignment of `value`, which holds tainted data (`held`) or not, to `target`: a
        tuple written out to a tuple of names, item by item."""
        pairs = unpacked(target, value)
        if pairs is not None:
            for item_target, item_value in pairs:
                self.bind(item_target, self.expression(item_value), item_value)
            return
        names = bound(target)
        if held and not isinstance(target, ast.Name | ast.Tuple | ast.List | ast.Starred):
            self.broken(target, "stores, in an attribute or an item,")
        if held and names - self.own:
            self.broken(target, "stores, beyond the function's own names,")
        if held:
            self.taint |= self.with_views(names)
        if value is not None and mentions(value, self.table):
            self.table |= names
        functions = {*self.reader.functions, *self.reader.instances}
        bases = viewed(value, functions) | pointed(value)
        self.views |= {(name, base) for name in names for base in bases}
        if bases and bases <= self.unwritable:
            self.unwritable |= names
        if isinstance(target, ast.Name):
            choices = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
            if all(getattr(c, "id", None) in self.reader.kernels for c in choices):
                self.kernel_names.add(target.id)
            else:
                self.kernel_names.discard(target.id)
            if isinstance(value, ast.Tuple | ast.List):
                self.packs[target.id] = set().union(*map(bound, value.elts))
                self.items[target.id] = [self.expression(item) for item in value.elts]
            elif isinstance(value, CONTAINERS):
                self.items[target.id] = [held]
            else:
                self.items.pop(target.id, None)
        scalar = is_scalar(value, self) if isinstance(target, ast.Name) else is_measure(value)
        scalar = scalar and not pointed(value)
        if isinstance(target, ast.Name | ast.Tuple | ast.List):
            self.scalars = self.scalars | names if scalar else self.scalars - names

    def bind_items(self, target: ast.expr, iterable: ast.expr) -> None:
        if mentions(iterable, self.table):
            self.table |= bound(target)
        self.bind_each(target, iterable)

    def bind_each(self, target: ast.expr, iterable: ast.expr) -> None:
        """A loop's target, or a comprehension's, bound to each item of `iterable`: a tuple or
        list written out, or a name bound to one, gives its items (position by position where
        each item is itself written out as the target is); iterating over tainted data breaks."""
        items = self.items_of(iterable)
        if items is None:
            self.iterated(iterable)
            self.bind(target, False, iterable)
            return
        rows = iterable.elts if isinstance(iterable, ast.Tuple | ast.List) else []
        for row in rows:
            self.views |= {(name, base) for name in bound(target) for base in viewed(row)}
        if (
            isinstance(target, ast.Tuple)
            and rows
            and all(
                isinstance(row, ast.Tuple) and len(row.elts) == len(target.elts) for row in rows
            )
        ):
            for at, name in enumerate(target.elts):
                self.bind(name, any(self.expression(row.elts[at]) for row in rows), None)
            return
        zipped = getattr(getattr(iterable, "func", None), "id", None) in ("zip", "enumerate")
        if zipped and isinstance(target, ast.Tuple):  # zip(a, b) position by position
            columns = [[False]] if iterable.func.id == "enumerate" else []
            columns += [self.items_of(argument) for argument in iterable.args]
            if len(columns) == len(target.elts):
                for name, column in zip(target.elts, columns, strict=True):
                    self.bind(name, any(column), None)
                return
        self.bind(target, any(items), None)

    def items_of(self, node: ast.expr) -> list[bool] | None:
        """Whether each item of a tuple or list written out (or of a name bound to one) holds
        tainted data; None for anything else."""
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return [self.expression(item) for item in node.elts]
        if isinstance(node, ast.Name) and node.id in self.items:
            return self.items[node.id]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("zip", "enumerate"):
            each = [self.items_of(argument) for argument in node.args]
            if each and all(items is not None for items in each):
                return [any(any(items) for items in each)]
        return None

    def broken(self, node: ast.AST, what: str) -> None:
        raise RuleBroken(
            node.lineno, f"{shown(node)} {what} the data of q, k_cache or v_cache outside a "
            "@triton.jit kernel"
        )  # fmt: skip

    def truth(self, node: ast.expr) -> None:
        if self.expression(node):
            self.broken(node, "tests the truth of")

    def iterated(self, node: ast.expr) -> bool:
        """Whether iterating over `node` gives tainted items (`items_of`); iterating over
        tainted data itself breaks the rule."""
        items = self.items_of(node)
        if items is not None:
            return any(items)
        if self.expression(node):
            self.broken(node, "iterates over")
        return False

    def expression(self, node: ast.expr | None) -> bool:
        """Read `node`, raising `RuleBroken` where it computes with tainted data; whether its value
        holds tainted data."""
        if node is None or isinstance(node, ast.Constant):
            return False
        if isinstance(node, ast.Name):
            return node.id in self.taint
        if isinstance(node, ast.Attribute):
            own = (
                getattr(node.value, "id", None) in {"self", *self.reader.objects}
                and node.attr in self.reader.self_attributes
            )
            return (self.expression(node.value) or own) and node.attr not in MEASURED
        if isinstance(node, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.Compare):
            operands = list(expressions_in(node))
            held = [self.expression(operand) for operand in operands]
            identity = isinstance(node, ast.Compare) and all(
                isinstance(op, ast.Is | ast.IsNot) for op in node.ops
            )
            if any(held) and not identity:
                self.broken(node, "computes on")
            return False
        if isinstance(node, ast.IfExp):
            self.truth(node.test)
            return self.expression(node.body) | self.expression(node.orelse)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Starred):
            return self.iterated(node.value)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return self.comprehension(node)
        if isinstance(node, ast.Lambda):
            if self.any_held([*node.args.defaults, *node.args.kw_defaults]):
                self.broken(node, "binds, as a default,")
            lambda_ = Function(self.reader, "<lambda>", [], self.taint, params_of(node))
            return lambda_.expression(node.body)  # the lambda holds what its body holds
        if isinstance(node, ast.Yield | ast.YieldFrom | ast.Await):
            held = self.expression(node.value)
            if held:
                self.reader.gives.add(self.name)
            return held
        if isinstance(node, ast.NamedExpr):
            held = self.expression(node.value)
            self.bind(node.target, held, node.value)
            return held
        return self.any_held(expressions_in(node))

    def any_held(self, nodes: Iterable[ast.expr | None]) -> bool:
        """Read every one of `nodes`; whether any holds tainted data."""
        held = [self.expression(node) for node in nodes]
        return any(held)

    def comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> bool:
        for generator in node.generators:
            self.own |= bound(generator.target)
            self.bind_items(generator.target, generator.iter)
            for test in generator.ifs:
                self.truth(test)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return self.any_held(parts)

    def subscript(self, node: ast.Subscript) -> bool:
        """`x[...]`: a view of tainted data where each index is a constant or a slice of
        untainted bounds; any other index of it gathers."""
        held = self.expression(node.value)
        index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if self.any_held(index):
            self.broken(node, "indexes by")
        if held and not all(is_view_index(item) for item in index):
            self.broken(node, "gathers by a computed index")
        if held and mentions(node.slice, self.table):
            self.broken(node, "gathers by the block table")
        return held

    def call(self, node: ast.Call) -> bool:
        """A call: a kernel launch, a function or method of the file, a module's function, a
        tensor's method or a builtin; whether its result holds tainted data. A launch, and a
        function of the file given tainted data, taint the tensors they are given (`written`); a
        method given tainted data taints its tensor (`out.copy_(q)`)."""
        arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
        func = node.func
        passed = (isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name)) or (
            getattr(func, "id", None) in {*self.reader.functions, *self.reader.instances}
            or (
                getattr(func, "attr", None) in self.reader.methods
                and getattr(getattr(func, "value", None), "id", None)
                in {"self", *self.reader.objects}
            )
        )  # a launch or a function of the file: its `*args` are handed on, not iterated
        held = [self.expression(unstarred(a) if passed else a) for a in arguments]
        if isinstance(func, ast.Subscript) and self.launched(func):
            given = [*node.args, *(kw.value for kw in node.keywords if kw.arg is not None)]
            if any(  # each passed as it is: `*args` and `**meta` hand on their items
                isinstance(a, ast.Tuple | ast.List | ast.Set | ast.Dict)
                or (getattr(a, "id", None) in self.items)
                for a in given
            ):
                self.broken(node, "passes to a kernel a tuple or list, which may hold")
            self.foreign(arguments)
            self.written(arguments)
            return any(held)
        if isinstance(func, ast.Name) and func.id in self.reader.functions:
            if func.id in self.reader.launchers or any(held):
                self.written(arguments)
            gives = [self.helper(each, node, held, method=False)
                     for each in self.reader.same_named[func.id]]  # fmt: skip
            return any(gives)
        if getattr(func, "id", None) in self.reader.instances:  # an object of the file's class
            if any(held):
                self.written(arguments)
            calls = self.reader.methods.get("__call__", [])
            return any([self.helper(method, node, held, method=True) for method in calls])
        if (
            isinstance(func, ast.Attribute)
            and func.attr in self.reader.methods
            and self.reader.module_of(func) is None
        ):  # maybe a method of a class of the file: read it as given these arguments
            if any(held):
                self.written(arguments)
            gives = [self.helper(method, node, held, method=True)
                     for method in self.reader.methods[func.attr]]  # fmt: skip
            if getattr(func.value, "id", None) in {"self", *self.reader.objects}:
                return any(gives)  # surely one: a tensor's rules do not apply
        if (module := self.reader.module_of(func)) is not None:
            template_only = module in TORCH_MEASURES and not any(held[1:])
            if any(held) and not template_only:
                self.broken(node, f"calls {module} on")
            return False
        if isinstance(func, ast.Attribute):
            receiver = self.expression(func.value)
            if not (receiver or any(held)):
                return False
            if func.attr in MEASURES | {"data_ptr"} and not any(held):
                return False  # an address: a launch given it taints its tensor (`viewed`)
            if func.attr not in VIEWS:
                self.broken(node, f"calls .{func.attr}() on")
            if receiver and any(mentions(argument, self.table) for argument in arguments):
                self.broken(node, "gathers by the block table")
            if receiver and func.attr in INDEXING and not all(map(is_view_index, arguments)):
                self.broken(node, "gathers by a computed index")
            self.tainted(func.value)
            return True
        if isinstance(func, ast.Name) and func.id in BUILTIN_MEASURES:
            if func.id == "type" and len(arguments) > 1:
                self.broken(node, "makes a class of")
            return False
        if any(held) | self.expression(func):
            self.broken(node, f"calls {shown(func)} on")
        return False

    def foreign(self, arguments: list[ast.expr]) -> None:
        """A launch given a name of another scope (a module's tensor, an enclosing function's)
        breaks the rule: what the kernel writes there, this reading cannot follow."""
        known = {*self.own, *self.reader.module_scalars, *self.reader.kernels, *self.reader.aliases}
        for argument in arguments:
            names = bound(unstarred(argument)) | viewed(unstarred(argument))
            for name in sorted(names - known - {"self"}):
                self.broken(argument, f"hands {name}, a name of another scope, to a kernel with")

    def tainted(self, node: ast.expr) -> None:
        """Taint the tensor `node` names (a launch or a copy may have written into it): its
        names, what views them, and the attribute of `self` it is, in every method."""
        self.taint |= self.with_views(bound(node) | viewed(node))
        if attribute := self_attribute(node):
            self.reader.self_attributes.add(attribute)

    def with_views(self, names: set[str]) -> set[str]:
        """`names` and every name of the function that may view the same tensor: a name bound
        to a view of another (`v = out[0]`, `v = out.view(-1)`) shares its data both ways."""
        shared = set(names)
        while grown := {n for pair in self.views for n in pair if set(pair) & shared} - shared:
            shared |= grown
        return shared

    def written(self, arguments: list[ast.expr]) -> None:
        """Taint the tensors a launch, or a function of the file, was given: it may have written
        the tensors' data into them (and into what views them). Numbers cannot be written into,
        nor (for want of room) the entry's own `block_tables` and `seq_lens` and their views."""
        for argument in arguments:
            names = bound(unstarred(argument)) | viewed(unstarred(argument))
            names |= set().union(*(self.packs.get(name, set()) for name in names))
            self.taint |= self.with_views((names & self.own) - self.unwritable - self.scalars)
            if attribute := self_attribute(unstarred(argument)):
                self.reader.self_attributes.add(attribute)

    def launched(self, func: ast.Subscript) -> bool:
        """`kernel[grid]`: a @triton.jit function of the file (or a name bound only to one),
        launched."""
        self.expression(func.slice)
        if not isinstance(func.value, ast.Name):
            return False
        name = func.value.id
        passed = self.reader.kernel_params.get((self.name, name))  # a parameter given kernels
        return name in self.reader.kernels | self.kernel_names or passed == {True}

    def helper(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef, node: ast.Call, held: list[bool],
        method: bool,
    ) -> bool:  # fmt: skip
        """A function of the file called (a `method` drops its first parameter): its parameters
        given tainted data are tainted in it (its `*args` and `**kwargs` too where they get any,
        and all of them behind a starred argument), and those given only kernels may be
        launched; whether it returns tainted data."""
        if self.reader.is_kernel(function):  # called without a grid: Triton refuses it
            return False
        args = function.args
        params = [arg.arg for arg in [*args.posonlyargs, *args.args]][int(method) :]
        named = [*params, *(arg.arg for arg in args.kwonlyargs)]
        rest = [arg.arg for arg in (args.vararg, args.kwarg) if arg is not None]
        given = {param for param, h in zip(params, held, strict=False) if h}
        if any(held[len(params) : len(node.args)]):
            given |= set(rest)  # extra positional arguments: its *args
        for keyword, h in zip(node.keywords, held[len(node.args) :], strict=True):
            if h:
                given |= {keyword.arg} if keyword.arg in named else set(rest)
        if any(isinstance(a, ast.Starred) for a in node.args) and any(held[: len(node.args)]):
            given |= set(named) | set(rest)  # a starred argument may reach any of them
        tabled = {
            param for param, a in zip(params, node.args, strict=False) if mentions(a, self.table)
        }
        self.reader.given_table.setdefault(function.name, set()).update(tabled)
        for param, argument in zip(params, node.args, strict=False):
            kernel = getattr(argument, "id", None) in self.reader.kernels | self.kernel_names
            self.reader.kernel_params.setdefault((function.name, param), set()).add(kernel)
        self.reader.given.setdefault(function.name, set()).update(given)
        return function.name in self.reader.gives


def unstarred(node: ast.expr) -> ast.expr:
    return node.value if isinstance(node, ast.Starred) else node


def is_view_index(node: ast.expr) -> bool:
    """An index that views: a constant (an int, None, ...), or a slice."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant | ast.Slice)


def is_scalar(value: ast.expr | None, function: Function) -> bool:
    """Whether `value` is a number: a constant, a measure (`x.shape[0]`, `x.stride(1)`, `len`),
    a builtin's or a math/triton function's result, or arithmetic on such."""
    if value is None:
        return False
    if isinstance(value, ast.Constant):
        return isinstance(value.value, int | float)
    if isinstance(value, ast.Name):
        return value.id in function.scalars
    if isinstance(value, ast.BinOp):
        return is_scalar(value.left, function) and is_scalar(value.right, function)
    if isinstance(value, ast.UnaryOp):
        return is_scalar(value.operand, function)
    if isinstance(value, ast.Subscript):
        return isinstance(value.value, ast.Attribute) and value.value.attr == "shape"
    if isinstance(value, ast.Call):
        func = value.func
        module = function.reader.module_of(func) or ""
        if module.split(".")[0] in ("math", "triton"):
            return True
        if isinstance(func, ast.Attribute) and func.attr in SCALAR_METHODS:
            return True
        if isinstance(func, ast.Name) and func.id in SCALAR_OF_SCALARS:
            return all(is_scalar(argument, function) for argument in value.args)
        return isinstance(func, ast.Name) and func.id in SCALARS
    return False


def is_measure(value: ast.expr | None) -> bool:
    """Whether `value` unpacks into numbers: a shape (or a slice of one), strides, sizes, or a
    `range` iterated over."""
    if isinstance(value, ast.Subscript):
        value = value.value
    if isinstance(value, ast.Attribute):
        return value.attr == "shape"
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute):
            return func.attr in ("stride", "size")
        return isinstance(func, ast.Name) and func.id == "range"
    return False


def params_of(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    args = node.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {arg.arg for arg in named if arg is not None}


def self_attribute(node: ast.expr) -> str | None:
    """The attribute of an object that `node` is, or views (`self.buf`, `r.buf.view(-1)`): the
    objects of the file's classes are the only ones whose attributes may change."""
    while isinstance(node, ast.Subscript | ast.Call | ast.Attribute):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.attr
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Attribute):
            return None
        node = node.func.value if isinstance(node, ast.Call) else node.value
    return None


def pointed(value: ast.expr | None) -> set[str]:
    """The names whose tensor's address `value` holds, through any arithmetic or `int`:
    `x.data_ptr()`."""
    if value is None:
        return set()
    calls = [
        node.func.value
        for node in ast.walk(value)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "data_ptr"
    ]
    return set().union(*map(viewed, calls))


def mentions(node: ast.AST, names: set[str]) -> bool:
    """Whether `node` reads any of `names`."""
    return bool(names) and any(
        isinstance(inner, ast.Name) and inner.id in names for inner in ast.walk(node)
    )


def viewed(value: ast.expr | None, functions: set[str] = frozenset()) -> set[str]:
    """The names whose tensor `value` may view: `x[...]`, `x.view(...)`, `x.T`, any method's
    result but a measure's (`x.shape`, `x.size(0)`), and what a function of the file
    (`functions`) given them returns."""
    while True:
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) in functions:
            return set().union(*(viewed(unstarred(a), functions) for a in value.args))
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            if value.func.attr in MEASURES | SCALAR_METHODS:
                return set()
            value = value.func.value
        elif isinstance(value, ast.Subscript) or (
            isinstance(value, ast.Attribute) and value.attr not in MEASURED
        ):
            value = value.value
        else:
            return {value.id} if isinstance(value, ast.Name) else set()


def unpacked(target: ast.expr, value: ast.expr | None) -> list[tuple[ast.expr, ast.expr]] | None:
    """`a, b = x, y` as its pairs (`a`, `x`), (`b`, `y`); None for any other assignment."""
    if not (isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List)):
        return None
    if len(target.elts) != len(value.elts) or any(
        isinstance(item, ast.Starred) for item in [*target.elts, *value.elts]
    ):
        return None
    return list(zip(target.elts, value.elts, strict=True))


def bound(target: ast.expr) -> set[str]:
    """The names an assignment to `target` binds, or changes (`a.b = ...`, `a[i] = ...`)."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return set().union(*(bound(item) for item in target.elts))
    if isinstance(target, ast.Starred | ast.Attribute | ast.Subscript):
        return bound(target.value)
    return set()


def own_names(body: list[ast.stmt]) -> set[str]:
    """The names a body binds itself (not declared global or nonlocal), its nested functions'
    and classes' bodies aside."""
    names, declared = set(), set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global | ast.Nonlocal):
            declared |= set(node.names)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return names - declared


def expressions_in(node: ast.AST) -> Iterator[ast.expr]:
    return (child for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))
