"""One spelling of each construct and one order of commutative operands, for the normal form
(`normalize.py`, whose docstring lists the rewrites).

`Rewriter` rewrites expressions and single statements, children first, and on the way collects
what each function reads (`dead_code.Reads`) and cuts the code after a `return`, `raise`, `break`
or `continue` in its block before it is read. A statement nested deeper than `MAX_DEPTH` levels
(a chain of one operator counting as deep as the balanced tree it is rebuilt as) is left out of
the normal form, alone, so that no rewriting or unparsing recurses past a fixed depth, and one
deep line does not keep the rest of a file from its normal form. `loops` then rewrites loops,
block by block.
"""

import ast
import keyword
import operator
from collections.abc import Callable

from grader.similarity.dead_code import BODIES, Reads, assigned, blocks, has_effect, reachable

# Operators whose operands are put in one order, and comparisons that read the same either way.
COMMUTATIVE = (ast.Add, ast.Mult, ast.BitOr, ast.BitAnd, ast.BitXor)
SYMMETRIC = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
FLIPPED: dict[type, type] = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}
HOLDERS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For,
           ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.TryStar,
           ast.ExceptHandler, ast.match_case)  # fmt: skip
DYNAMIC = frozenset({"locals", "vars", "eval", "exec"})  # calls that may read any name
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
KEYWORDS = (None, True, False, ...)  # constants the token stream keeps as they are written

ARITHMETIC: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip
INTEGER: dict[type, Callable] = {
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
    ast.BitAnd: operator.and_, ast.BitXor: operator.xor, ast.Invert: operator.invert,
}  # fmt: skip
FOLD_BITS = 128  # constant arithmetic is folded only on and to numbers under 2**FOLD_BITS
MAX_DEPTH = 100  # levels of nesting (a chain of one operator counts its operands) rewritten


class TooDeep(Exception):
    """The tree nests deeper than `MAX_DEPTH` here: the statement is left out."""


class Rewriter(ast.NodeTransformer):
    """The rewrites of expressions and of single statements, children first (see the module
    docstring). `lives` holds, for each function, its live names (`Reads.live`)."""

    def __init__(self) -> None:
        self.depth = 0
        self.lives: dict[ast.AST, set[str]] = {}
        # The module's (not used), then each function's around; None for a class body.
        self.functions: list[Reads | None] = [Reads()]
        self.sinks: list[set[str]] = [self.functions[0].free]  # where a name read now goes

    def visit(self, node: ast.AST) -> ast.AST | None:
        """`node` rewritten; None for a statement too deep to rewrite (`TooDeep`), which its
        body then leaves out."""
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise TooDeep
            return super().visit(node)
        except TooDeep:
            if isinstance(node, ast.stmt):
                return None
            raise
        finally:
            self.depth -= 1

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if isinstance(node, HOLDERS):
            for field in BODIES:
                body = getattr(node, field, None)
                if isinstance(body, list) and body:
                    setattr(node, field, reachable(body))
        return super().generic_visit(node)

    # -- what each function reads ---------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
        reads = Reads()
        self.functions.append(reads)
        self.sinks.append(reads.free)
        try:
            self.generic_visit(node)
        finally:
            self.sinks.pop()
            self.functions.pop()
        self.lives[node] = reads.live()
        self.sinks[-1] |= reads.everything()
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.stmt:
        """A class body's assignments define attributes and stay: what they read counts."""
        self.functions.append(None)
        try:
            self.generic_visit(node)
        finally:
            self.functions.pop()
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if not isinstance(node.ctx, ast.Store):  # a read, or a `del`, which needs the name set
            self.sinks[-1].add(node.id)
        return node

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> ast.stmt:
        self.sinks[-1].update(node.names)
        return node

    visit_Nonlocal = visit_Global

    def assignment(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        """Visit an assignment, its reads counted as uses of the one name it assigns, where its
        value calls nothing (`Reads.uses`); as reads that count otherwise."""
        target, value = assigned(node)
        reads = self.functions[-1]
        if target is None or value is None or reads is None or isinstance(node, ast.AugAssign):
            self.generic_visit(node)  # what it reads counts (an augmented target included)
            if isinstance(node, ast.AugAssign) and target is not None:
                self.sinks[-1].add(target)
            return
        read: set[str] = set()
        self.sinks.append(read)
        try:
            self.generic_visit(node)
        finally:
            self.sinks.pop()
        if has_effect(node.value):
            self.sinks[-1] |= read
        else:
            reads.uses.setdefault(target, set()).update(read)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        self.assignment(node)
        return node

    visit_AugAssign = visit_AnnAssign

    # -- one spelling ---------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in DYNAMIC:
            for reads in self.functions[1:]:
                if reads is not None:
                    reads.dynamic = True
        name = literal_attribute(node, "getattr", 2)
        if name is not None:
            return ast.copy_location(ast.Attribute(node.args[0], name, ast.Load()), node)
        if called(node, "range") and len(node.args) in (2, 3):
            start, *rest = node.args
            if len(rest) == 2 and is_constant(rest[1], 1):
                rest = rest[:1]
            node.args = rest if len(rest) == 1 and is_constant(start, 0) else [start, *rest]
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        self.generic_visit(node)
        call = node.value
        if (name := literal_attribute(call, "setattr", 3)) is not None:
            target = ast.Attribute(call.args[0], name, ast.Store())
            return ast.copy_location(ast.Assign([target], call.args[2]), node)
        if (name := literal_attribute(call, "delattr", 2)) is not None:
            target = ast.Attribute(call.args[0], name, ast.Del())
            return ast.copy_location(ast.Delete([target]), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            inner = as_test(node.operand)
            if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, ast.Not):
                truth = ast.Call(ast.Name("bool", ast.Load()), [inner.operand], [])
                return ast.copy_location(truth, node)
            node.operand = inner
        return folded(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        """A chain of one commutative operator is flattened, its operands visited, then sorted
        once, at its root (not at each of its levels)."""
        if not isinstance(node.op, COMMUTATIVE):
            self.generic_visit(node)
            return folded(node)
        terms = operands(node)
        if self.depth + len(terms).bit_length() > MAX_DEPTH:
            raise TooDeep
        terms = [self.visit(term) for term in terms]
        whole = folded(chain(node.op, terms)) if len(terms) == 2 else None
        if isinstance(whole, ast.Constant):
            return ast.copy_location(whole, node)
        return ast.copy_location(chain(node.op, sorted(terms, key=shape)), node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        flat = [
            value
            for each in node.values
            for value in (each.values if same_bool_op(each, node.op) else [each])
        ]
        node.values = sorted(flat, key=shape)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if all(type(op) in FLIPPED for op in node.ops):
            *others, last = [node.left, *node.comparators]
            node.left, node.comparators = last, others[::-1]
            node.ops = [FLIPPED[type(op)]() for op in reversed(node.ops)]
        elif len(node.ops) == 1 and isinstance(node.ops[0], SYMMETRIC):
            node.left, right = sorted([node.left, node.comparators[0]], key=shape)
            node.comparators = [right]
        return node

    def visit_If(self, node: ast.If | ast.While | ast.IfExp | ast.Assert) -> ast.AST:
        self.generic_visit(node)
        node.test = as_test(node.test)
        return node

    visit_While = visit_If
    visit_IfExp = visit_If
    visit_Assert = visit_If

    def visit_comprehension(self, node: ast.comprehension) -> ast.comprehension:
        self.generic_visit(node)
        node.ifs = [as_test(test) for test in node.ifs]
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.stmt:
        """`x = x op y` as `x op= y`: where `op` is commutative, `x` may be any of its operands."""
        self.assignment(node)
        value = node.value
        if len(node.targets) != 1 or not isinstance(value, ast.BinOp):
            return node
        (target,) = node.targets
        commutative = isinstance(value.op, COMMUTATIVE)
        terms = operands(value) if commutative else [value.left, value.right]
        at = next((i for i, term in enumerate(terms) if same(term, target)), None)
        if at is None or (at != 0 and not commutative):
            return node
        rest = terms[:at] + terms[at + 1 :]
        return ast.copy_location(ast.AugAssign(target, value.op, chain(value.op, rest)), node)


def same(read: ast.expr, written: ast.expr) -> bool:
    """Whether `read` reads what `written` names: one name, attribute or item (`x`, `x.a`,
    `x[i]`) written out the same."""
    if isinstance(read, ast.Name) and isinstance(written, ast.Name):
        return read.id == written.id
    if isinstance(read, ast.Attribute) and isinstance(written, ast.Attribute):
        return read.attr == written.attr and same(read.value, written.value)
    if isinstance(read, ast.Subscript) and isinstance(written, ast.Subscript):
        return same(read.value, written.value) and same(read.slice, written.slice)
    if isinstance(read, ast.Constant) and isinstance(written, ast.Constant):
        return type(read.value) is type(written.value) and read.value == written.value
    return False


def literal_attribute(node: ast.expr, function: str, arity: int) -> str | None:
    """The attribute name `node`, a call `function(obj, "name", ...)` of `arity` arguments,
    names as a literal identifier (not a private `__name`, which Python mangles in a class);
    None for any other call."""
    if not (called(node, function) and len(node.args) == arity):
        return None
    name = node.args[1]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    text = name.value
    private = text.startswith("__") and not text.endswith("__")
    return text if text.isidentifier() and not keyword.iskeyword(text) and not private else None


def called(node: ast.expr, function: str) -> bool:
    """Whether `node` is a plain call of the builtin name `function`, without keywords or stars."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == function
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    )


def is_constant(node: ast.expr, value: object) -> bool:
    constant = isinstance(node, ast.Constant) and type(node.value) is type(value)
    return constant and node.value == value


def as_test(node: ast.expr) -> ast.expr:
    """`node` where only its truth counts: without `bool(...)` or a double `not` around it, and
    so each operand of an `and`/`or` in it."""
    while True:
        if called(node, "bool") and len(node.args) == 1:
            node = node.args[0]
        elif (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.Not)
            and isinstance(node.operand, ast.UnaryOp)
            and isinstance(node.operand.op, ast.Not)
        ):
            node = node.operand.operand
        else:
            break
    if isinstance(node, ast.BoolOp):
        node.values = sorted((as_test(value) for value in node.values), key=shape)
    return node


def negated(test: ast.expr) -> ast.expr:
    """`not test`, where only its truth counts (`not not c` is `c`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return as_test(test.operand)
    return ast.UnaryOp(ast.Not(), test)


def folded(node: ast.BinOp | ast.UnaryOp) -> ast.expr:
    """`node` as the constant it computes where its operands are small numbers (integers for
    the bitwise operators), else itself."""
    values = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.operand]
    numbers = [v.value for v in values if isinstance(v, ast.Constant)]
    kinds = (int,) if type(node.op) in INTEGER else (int, float)
    small = all(type(n) in kinds and abs(n) < 2**FOLD_BITS for n in numbers)
    compute = ARITHMETIC.get(type(node.op)) or INTEGER.get(type(node.op))
    if len(numbers) != len(values) or not small or compute is None:
        return node
    if isinstance(node.op, ast.Pow | ast.LShift) and abs(numbers[-1]) > FOLD_BITS:
        return node
    try:
        value = compute(*numbers)
    except (ArithmeticError, ValueError, TypeError):
        return node
    if type(value) not in (int, float) or abs(value) >= 2**FOLD_BITS:
        return node
    return ast.copy_location(ast.Constant(value), node)


def operands(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a chain of `node`'s operator, `(a + b) + c` as `[a, b, c]` (no recursion:
    a chain may be long)."""
    found, stack = [], [node]
    while stack:
        each = stack.pop()
        if isinstance(each, ast.BinOp) and type(each.op) is type(node.op):
            stack += [each.right, each.left]
        else:
            found.append(each)
    return found


def chain(op: ast.operator, terms: list[ast.expr]) -> ast.expr:
    """`terms` joined by `op`, left to right, as a balanced tree (a long chain nests only as
    deep as its length's logarithm; grouping parentheses, which unparsing a right-hand group
    writes, are not tokens)."""
    if len(terms) == 1:
        return terms[0]
    half = len(terms) // 2
    return ast.BinOp(chain(op, terms[:half]), op, chain(op, terms[half:]))


def same_bool_op(node: ast.expr, op: ast.boolop) -> bool:
    return isinstance(node, ast.BoolOp) and type(node.op) is type(op)


def shape(node: ast.AST) -> str:
    """What `node` looks like with its names and literals set aside, as the token stream sets
    them aside: the order of two operands of one shape does not change the stream. Kept on the
    node (`_shape`), so that sorting at every level of a nest costs each subtree once."""
    known = getattr(node, "_shape", None)
    if known is not None:
        return known
    if isinstance(node, ast.Name):
        found = "V"
    elif isinstance(node, ast.Constant):
        value = node.value
        found = "S" if isinstance(value, str | bytes) else "N"
        found = repr(value) if any(value is word for word in KEYWORDS) else found
    else:
        children = ",".join(shape(child) for child in ast.iter_child_nodes(node))
        found = f"{type(node).__name__}({children})"
    node._shape = found
    return found


# -- loops ---------------------------------------------------------------------------------------


def loops(node: ast.AST) -> None:
    """In every body under `node` (statements only, innermost first): `while True:` that starts
    with `if c: break` (and has no `else:`) as `while not c:`, and a counted `while` as the
    `for` over a `range` it counts through (`counted`). Run after the dead code is gone."""
    for child in blocks(node):
        loops(child)
    if isinstance(node, ast.While) and not node.orelse and node.body:  # (a statement left out)
        first = node.body[0]
        truthy = isinstance(node.test, ast.Constant) and bool(node.test.value)
        if truthy and isinstance(first, ast.If) and not first.orelse and breaks(first.body):
            node.test = negated(first.test)
            node.body = node.body[1:] or [ast.copy_location(ast.Pass(), node)]
    for field in BODIES:
        body = getattr(node, field, None)
        if isinstance(body, list) and len(body) > 1 and isinstance(body[0], ast.stmt):
            setattr(node, field, counted(body))


def breaks(body: list[ast.stmt]) -> bool:
    return len(body) == 1 and isinstance(body[0], ast.Break)


def counted(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each `i = a` followed by a counted `while` (`as_for`) as one `for`."""
    out: list[ast.stmt] = []
    for stmt in body:
        start = out[-1] if out else None
        loop = as_for(start, stmt) if isinstance(start, ast.Assign) else None
        if loop is None:
            out.append(stmt)
        else:
            out[-1] = loop
    return out


def as_for(start: ast.Assign, loop: ast.stmt) -> ast.For | None:
    """`for i in range(a, b):` for `start`, `i = a`, and `loop`, `while i < b:` that ends with
    `i += 1`, where `a` and `b` are names or integers and the loop neither assigns `i` nor `b`
    elsewhere, has no `else:` and no `continue` of its own; None for any other pair."""
    name, first = assigned(start)
    if name is None or not isinstance(loop, ast.While) or loop.orelse or not loop.body:
        return None
    test, last = loop.test, loop.body[-1]
    bounded = (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and [type(op) for op in test.ops] == [ast.Lt]
        and integral(test.comparators[0])
        and integral(first)
    )
    steps = (
        isinstance(last, ast.AugAssign)
        and isinstance(last.op, ast.Add)
        and isinstance(last.target, ast.Name)
        and last.target.id == name
        and is_constant(last.value, 1)
    )
    if not (bounded and steps):
        return None
    stop = test.comparators[0]
    fixed = [name, *([stop.id] if isinstance(stop, ast.Name) else [])]
    if any(writes(loop.body[:-1], each) for each in fixed) or continues(loop.body[:-1]):
        return None
    limits = [stop] if is_constant(first, 0) else [first, stop]
    iterated = ast.Call(ast.Name("range", ast.Load()), limits, [])
    body = loop.body[:-1] or [ast.copy_location(ast.Pass(), loop)]
    return ast.copy_location(ast.For(ast.Name(name, ast.Store()), iterated, body, []), start)


def integral(node: ast.expr | None) -> bool:
    """A name, or an integer constant: what `range` may take where a `while` counted."""
    return isinstance(node, ast.Name) or (
        isinstance(node, ast.Constant) and type(node.value) is int
    )


def writes(body: list[ast.stmt], name: str) -> bool:
    """Whether `body` assigns (or deletes) `name` anywhere."""
    return any(
        isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
        for stmt in body
        for n in ast.walk(stmt)
    )


def continues(body: list[ast.stmt]) -> bool:
    """Whether a `continue` in `body` belongs to the loop that holds it (not to a nested one)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Continue):
            return True
        if isinstance(node, ast.For | ast.AsyncFor | ast.While):
            stack += node.orelse  # an `else:` clause continues the loop around the nested one
        elif not isinstance(node, SCOPES):
            stack += ast.iter_child_nodes(node)
    return False
