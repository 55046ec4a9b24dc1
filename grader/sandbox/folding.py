"""A counterexample's lines with their constant sub-expressions written as their values, as a
person would write them: `allocator.free([sorted(set(range(1)) - set())[0]])` is
`allocator.free([0])`.

The transcript writes a block the model says is free by its place among the free ones, so that
the counterexample frees the same block on any allocator (`expect.Held.code`); where nothing is
held, that place is the id itself. Folding runs on the text the grading process wrote, never the
candidate's code, with a small evaluator of its own (no `eval`): literals, displays, arithmetic,
indexing, and a few pure builtins on bounded sizes. An expression it cannot evaluate exactly, or
whose value is written no shorter, stays as it was, so the line runs as before.
"""

import ast
import operator
from collections.abc import Callable, Iterable
from typing import Any

MAX_ITEMS = 100_000  # of any container the evaluator builds (a pool's ids, up to its size)
MAX_INT = 1 << 62
PURE: dict[str, Callable[..., Any]] = {
    "sorted": sorted, "set": set, "frozenset": frozenset, "list": list, "tuple": tuple,
    "len": len, "min": min, "max": max, "sum": sum, "abs": abs, "range": range,
}  # fmt: skip
BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_,
}  # fmt: skip
UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
PLAIN = (int, str, bool, type(None))


class NotConstant(Exception):
    """The expression is not one this module folds."""


def folded_lines(lines: Iterable[str]) -> list[str]:
    """Each of `lines` (statements of one script) with its constant sub-expressions folded,
    where none of `PURE`'s names is assigned anywhere among them."""
    lines = list(lines)
    assigned = set()
    for line in lines:
        with_tree = parsed(line)
        if with_tree is not None:
            assigned |= {node.id for node in ast.walk(with_tree) if isinstance(node, ast.Name)
                         and not isinstance(node.ctx, ast.Load)}  # fmt: skip
    pure = {name: function for name, function in PURE.items() if name not in assigned}
    return [folded(line, pure) for line in lines]


def parsed(line: str) -> ast.Module | None:
    try:
        return ast.parse(line)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def folded(line: str, pure: dict[str, Callable[..., Any]]) -> str:
    """`line` with each outermost constant sub-expression on it written as its value, where
    that is shorter; a line that is not a statement of its own stays as it is."""
    tree = parsed(line)
    if tree is None:
        return line
    data, edits = line.encode(), []
    for node in outermost_constants(tree, pure):
        start, end = node.col_offset, node.end_col_offset
        value = repr(evaluated(node, pure)).encode()
        if node.lineno == node.end_lineno == 1 and end is not None and len(value) < end - start:
            edits.append((start, end, value))
    for start, end, value in sorted(edits, reverse=True):
        data = data[:start] + value + data[end:]
    return data.decode()


def outermost_constants(node: ast.AST, pure: dict[str, Callable[..., Any]]) -> Iterable[ast.expr]:
    """The outermost sub-expressions of `node` that `evaluated` folds to a plain value; nothing
    inside an f-string (its parts' positions are not the line's)."""
    if isinstance(node, ast.JoinedStr):
        return
    if isinstance(node, ast.expr) and not isinstance(node, ast.Constant):
        try:
            evaluated(node, pure)
        except (NotConstant, ArithmeticError, IndexError, TypeError, ValueError):
            pass
        else:
            yield node
            return
    for child in ast.iter_child_nodes(node):
        yield from outermost_constants(child, pure)


def evaluated(node: ast.expr, pure: dict[str, Callable[..., Any]]) -> Any:
    """The value of `node`, built from literals, displays, arithmetic, indexing and calls of
    `pure`; NotConstant for anything else, or a value past `MAX_ITEMS` or `MAX_INT`."""
    value = evaluate(node, pure)
    if not plain(value):
        raise NotConstant
    return value


def evaluate(node: ast.expr, pure: dict[str, Callable[..., Any]]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, PLAIN):
        value = node.value
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        value = kind(evaluate(item, pure) for item in node.elts)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        value = UNARY[type(node.op)](number(evaluate(node.operand, pure)))
    elif isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        left, right = evaluate(node.left, pure), evaluate(node.right, pure)
        if isinstance(node.op, ast.Mult) and not (isinstance(left, int) and isinstance(right, int)):
            raise NotConstant  # a repeated sequence: written shorter as it is
        value = BINARY[type(node.op)](left, right)
    elif isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Slice):
        value = evaluate(node.value, pure)[number(evaluate(node.slice, pure))]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in pure
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    ):
        value = pure[node.func.id](*(evaluate(arg, pure) for arg in node.args))
    else:
        raise NotConstant
    return bounded(value)


def number(value: Any) -> int:
    if type(value) is not int:
        raise NotConstant
    return value


def bounded(value: Any) -> Any:
    """`value`, where no container is longer than `MAX_ITEMS` and no int past `MAX_INT`."""
    if isinstance(value, int) and abs(value) > MAX_INT:
        raise NotConstant
    if isinstance(value, list | tuple | set | frozenset | range | str) and len(value) > MAX_ITEMS:
        raise NotConstant
    return value


def plain(value: Any) -> bool:
    """Whether `repr(value)` is a literal that gives `value` back: a plain value, or a list or
    tuple of them (a set's order and `set()` are not a literal's)."""
    if isinstance(value, PLAIN):
        return True
    return type(value) in (list, tuple) and all(plain(item) for item in value)
