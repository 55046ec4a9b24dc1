"""`grader/checks/support/owners.py`: every check it names is a check of the part it names, so
that a failure left to it is left to a check that runs."""

import pytest

from grader.checks.support import owners
from grader.parts import PARTS
from grader.scoring.plugin import check_names

NAMED = sorted({owner for value in vars(owners).values() if isinstance(value, tuple)
                for owner in value})  # fmt: skip


def test_the_module_names_owners() -> None:
    assert len(NAMED) >= 6, NAMED


@pytest.mark.parametrize("owner", NAMED)
def test_each_owner_is_a_check_of_its_part(owner: str) -> None:
    part, name = owner.split("/", 1)
    assert part in PARTS, f"{owner}: no part {part!r}"
    checks = set().union(*(check_names(module) for module in PARTS[part].checks))
    assert name in checks, f"{owner}: part {part} has no check {name!r}"
