"""`kernels/` is self-contained: the oracles import nothing from the grader, the answer key, the
full kit's tools or the stubs (the grader and the candidate kit both trust them as they are)."""

import ast
from pathlib import Path

import pytest

from grader import KIT_ROOT

FORBIDDEN = ("grader", "solutions", "full_kit", "exercises")
MODULES = sorted((KIT_ROOT / "kernels").glob("*.py"))


def imported_modules(tree: ast.Module) -> list[str]:
    """Every module an `import` or `from ... import` statement of `tree` names (relative
    imports by their dots: they stay inside `kernels/`)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_a_kernels_module_imports_no_other_part_of_the_kit(path: Path) -> None:
    tree = ast.parse(path.read_bytes(), filename=str(path))
    found = [name for name in imported_modules(tree) if name.split(".")[0] in FORBIDDEN]
    assert not found, f"kernels/{path.name} imports {found}"


def test_the_check_sees_every_module() -> None:
    assert {path.name for path in MODULES} >= {"__init__.py", "cases.py", "reference.py"}
