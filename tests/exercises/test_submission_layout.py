"""exercises/ and solutions/ are submissions as exercises/README.md defines them: plain modules that
import each other relatively and nothing of the kit, loadable as a package under any name."""

import ast
import sys
from pathlib import Path

from grader import KIT_ROOT
from grader.parts import SUBMISSION_FILES

ROOT = KIT_ROOT
ALLOWED_TOP_LEVEL = set(sys.stdlib_module_names) | {"torch", "triton"}


def absolute_imports(path: Path) -> set[str]:
    """The top-level names a module imports absolutely (`import x.y`, `from x import y`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def assert_imports_only_torch_triton_and_the_standard_library(folder: str) -> None:
    for path in (ROOT / folder).glob("*.py"):
        foreign = absolute_imports(path) - ALLOWED_TOP_LEVEL
        assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


def test_exercises_import_only_torch_triton_and_the_standard_library() -> None:
    assert_imports_only_torch_triton_and_the_standard_library("exercises")


def test_exercises_hold_every_submission_file() -> None:
    assert {p.name for p in (ROOT / "exercises").glob("*.py")} >= set(SUBMISSION_FILES)
