"""The answer key keeps the contract the stubs state (`tests/exercises/test_contract.py` checks
the stubs, or a candidate's finished files, against the same table)."""

import pytest

from tests.exercises.test_contract import CONTRACT, bare_signature, load, member_of


@pytest.mark.parametrize("module", CONTRACT)
def test_the_answer_key_keeps_the_contract(module: str) -> None:
    """The full kit's answer key has the same members with the same parameters."""
    import solutions

    key = load(solutions.__name__, module)
    for member, parameters in CONTRACT[module].items():
        assert bare_signature(member_of(key, member)) == parameters, member
