"""The kernel rule: what `paged_attention.py` may do outside its Triton kernels, read by the
grading process from the file's syntax tree (never run).

Anywhere in the file: imports only of the contract's modules and `triton` (none of the
submission's other files: it is graded alone); nothing that runs or finds code by name (`exec`,
`eval`, `compile`, `__import__`, `vars`, `globals`, `getattr` with a computed name, the
interpreter's hidden attributes, torch's internals, Triton's launch machinery); no change to a
module's attributes; `paged_attention_decode` a plain `def` of the module.

Outside its `@triton.jit` functions, the data of `q`, `k_cache` and `v_cache` (the entry's first
three parameters), of whatever is made from them, and of every tensor a kernel launch or an
in-place copy may have written (`Function.taint`), may only be viewed, copied, filled, converted,
measured (shapes, strides, dtypes) and handed to a launch or to a function of the file: no
arithmetic, comparison, truth test, iteration, computed index, or any other call on it, and no
store outside the function's own names. Integer bookkeeping on `seq_lens`, `block_tables`,
shapes and strides is free.

`first_break` gives the first line that breaks it, and how; `grade.runnable` then never runs the
file: every kernel check and the engine check fail, saying so, and the kernel part scores 0. This
is the kernel's verdict, which nothing in a worker can change: the worker's torch dispatch mode
and launch count only guide an honest candidate.
"""

import ast
from collections.abc import Iterable, Iterator

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
    "data_ptr", "storage_offset", "is_floating_point", "get_device",
    "new_empty", "new_zeros", "new_ones", "new_full",
}  # fmt: skip
MEASURED = {"shape", "dtype", "device", "is_cuda", "ndim", "layout", "itemsize"}  # attributes
TORCH_MEASURES = {"torch.is_tensor", "torch.is_floating_point", "torch.numel"}
TORCH_MEASURES |= {"torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like"}
BUILTIN_MEASURES = {"len", "isinstance", "type", "id", "print"}
SCALARS = BUILTIN_MEASURES | {"int", "float", "bool", "min", "max", "abs", "round", "divmod"}
SCALAR_METHODS = {
    "stride", "size", "dim", "ndimension", "numel", "nelement", "element_size", "storage_offset",
    "get_device", "data_ptr", "item", "bit_length",
}  # fmt: skip


class RuleBroken(Exception):
    """The first break of the kernel rule: its line and what the file does there."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(f"line {line} {what}: {RULE}")


def first_break(source: bytes) -> str | None:
    """Why `paged_attention.py` breaks the kernel rule, at its first line that does; None when it
    keeps it (or does not parse: `scan.syntax_errors` has that)."""
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
        self.functions = {
            node.name: node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        self.kernels = {name for name, node in self.functions.items() if self.is_kernel(node)}
        self.launchers = self.launching()
        self.given: dict[str, set[str]] = {}  # by function: its parameters given tainted data
        self.gives: set[str] = set()  # the functions that return tainted data

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
        decorators = [getattr(item, "func", item) for item in node.decorator_list]
        return any(self.dotted(item) in JIT_DECORATORS for item in decorators)

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
        while True:
            before = ({name: set(given) for name, given in self.given.items()}, set(self.gives))
            Function(self, ENTRY_MODULE, self.tree.body, set(), set()).run()
            if before == (self.given, self.gives):
                return

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
            if (isinstance(node, ast.Name) and node.id == ENTRY and not isinstance(node.ctx, LOAD))
            or (isinstance(node, ast.alias) and (node.asname or node.name) == ENTRY)
            or (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and node.name == ENTRY)
        ]  # fmt: skip
        if len(defs) != 1 or len(bindings) != 1:
            line = next((node.lineno for node in bindings if hasattr(node, "lineno")), 1)
            raise RuleBroken(line, f"defines {ENTRY} other than by one plain def of the module")

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
        if isinstance(node, ast.Attribute) and node.attr in HIDDEN:
            raise RuleBroken(node.lineno, f"reads .{node.attr}, the interpreter's internals")
        named = isinstance(node, ast.Call) and getattr(node.func, "id", None) in NAMED
        if named and not is_literal_getattr(node):
            raise RuleBroken(node.lineno, f"calls {node.func.id} with a computed name")
        if isinstance(node, ast.Attribute | ast.Name | ast.Call) and (name := self.module_of(node)):
            if reason := escape_reason(name):
                raise RuleBroken(node.lineno, f"uses {name} ({reason})")
            if isinstance(node, ast.Call):
                changed = node.func.id in ("setattr", "delattr")
            else:
                changed = not isinstance(node.ctx, ast.Load) and "." in name
            if changed:
                raise RuleBroken(node.lineno, f"changes {name}, a module's attribute")


ENTRY_MODULE = "<module>"
LOAD = ast.Load


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
        self.scalars: set[str] = set()
        self.made = own_names(body)  # the names it binds itself
        self.own = self.made | params
        self.defined: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

    def run(self) -> None:
        self.statements(self.body)
        for node in self.defined:
            if node.name not in self.reader.kernels:
                Function(self.reader, node.name, node.body, self.taint, params_of(node)).run()

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in node.decorator_list:
                self.expression(decorator)
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
            self.bind(node.target, self.iterated(node.iter), node.iter)
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
        """An assignment of a value that holds tainted data (`held`) or not to `target`."""
        names = bound(target)
        if held and names - self.own:
            self.broken(target, "stores, beyond the function's own names,")
        if held:
            self.taint |= names
        scalar = is_scalar(value, self) if isinstance(target, ast.Name) else is_measure(value)
        if isinstance(target, ast.Name | ast.Tuple | ast.List):
            self.scalars = self.scalars | names if scalar else self.scalars - names

    def broken(self, node: ast.AST, what: str) -> None:
        raise RuleBroken(
            node.lineno, f"{shown(node)} {what} the data of q, k_cache or v_cache outside a "
            "@triton.jit kernel"
        )  # fmt: skip

    def truth(self, node: ast.expr) -> None:
        if self.expression(node):
            self.broken(node, "tests the truth of")

    def iterated(self, node: ast.expr) -> bool:
        """Whether iterating over `node` gives tainted items: a tuple or list written out may
        hold tensors; iterating over tainted data itself breaks the rule."""
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return self.any_held(node.elts)
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
            return self.expression(node.value) and node.attr not in MEASURED
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
            if self.expression(node.value):
                self.broken(node, "iterates over")
            return False
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            return self.comprehension(node)
        if isinstance(node, ast.Lambda):
            body = [ast.Return(node.body, lineno=node.lineno)]
            Function(self.reader, "<lambda>", body, self.taint, params_of(node)).run()
            return False
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
            held = self.iterated(generator.iter)
            self.own |= bound(generator.target)
            self.bind(generator.target, held, None)
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
        return held

    def call(self, node: ast.Call) -> bool:
        """A call: a kernel launch, a function of the file, a module's function, a method or a
        builtin; whether its result holds tainted data. A launch taints the tensors it is given
        (`written`); a method given tainted data taints its tensor (`out.copy_(q)`)."""
        arguments = [*node.args, *(keyword.value for keyword in node.keywords)]
        held = [self.expression(argument) for argument in arguments]
        func = node.func
        if isinstance(func, ast.Subscript) and self.launched(func):
            self.written(arguments)
            return False
        if isinstance(func, ast.Name) and func.id in self.reader.functions:
            if func.id in self.reader.launchers:
                self.written(arguments)
            return self.helper(func.id, node, held)
        if (module := self.reader.module_of(func)) is not None:
            if any(held) and module not in TORCH_MEASURES:
                self.broken(node, f"calls {module} on")
            return False
        if isinstance(func, ast.Attribute):
            receiver = self.expression(func.value)
            if not (receiver or any(held)) or func.attr in MEASURES:
                return False
            if func.attr not in VIEWS:
                self.broken(node, f"calls .{func.attr}() on")
            self.taint |= bound(func.value)
            return True
        if isinstance(func, ast.Name) and func.id in BUILTIN_MEASURES:
            return False
        if any(held) | self.expression(func):
            self.broken(node, f"calls {shown(func)} on")
        return False

    def written(self, arguments: list[ast.expr]) -> None:
        """Taint the tensors this function made that a launch, or a function of the file that
        launches one, was given: it may have written the tensors' data into them. Numbers
        cannot be written into, nor (for want of room) the entry's own `block_tables` and
        `seq_lens`."""
        for argument in arguments:
            self.taint |= (bound(unstarred(argument)) & self.made) - self.scalars

    def launched(self, func: ast.Subscript) -> bool:
        """`kernel[grid]`: a @triton.jit function of the file, launched."""
        self.expression(func.slice)
        return isinstance(func.value, ast.Name) and func.value.id in self.reader.kernels

    def helper(self, name: str, node: ast.Call, held: list[bool]) -> bool:
        """A function of the file called: its parameters given tainted data are tainted in it
        (all of them, where a starred argument gives any); whether it returns tainted data."""
        function = self.reader.functions[name]
        if name in self.reader.kernels:  # called without a grid: Triton refuses it
            return False
        params = [arg.arg for arg in [*function.args.posonlyargs, *function.args.args]]
        given = {param for param, h in zip(params, held, strict=False) if h}
        keywords = zip(node.keywords, held[len(node.args) :], strict=True)
        given |= {keyword.arg for keyword, h in keywords if h and keyword.arg}
        if any(
            h
            for argument, h in zip(arguments_of(node), held, strict=True)
            if isinstance(argument, ast.Starred) or getattr(argument, "arg", "") is None
        ):
            given |= set(params) | {arg.arg for arg in function.args.kwonlyargs}  # fmt: skip
            if function.args.vararg:
                given.add(function.args.vararg.arg)
        self.reader.given.setdefault(name, set()).update(given)
        return name in self.reader.gives


def arguments_of(node: ast.Call) -> list[ast.AST]:
    return [*node.args, *node.keywords]


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
        return True
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
