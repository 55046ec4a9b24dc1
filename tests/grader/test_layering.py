"""The grader's modules import one another in one direction: no cycle anywhere in `grader/`; the
drive's modules (`grader/drive/`) each import only those its docstring lists after it; the
report's (`grader/report/`) nothing of the sandbox or the scoring, directly; the grading and the
scoring nothing of the report but the progress lines' words. Read from the source, function-level
imports included, and `__main__`'s commands, which it imports by name."""

import ast
import re
from pathlib import Path

from grader import KIT_ROOT, drive
from grader.__main__ import COMMANDS

GRADER = KIT_ROOT / "grader"
# The order grader/drive/__init__.py lists its modules in, top down: each imports only those after.
DRIVE_ORDER = tuple(re.findall(r"`(\w+)\.py`", drive.__doc__ or ""))


def module_name(path: Path) -> str:
    parts = path.relative_to(KIT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that the source at `path` imports, anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {module for module in found & modules if module != name}


def import_graph() -> dict[str, set[str]]:
    """Each module of `grader/` and those of it that it imports; `__main__` imports its commands
    (`COMMANDS`) by name, when one is asked for."""
    paths = sorted(GRADER.rglob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = {module_name(path): imported(path, modules) for path in paths}
    graph["grader.__main__"] |= set(COMMANDS.values())
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each cycle of `graph` found by a depth-first walk, as the path that closes it."""
    found, done = [], set()

    def walk(node: str, path: list[str]) -> None:
        if node in path:
            found.append([*path[path.index(node) :], node])
            return
        if node in done:
            return
        for following in sorted(graph[node]):
            walk(following, [*path, node])
        done.add(node)

    for node in sorted(graph):
        walk(node, [])
    return found


def test_no_module_of_the_grader_imports_itself_through_others() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_check_can_fail() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_each_module_of_the_drive_imports_only_those_below_it() -> None:
    graph = import_graph()
    drive = {f"grader.drive.{name}": rank for rank, name in enumerate(DRIVE_ORDER)}
    assert set(drive) | {"grader.drive"} == {m for m in graph if m.startswith("grader.drive")}
    upward = {
        module: sorted(other for other in graph[module] if drive.get(other, rank + 1) <= rank)
        for module, rank in drive.items()
    }
    assert not {module: others for module, others in upward.items() if others}


def test_the_report_imports_nothing_of_the_sandbox_or_the_scoring() -> None:
    below = ("grader.sandbox", "grader.scoring")
    reaching = {
        module: sorted(other for other in imports if other.startswith(below))
        for module, imports in import_graph().items()
        if module.startswith("grader.report")
    }
    assert not {module: others for module, others in reaching.items() if others}


def test_the_grading_scores_without_the_reports_words() -> None:
    """`grade.py` and the scoring record ids and figures (an ungraded reason's id: `ungraded.py`),
    never words: only the progress lines (`scoring/progress.py`) speak the grading's language."""
    graph = import_graph()
    grading = [module for module in graph if module.startswith(("grader.grade", "grader.scoring"))]
    reaching = {
        module: sorted(other for other in graph[module] if other.startswith("grader.report"))
        for module in grading
        if module != "grader.scoring.progress"
    }
    assert "grader.grade" in reaching
    assert not {module: others for module, others in reaching.items() if others}
