"""`grader/checks/support/rules.py`: every rule is owned by a part, and every check it names as
testing a rule is a check of that part that breaks it, so that a failure left to that part is
left to a check that runs; and every rule says what breaking it harms."""

import ast

import pytest

from grader.checks.support import rules
from grader.parts import PARTS
from grader.scoring.plugin import CHECKS_DIR, check_names
from grader.severity import SEVERITIES


@pytest.mark.parametrize("rule", sorted(rules.CHECKS))
def test_each_rule_names_checks_of_its_part_that_judge_it(rule: str) -> None:
    part = rules.owner(rule)
    assert part in PARTS, f"{rule}: no part {part!r}"
    modules = PARTS[part].checks
    sources = "".join((CHECKS_DIR / f"{module}.py").read_text() for module in modules)
    checks = set().union(*(check_names(module) for module in modules))
    assert set(rules.CHECKS[rule]) <= checks, f"{rule}: not checks of part {part}"
    constant = next(name for name, value in vars(rules).items() if value == rule)
    support = ("manager_model.py", "rows_and_slots.py", "cache_model.py")
    judged = sources + "".join((CHECKS_DIR / "support" / name).read_text() for name in support)
    assert constant in judged_names(judged), f"no check of part {part} judges {constant}"


def judged_names(source: str) -> set[str]:
    """The names in the arguments of every `judged_by(...)` call in `source`."""
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "judged_by"]  # fmt: skip
    return {name.id for call in calls for arg in call.args for name in ast.walk(arg)
            if isinstance(name, ast.Name)}  # fmt: skip


def test_each_rule_says_what_breaking_it_harms() -> None:
    assert set(rules.HARMS) == set(rules.CHECKS)
    assert set(rules.HARMS.values()) <= set(SEVERITIES)
