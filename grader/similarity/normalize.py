"""A Python file's program in one normal form, before its tokens are fingerprinted.

Each rewrite keeps what the code does (or, for the order of operands, what a reader sees it do), so
that a copy edited mechanically all over, which adds tokens everywhere and leaves no run of
`fingerprints.K` tokens as it was, reads as the file it copied:

- **dead code goes**: a statement without effect (an expression that calls nothing, `pass`), and
  in a function an assignment to a name the function never reads (of a value that calls nothing;
  one that calls stays as the call: at module or class level an assignment defines an
  attribute, and stays);
- **one spelling of each construct**: `getattr(x, "a")` is `x.a` (`setattr` and `delattr` alike);
  where only truth counts, `not not e` and `bool(e)` are `e`; `a > b` is `b < a` (`>=` alike);
  `x = x + y` is `x += y`; constant arithmetic is folded; `while True:` that starts with `if c:
  break` is `while not c:`; `i = a` followed by `while i < b:` that ends with `i += 1` is
  `for i in range(a, b):`; `range(0, n)` is `range(n)`; `else: if` is `elif` (the syntax tree
  makes no difference);
- **one order**: the operands of a commutative operator (`+ * | & ^`, `== != is is not`,
  `and or`), chains of one operator flattened, sorted by their shape (names and literals set
  aside, as the token stream sets them aside).

`normal_form(source)` gives the rewritten syntax tree, each statement on the line of the file it
comes from (`written.py` gives its tokens). A file with a syntax error gives the tree of its
complete statements before the error (`parsed`), so that a copy with a broken line at its end
still reads as the file it copied; one that nests too deeply for the rewriting gives None, and
is fingerprinted from its tokens as written.
This normalises code for comparing it, not for running it: a rewrite may change what an
expression does where only a reader would call the two the same (`a + b` for strings).
"""

import ast
import keyword
import operator
from collections.abc import Callable, Iterator

# Operators whose operands are put in one order, and comparisons that read the same either way.
COMMUTATIVE = (ast.Add, ast.Mult, ast.BitOr, ast.BitAnd, ast.BitXor)
SYMMETRIC = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
FLIPPED: dict[type, type] = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}
EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)
BODIES = ("body", "orelse", "finalbody")
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

FOLDED: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
}  # fmt: skip
FOLD_BITS = 128  # constant arithmetic is folded only on and to numbers under 2**FOLD_BITS


def normal_form(source: bytes) -> ast.Module | None:
    """The syntax tree of `source` (`parsed`) in the normal form; None where there is none."""
    try:
        tree = parsed(source)
        if tree is None:
            return None
        rewriter = Rewriter()
        tree = rewriter.visit(tree)
        prune(tree, None, rewriter.reads)
        loops(tree)
        return tree
    except (RecursionError, MemoryError):
        return None


def parsed(source: bytes) -> ast.Module | None:
    """The syntax tree of `source`; where it has a syntax error, of its lines before the error,
    or failing that before the last line at the top level (no indentation) above the error; None
    where neither parses."""
    try:
        return ast.parse(source)
    except SyntaxError as error:
        broken = error.lineno or 0
    except ValueError:  # a null byte
        return None
    lines = source.splitlines(keepends=True)[: max(broken - 1, 0)]
    top = max((at for at, line in enumerate(lines) if line[:1] not in b" \t\r\n#"), default=0)
    for end in dict.fromkeys((len(lines), top)):
        try:
            return ast.parse(b"".join(lines[:end]))
        except (SyntaxError, ValueError):
            continue
    return None


# -- one spelling, one order ---------------------------------------------------------------------


class Rewriter(ast.NodeTransformer):
    """The rewrites of expressions and of single statements, children first. On the way it
    collects, for `prune`, what each function reads (`reads`: the names it loads anywhere in
    it, nested functions included, or declares global or nonlocal)."""

    def __init__(self) -> None:
        self.reads: dict[ast.AST, set[str]] = {}
        self.scopes: list[set[str]] = [set()]  # the module's, then each function's around

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
        self.scopes.append(set())
        self.generic_visit(node)
        self.reads[node] = self.scopes.pop()
        self.scopes[-1] |= self.reads[node]
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if isinstance(node.ctx, ast.Load):
            self.scopes[-1].add(node.id)
        return node

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> ast.stmt:
        self.scopes[-1].update(node.names)
        return node

    visit_Nonlocal = visit_Global

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
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
        self.generic_visit(node)
        node = folded(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, COMMUTATIVE):
            return ast.copy_location(chain(node.op, sorted(operands(node), key=shape)), node)
        return node

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

    def visit_If(self, node: ast.If) -> ast.If:
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
        self.generic_visit(node)
        value = node.value
        if len(node.targets) != 1 or not isinstance(value, ast.BinOp):
            return node
        (target,) = node.targets
        if not isinstance(target, ast.Name | ast.Attribute | ast.Subscript):
            return node
        terms = operands(value) if isinstance(value.op, COMMUTATIVE) else [value.left, value.right]
        at = next((i for i, term in enumerate(terms) if same(term, target)), None)
        if at is None or (at != 0 and not isinstance(value.op, COMMUTATIVE)):
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
    names as a literal identifier; None for any other call."""
    if not (called(node, function) and len(node.args) == arity):
        return None
    name = node.args[1]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    return name.value if name.value.isidentifier() and not keyword.iskeyword(name.value) else None


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
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return as_test(test.operand)
    return ast.UnaryOp(ast.Not(), test)


def folded(node: ast.BinOp | ast.UnaryOp) -> ast.expr:
    """`node` as the constant it computes where its operands are small numbers, else itself."""
    values = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.operand]
    numbers = [v.value for v in values if isinstance(v, ast.Constant)]
    small = all(type(n) in (int, float) and abs(n) < 2**FOLD_BITS for n in numbers)
    if len(numbers) != len(values) or not small or type(node.op) not in FOLDED:
        return node
    if isinstance(node.op, ast.Pow | ast.LShift) and abs(numbers[-1]) > FOLD_BITS:
        return node
    try:
        value = FOLDED[type(node.op)](*numbers)
    except (ArithmeticError, ValueError):
        return node
    if type(value) not in (int, float) or abs(value) >= 2**FOLD_BITS:
        return node
    return ast.copy_location(ast.Constant(value), node)


def operands(node: ast.BinOp) -> list[ast.expr]:
    """The operands of a chain of `node`'s operator, `(a + b) + c` as `[a, b, c]`."""
    found: list[ast.expr] = []
    for side in (node.left, node.right):
        if isinstance(side, ast.BinOp) and type(side.op) is type(node.op):
            found += operands(side)
        else:
            found.append(side)
    return found


def chain(op: ast.operator, terms: list[ast.expr]) -> ast.expr:
    """`terms` joined by `op`, left to right."""
    node = terms[0]
    for term in terms[1:]:
        node = ast.BinOp(node, op, term)
    return node


def same_bool_op(node: ast.expr, op: ast.boolop) -> bool:
    return isinstance(node, ast.BoolOp) and type(node.op) is type(op)


def shape(node: ast.AST) -> str:
    """What `node` looks like with its names and literals set aside, as the token stream sets
    them aside: the order of two operands of one shape does not change the stream."""
    if isinstance(node, ast.Name):
        return "V"
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, str | bytes):
            return "S"
        return repr(value) if any(value is word for word in KEYWORDS) else "N"
    children = ",".join(shape(child) for child in ast.iter_child_nodes(node))
    return f"{type(node).__name__}({children})"


KEYWORDS = (None, True, False, ...)


# -- dead code -----------------------------------------------------------------------------------


def prune(scope: ast.AST, read: set[str] | None, reads: dict[ast.AST, set[str]]) -> None:
    """Drop the statements of `scope` (a module, function or class: its own statements, not
    those of nested scopes) that have no effect: in a function, given the names it `read`s
    (`reads` holds each function's, from `Rewriter`); at module or class level (`read` None),
    where an assignment defines an attribute, only statements that do nothing."""
    for node in list(scoped(scope)):
        if node is not scope and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            prune(node, reads[node], reads)
        elif node is not scope and isinstance(node, ast.ClassDef):
            prune(node, None, reads)
        else:
            for field in BODIES:
                body = getattr(node, field, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    kept = [kept for stmt in body if (kept := pruned(stmt, read)) is not None]
                    setattr(node, field, kept or emptied(node, field))


def emptied(node: ast.AST, field: str) -> list[ast.stmt]:
    """What a body of `node` left without statements holds: `pass` where one is needed."""
    needed = field == "body" or (field == "finalbody" and not getattr(node, "handlers", None))
    return [pass_at(node)] if needed else []


def scoped(scope: ast.AST) -> Iterator[ast.AST]:
    """`scope` and the statements and handlers of its own bodies, outermost first, down to (and
    including) each nested function or class, whose bodies are not its own."""
    yield scope
    for child in blocks(scope):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield child
        else:
            yield from scoped(child)


def blocks(node: ast.AST) -> Iterator[ast.AST]:
    """The statements, handlers and cases directly in `node`'s bodies."""
    for field in (*BODIES, "handlers", "cases"):
        yield from getattr(node, field, ())


def pruned(stmt: ast.stmt, read: set[str] | None) -> ast.stmt | None:
    """`stmt`, None where it has no effect, or the call its dead assignment makes (in a
    function that reads `read`)."""
    if isinstance(stmt, ast.Pass):
        return None
    if isinstance(stmt, ast.Expr):
        return stmt if has_effect(stmt.value) else None
    target, value = assigned(stmt)
    if read is None or target is None or target in read:
        return stmt
    if value is None or not has_effect(value):
        return None
    return ast.copy_location(ast.Expr(value), stmt)


def assigned(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """The one plain name `stmt` assigns, and its value; (None, None) for any other statement."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        target = stmt.target
    else:
        return None, None
    return (target.id, stmt.value) if isinstance(target, ast.Name) else (None, None)


def has_effect(node: ast.AST) -> bool:
    return any(isinstance(n, EFFECTS) for n in ast.walk(node))


def pass_at(node: ast.AST) -> ast.Pass:
    return ast.copy_location(ast.Pass(), node)


# -- loops ---------------------------------------------------------------------------------------


def loops(node: ast.AST) -> None:
    """In every body under `node` (statements only, innermost first): `while True:` that starts
    with `if c: break` as `while not c:`, and a counted `while` as the `for` over a `range` it
    counts through (`counted`). Run after the dead code is gone."""
    for child in blocks(node):
        loops(child)
    if isinstance(node, ast.While):
        first = node.body[0]
        truthy = isinstance(node.test, ast.Constant) and bool(node.test.value)
        if truthy and isinstance(first, ast.If) and not first.orelse and breaks(first.body):
            node.test = negated(first.test)
            node.body = node.body[1:] or [pass_at(node)]
    for field in BODIES:
        body = getattr(node, field, None)
        if isinstance(body, list) and len(body) > 1 and isinstance(body[0], ast.stmt):
            setattr(node, field, counted(body))


def breaks(body: list[ast.stmt]) -> bool:
    return len(body) == 1 and isinstance(body[0], ast.Break)


def counted(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with each `i = a` followed by `while i < b:` that ends with `i += 1` (and neither
    assigns `i` elsewhere nor continues) as `for i in range(a, b):`."""
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
    name, first = assigned(start)
    if name is None or not isinstance(loop, ast.While) or loop.orelse:
        return None
    test, last = loop.test, loop.body[-1]
    bounded = (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and [type(op) for op in test.ops] == [ast.Lt]
    )
    steps = (
        isinstance(last, ast.AugAssign)
        and isinstance(last.op, ast.Add)
        and isinstance(last.target, ast.Name)
        and last.target.id == name
        and is_constant(last.value, 1)
    )
    if not (bounded and steps) or writes(loop.body[:-1], name) or continues(loop.body[:-1]):
        return None
    stop = test.comparators[0]
    limits = [stop] if is_constant(first, 0) else [first, stop]
    target = ast.Name(name, ast.Store())
    iterated = ast.Call(ast.Name("range", ast.Load()), limits, [])
    body = loop.body[:-1] or [pass_at(loop)]
    return ast.copy_location(ast.For(target, iterated, body, [], None), start)


def writes(body: list[ast.stmt], name: str) -> bool:
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
