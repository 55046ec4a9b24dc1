"""A counterexample's lines with their constant sub-expressions written as their values, as a
person would write them: `allocator.free([sorted(set(range(1)) - set())[0]])` is
`allocator.free([0])`.

The transcript writes a block the model says is free by its place among the free ones, so that
the counterexample frees the same block on any allocator (`expect.Held.code`); where nothing is
held, that place is the id itself. Folding runs on the text the grading process wrote, never the
candidate's code, with a small evaluator of its own (no `eval`): int literals and strings,
list, tuple and set displays, int arithmetic, indexing, and a few pure builtins, building at most
`BUDGET` items in all per line. A value replaces its expression only where it is written
shorter and the line then parses, without a warning, to the very tree it had with that value in
place (so no precedence or syntax changes); anything else stays as it was, so the line runs as
before.
"""

import ast
import operator
import warnings
from collections.abc import Callable, Iterable
from typing import Any

BUDGET = 100_000  # items the evaluator may build for one line (a pool's ids, up to its size)
MAX_INT = 1 << 62
PURE: dict[str, Callable[..., Any]] = {
    "sorted": sorted, "set": set, "frozenset": frozenset, "list": list, "tuple": tuple,
    "len": len, "min": min, "max": max, "sum": sum, "abs": abs, "range": range,
}  # fmt: skip
INT_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}  # fmt: skip
SET_OPERATORS = {ast.Sub: operator.sub, ast.BitOr: operator.or_, ast.BitAnd: operator.and_}
UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
PLAIN = (int, str, bool, type(None))
NOT_FOLDED = (ArithmeticError, IndexError, TypeError, ValueError, RecursionError, MemoryError)


class NotConstant(Exception):
    """The expression is not one this module folds."""


def folded_lines(lines: Iterable[str]) -> list[str]:
    """Each of `lines` (statements of one script) with its constant sub-expressions folded;
    of `PURE`'s names, only those the lines bind nowhere (`bound_names`, over the whole script
    where it parses, else line by line) are called."""
    lines = list(lines)
    whole = parsed("\n".join(lines))  # a line of a block (`for sorted in ...:`) parses only here
    trees = [whole] if whole else [tree for line in lines if (tree := parsed(line))]
    bound = set().union(*map(bound_names, trees))
    pure = {name: function for name, function in PURE.items() if name not in bound}
    return [folded(line, pure) for line in lines]


def parsed(line: str) -> ast.Module | None:
    """`line`'s tree; None where it does not parse, or parses only with a warning (`1is None`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return ast.parse(line)
        except (SyntaxError, SyntaxWarning, ValueError, RecursionError, MemoryError):
            return None


def bound_names(tree: ast.AST) -> set[str]:
    """The names `tree` binds or declares: assigned or deleted, imported, defined, an argument,
    an exception's or a match pattern's name, global or nonlocal."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names.update(node.names)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def folded(line: str, pure: dict[str, Callable[..., Any]]) -> str:
    """`line` with each outermost constant sub-expression on it written as its value, where
    that is shorter and parses back to the same tree; a line that is not a statement of its
    own, or whose folding would change its tree, stays as it is."""
    tree = parsed(line)
    if tree is None:
        return line
    try:
        found = dict(outermost_constants(tree, Evaluator(pure)))
    except (RecursionError, MemoryError):
        return line
    data, edits = line.encode(), {}  # positions are UTF-8 offsets
    for node, value in found.items():
        literal = repr(value).encode()
        start, end = node.col_offset, node.end_col_offset
        if node.lineno == node.end_lineno == 1 and len(literal) < end - start:
            edits[node] = (start, end, literal)
    for start, end, literal in sorted(edits.values(), reverse=True):
        data = data[:start] + literal + data[end:]
    text = data.decode()
    return text if edits and same_tree(text, tree, {node: found[node] for node in edits}) else line


def same_tree(text: str, tree: ast.Module, values: dict[ast.expr, Any]) -> bool:
    """Whether `text` parses to `tree` with each node of `values` replaced by its value's
    literal."""
    again = parsed(text)

    class WithValues(ast.NodeTransformer):
        def visit(self, node: ast.AST) -> ast.AST:
            if node in values:
                return ast.parse(repr(values[node]), mode="eval").body
            return super().visit(node)

    return again is not None and ast.dump(again) == ast.dump(WithValues().visit(tree))


def outermost_constants(node: ast.AST, evaluator: "Evaluator") -> Iterable[tuple[ast.expr, Any]]:
    """The outermost sub-expressions of `node` read as values (never a target), each with the
    plain value `evaluator` gives it, out of its one budget; nothing inside an f-string (its
    parts' positions are not the line's)."""
    if isinstance(node, ast.JoinedStr):
        return
    loaded = not isinstance(getattr(node, "ctx", ast.Load()), ast.Store | ast.Del)
    if isinstance(node, ast.expr) and not isinstance(node, ast.Constant) and loaded:
        try:
            value = evaluator.value(node)
        except (NotConstant, *NOT_FOLDED):
            pass
        else:
            yield node, value
            return
    for child in ast.iter_child_nodes(node):
        yield from outermost_constants(child, evaluator)


class Evaluator:
    """The value of an expression built from literals, displays, int arithmetic, indexing and
    calls of `pure`, building at most `BUDGET` items in all; NotConstant for anything else."""

    def __init__(self, pure: dict[str, Callable[..., Any]]) -> None:
        self.pure, self.budget = pure, BUDGET

    def value(self, node: ast.expr) -> Any:
        """The plain value of `node`: one whose repr is a literal that gives it back."""
        value = self.evaluate(node)
        if not plain(value):
            raise NotConstant
        return value

    def evaluate(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, PLAIN):
            return self.bounded(node.value)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
            return self.bounded(kind(self.evaluate(item) for item in node.elts))
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
            return self.bounded(UNARY[type(node.op)](number(self.evaluate(node.operand))))
        if isinstance(node, ast.BinOp):
            return self.bounded(self.binary(node))
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
            return self.bounded(self.evaluate(node.value)[number(self.evaluate(node.slice))])
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in self.pure
            and not node.keywords
            and not any(isinstance(arg, ast.Starred) for arg in node.args)
        ):
            args = [self.evaluate(arg) for arg in node.args]
            return self.bounded(self.pure[node.func.id](*args))
        raise NotConstant

    def binary(self, node: ast.BinOp) -> Any:
        """Int arithmetic, a set's difference, union or intersection, two lists or tuples
        joined."""
        left, right = self.evaluate(node.left), self.evaluate(node.right)
        kind = type(node.op)
        if kind in INT_OPERATORS and type(left) is int and type(right) is int:
            return INT_OPERATORS[kind](left, right)
        if kind in SET_OPERATORS and isinstance(left, set | frozenset):
            return SET_OPERATORS[kind](left, right)
        if kind is ast.Add and type(left) is type(right) and isinstance(left, list | tuple):
            self.spend(len(left) + len(right))
            return left + right
        raise NotConstant

    def bounded(self, value: Any) -> Any:
        """`value`, its items paid for out of the budget; NotConstant past it, or past
        `MAX_INT`."""
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise NotConstant
        if isinstance(value, list | tuple | set | frozenset | range | str):
            self.spend(len(value))
        return value

    def spend(self, items: int) -> None:
        self.budget -= items
        if self.budget < 0:
            raise NotConstant


def number(value: Any) -> int:
    if type(value) is not int:
        raise NotConstant
    return value


def plain(value: Any) -> bool:
    """Whether `repr(value)` is a literal that gives `value` back: a plain value, or a list or
    tuple of them (a set's order and `set()` are not a literal's)."""
    if isinstance(value, PLAIN):
        return True
    return type(value) in (list, tuple) and all(plain(item) for item in value)
