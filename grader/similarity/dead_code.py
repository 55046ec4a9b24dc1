"""Dead code, for the normal form (`normalize.py`): statements that change nothing a function
returns, raises or mutates, found on its syntax tree and dropped.

In a function, a name is live when the function reads it outside an assignment to a name of a
value that calls nothing, or in the value of such an assignment to a live name (`Reads.live`):
`_ = 0`, `_ = _ + 1` and two dead names assigned from each other are all dead. An assignment to a
dead name goes (one whose value calls something stays as the call); so does an expression that
calls nothing, `pass`, and whatever follows a `return`, `raise`, `break` or `continue` in its
block (`reachable`: cut before the function's reads are collected). At module or class level an
assignment defines an attribute, and stays. A name a function declares global or nonlocal,
deletes, or augments in place (`x += y`, which may change what another name holds), is live; so
is every name of a function that may read any (`locals()`, `vars()`, `eval`, `exec`).
"""

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

BODIES = ("body", "orelse", "finalbody")
TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)
EFFECTS = (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)


@dataclass
class Reads:
    """What one function reads: `free`, the names it reads where a read counts; `uses`, for each
    name, the names read by the call-free values assigned to it; `dynamic`, whether it may read
    any name (`locals()`, `vars()`, `eval`, `exec`)."""

    free: set[str] = field(default_factory=set)
    uses: dict[str, set[str]] = field(default_factory=dict)
    dynamic: bool = False

    def live(self) -> set[str]:
        """The names read where it counts, and those their assigned values read, transitively
        (every name, where the function may read any)."""
        if self.dynamic:
            return self.everything().union(self.uses)
        live, todo = set(self.free), list(self.free)
        while todo:
            for name in self.uses.get(todo.pop(), ()):
                if name not in live:
                    live.add(name)
                    todo.append(name)
        return live

    def everything(self) -> set[str]:
        """Every name the function reads (for the function around it, where all of it counts)."""
        return self.free.union(*self.uses.values())


def reachable(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` up to its first `return`, `raise`, `break` or `continue`, included."""
    for at, stmt in enumerate(body):
        if isinstance(stmt, TERMINAL):
            return body[: at + 1]
    return body


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


def prune(scope: ast.AST, live: set[str] | None, lives: dict[ast.AST, set[str]]) -> None:
    """Drop the dead statements of `scope` (a module, function or class: its own statements, not
    those of nested scopes): in a function, given its `live` names (`lives` holds each
    function's); at module or class level (`live` None), only statements that do nothing."""
    for node in list(scoped(scope)):
        if node is not scope and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            prune(node, lives[node], lives)
        elif node is not scope and isinstance(node, ast.ClassDef):
            prune(node, None, lives)
        else:
            for name in BODIES:
                body = getattr(node, name, None)
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    kept = [stmt for each in body if (stmt := pruned(each, live)) is not None]
                    setattr(node, name, kept or emptied(node, name))


def pruned(stmt: ast.stmt, live: set[str] | None) -> ast.stmt | None:
    """`stmt`; None where it has no effect; the call its dead assignment makes."""
    if isinstance(stmt, ast.Pass):
        return None
    if isinstance(stmt, ast.Expr):
        return stmt if has_effect(stmt.value) else None
    target, value = assigned(stmt)
    if live is None or target is None or target in live:
        return stmt
    if value is None or not has_effect(value):
        return None
    return ast.copy_location(ast.Expr(value), stmt)


def emptied(node: ast.AST, name: str) -> list[ast.stmt]:
    """What a body of `node` left without statements holds: `pass` where one is needed."""
    needed = name == "body" or (name == "finalbody" and not getattr(node, "handlers", None))
    return [ast.copy_location(ast.Pass(), node)] if needed else []


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
    for name in (*BODIES, "handlers", "cases"):
        yield from getattr(node, name, ())
