"""Mechanical rewrites of a whole file, as a candidate who copied would make them to hide it: each
keeps what the code does and adds or changes tokens all over (`test_rewrites.py`)."""

import ast
from collections.abc import Callable

Rewrite = Callable[[bytes], bytes]
BODIES = ("body", "orelse", "finalbody")


def each_body(tree: ast.AST) -> list[list[ast.stmt]]:
    """Every statement list of `tree`: bodies, `else:` and `finally:` blocks, handlers'."""
    return [
        body
        for node in ast.walk(tree)
        for field in BODIES
        if isinstance(body := getattr(node, field, None), list) and body
        if isinstance(body[0], ast.stmt)
    ]


def after_every_statement(make: Callable[[], ast.stmt]) -> Rewrite:
    def rewrite(source: bytes) -> bytes:
        tree = ast.parse(source)
        for body in each_body(tree):
            body[:] = [new for stmt in body for new in (stmt, make())]
        return ast.unparse(ast.fix_missing_locations(tree)).encode()

    return rewrite


dead_store_after_every_statement = after_every_statement(
    lambda: ast.Assign([ast.Name("_", ast.Store())], ast.Constant(0))
)
string_after_every_statement = after_every_statement(lambda: ast.Expr(ast.Constant(".")))


class Transformer(ast.NodeTransformer):
    """A rewrite of nodes, children first, applied to a whole file."""

    def __call__(self, source: bytes) -> bytes:
        tree = self.visit(ast.parse(source))
        return ast.unparse(ast.fix_missing_locations(tree)).encode()


class GetattrEverywhere(Transformer):
    """Every attribute read as `getattr(obj, "attr")`."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        getter = ast.Name("getattr", ast.Load())
        return ast.Call(getter, [node.value, ast.Constant(node.attr)], [])


class DoubleNegatedTests(Transformer):
    """Every `if` and `while` test as `not not (test)`."""

    def visit_If(self, node: ast.If | ast.While) -> ast.stmt:
        self.generic_visit(node)
        node.test = ast.UnaryOp(ast.Not(), ast.UnaryOp(ast.Not(), node.test))
        return node

    visit_While = visit_If


FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}


class ComparisonsFlipped(Transformer):
    """`a < b` as `b > a`, and each other ordering comparison of two operands the other way."""

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in FLIP:
            return ast.Compare(node.comparators[0], [FLIP[type(node.ops[0])]()], [node.left])
        return node


class AugmentedAssignmentsExpanded(Transformer):
    """`x += y` as `x = x + y`."""

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.stmt:
        self.generic_visit(node)
        read = ast.parse(ast.unparse(node.target), mode="eval").body
        return ast.Assign([node.target], ast.BinOp(read, node.op, node.value))


COMMUTATIVE = (ast.Add, ast.Mult, ast.BitOr, ast.BitAnd, ast.BitXor)


class OperandsSwapped(Transformer):
    """The operands of each commutative operator, `==` and `!=` the other way round."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, COMMUTATIVE):
            node.left, node.right = node.right, node.left
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        node.values.reverse()
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq | ast.NotEq):
            node.left, node.comparators = node.comparators[0], [node.left]
        return node


class CountedLoopsAsWhile(Transformer):
    """`for i in range(a, b):` (no `continue` in it) as `i = a`, `while i < b:`, `i += 1`."""

    def visit_For(self, node: ast.For) -> ast.AST | list[ast.stmt]:
        self.generic_visit(node)
        counts = (
            isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range"
            and len(node.iter.args) in (1, 2)
            and not node.iter.keywords
            and not node.orelse
            and not any(isinstance(n, ast.Continue) for n in ast.walk(node))
        )
        if not counts:
            return node
        name = node.target.id
        start, stop = [ast.Constant(0), *node.iter.args][-2:]
        step = ast.AugAssign(ast.Name(name, ast.Store()), ast.Add(), ast.Constant(1))
        test = ast.Compare(ast.Name(name, ast.Load()), [ast.Lt()], [stop])
        loop = ast.While(test, [*node.body, step], [])
        return [ast.Assign([ast.Name(name, ast.Store())], start), loop]


class WhilesAsBreaks(Transformer):
    """`while c:` as `while True:` whose first statement is `if not c: break`."""

    def visit_While(self, node: ast.While) -> ast.stmt:
        self.generic_visit(node)
        stop = ast.If(ast.UnaryOp(ast.Not(), node.test), [ast.Break()], [])
        return ast.While(ast.Constant(True), [stop, *node.body], node.orelse)


class LiteralsAsArithmetic(Transformer):
    """Every integer literal `k` as `k + 1 - 1`."""

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        if type(node.value) is not int:
            return node
        return ast.BinOp(ast.BinOp(node, ast.Add(), ast.Constant(1)), ast.Sub(), ast.Constant(1))


class ElifsNested(Transformer):
    """Every `elif` written as `else:` holding an `if` (and a `pass` after it, which keeps
    `ast.unparse` from writing the `elif` back)."""

    def visit_If(self, node: ast.If) -> ast.stmt:
        self.generic_visit(node)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node.orelse.append(ast.Pass())
        return node


REWRITES: dict[str, Rewrite] = {
    "dead_store_after_every_statement": dead_store_after_every_statement,
    "getattr_everywhere": GetattrEverywhere(),
    "double_negated_tests": DoubleNegatedTests(),
    "string_after_every_statement": string_after_every_statement,
    "comparisons_flipped": ComparisonsFlipped(),
    "augmented_assignments_expanded": AugmentedAssignmentsExpanded(),
    "operands_swapped": OperandsSwapped(),
    "counted_loops_as_while": CountedLoopsAsWhile(),
    "whiles_as_breaks": WhilesAsBreaks(),
    "literals_as_arithmetic": LiteralsAsArithmetic(),
    "elifs_nested": ElifsNested(),
}
