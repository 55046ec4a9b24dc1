"""Every check names the severity of its failure beside its points (`grader/severity.py`), read
from the check modules' source: a check without one would stop every grading at collection."""

import ast

import pytest

from grader.scoring.plugin import CHECKS_DIR
from grader.severity import SEVERITIES

MODULES = sorted(path for path in CHECKS_DIR.glob("*.py") if path.name != "__init__.py")


def severities(path) -> dict[str, list[str]]:
    """Each `check_*` function of the module at `path`, and the severities its markers give."""
    found = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("check_"):
            found[node.name] = [
                decorator.args[0].value
                for decorator in node.decorator_list
                if isinstance(decorator, ast.Call)
                and ast.unparse(decorator.func) == "pytest.mark.severity"
                and decorator.args
                and isinstance(decorator.args[0], ast.Constant)
            ]
    return found


@pytest.mark.parametrize("module", MODULES, ids=lambda path: path.stem)
def test_each_check_has_one_known_severity(module) -> None:
    found = severities(module)
    wrong = {name: kinds for name, kinds in found.items() if len(kinds) != 1}
    assert not wrong, f"checks without exactly one severity marker: {wrong}"
    unknown = {name: kinds[0] for name, kinds in found.items() if kinds[0] not in SEVERITIES}
    assert not unknown, f"severities none of {SEVERITIES}: {unknown}"


def test_the_severities_are_used_by_some_check() -> None:
    used = {kind for module in MODULES for kinds in severities(module).values() for kind in kinds}
    assert used == set(SEVERITIES)
