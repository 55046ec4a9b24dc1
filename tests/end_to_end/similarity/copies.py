"""Submissions built from the answer key and the kit's alternative allocators."""

import ast
import random
from pathlib import Path

from grader import KIT_ROOT
from grader.intake import Intake
from grader.parts import SUBMISSION_FILES

ALTERNATIVES = KIT_ROOT / "tests" / "submissions" / "alternatives"


def folder_files(folder: Path) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted(folder.glob("*.py"))
        if path.name != "__init__.py"
    }


def intake(name: str, files: dict[str, bytes]) -> Intake:
    return Intake(name=name, path=name, files=files)


def key_files() -> dict[str, bytes]:
    """The answer key as a submission: its files that `grader/parts.toml` lists."""
    files = folder_files(KIT_ROOT / "solutions")
    return {name: files[name] for name in SUBMISSION_FILES if name in files}


def alternatives() -> list[Intake]:
    return [intake(path.name, folder_files(path)) for path in sorted(ALTERNATIVES.iterdir())]


class Renamer(ast.NodeTransformer):
    """Renames every identifier the file defines or uses (names, arguments, attributes,
    functions, classes) to a fresh meaningless one, and reverses the order of the functions
    in each class and at module level."""

    def __init__(self, seed: int) -> None:
        self.names: dict[str, str] = {}
        self.random = random.Random(seed)

    def fresh(self, name: str) -> str:
        if name not in self.names:
            self.names[name] = f"z{self.random.getrandbits(32):08x}"
        return self.names[name]

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.fresh(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.fresh(node.arg)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        node.attr = self.fresh(node.attr)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.fresh(node.name)
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.name = self.fresh(node.name)
        node.body = reordered(node.body)
        return self.generic_visit(node)


def reordered(body: list[ast.stmt]) -> list[ast.stmt]:
    """`body` with its function definitions in reverse order, in the same slots."""
    slots = [at for at, stmt in enumerate(body) if isinstance(stmt, ast.FunctionDef)]
    out = list(body)
    for at, stmt in zip(slots, reversed([body[at] for at in slots]), strict=True):
        out[at] = stmt
    return out


def renamed_and_reordered(source: bytes, seed: int = 0) -> bytes:
    tree = Renamer(seed).visit(ast.parse(source))
    tree.body = reordered(tree.body)
    return ast.unparse(tree).encode()


def commented_and_rewrapped(source: bytes) -> bytes:
    """Every statement on one line (ast.unparse undoes the wrapping), a comment after each."""
    lines = ast.unparse(ast.parse(source)).splitlines()
    return "\n".join(
        f"{line}  # my note {at}" if line.strip() else line for at, line in enumerate(lines)
    ).encode()


SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return, ast.Raise, ast.Assert,
          ast.Delete, ast.Import, ast.ImportFrom, ast.Pass, ast.Break, ast.Continue)  # fmt: skip


def semicolons_and_parentheses(source: bytes) -> bytes:
    """Every one-line simple statement ended by `;`, every assignment's value in parentheses,
    and a `pass` first in every function (after its docstring)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            node.body.insert(int(ast.get_docstring(node) is not None), ast.Pass())
    text = ast.unparse(tree)
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, SIMPLE) and node.lineno == node.end_lineno:
            line = lines[node.lineno - 1]
            if isinstance(node, ast.Assign):
                indent = line[: len(line) - len(line.lstrip())]
                targets = " = ".join(ast.unparse(target) for target in node.targets)
                line = f"{indent}{targets} = ({ast.unparse(node.value)})"
            lines[node.lineno - 1] = f"{line};"
    return "\n".join(lines).encode()


def independent_assignments_swapped(source: bytes) -> bytes:
    """Each pair of consecutive assignments that share no name (neither reads or writes what
    the other writes) swapped, in every block."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            if isinstance(body := getattr(node, field, None), list):
                swap_independent_pairs(body)
    return ast.unparse(tree).encode()


def swap_independent_pairs(body: list[ast.stmt]) -> None:
    at = 0
    while at + 1 < len(body):
        one, two = body[at], body[at + 1]
        if independent(one, two):
            body[at], body[at + 1] = two, one
            at += 1
        at += 1


def independent(one: ast.stmt, two: ast.stmt) -> bool:
    """Two assignments, neither reading or writing a name the other writes."""
    if not (isinstance(one, ast.Assign) and isinstance(two, ast.Assign)):
        return False
    return not (written(one) & names(two) or written(two) & names(one))


def names(node: ast.AST) -> set[str]:
    return {ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)}


def written(node: ast.Assign) -> set[str]:
    return set().union(*(names(target) for target in node.targets))
