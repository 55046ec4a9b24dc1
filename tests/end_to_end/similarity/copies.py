"""Submissions built from the answer key and the kit's alternative allocators."""

import ast
import random
from pathlib import Path

from grader import KIT_ROOT
from grader.intake import Intake

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
    return folder_files(KIT_ROOT / "solutions")


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
