"""A local drive lends its zygotes to its gradings only where each grading would start the same
ones as it begins (`local.lent_zygotes`): a drive of some parts, or of unsandboxed workers,
starts none (its gradings start what they need, when they need it)."""

from argparse import Namespace

import pytest

from grader.drive import local
from grader.parts import PARTS


@pytest.mark.parametrize(
    ("isolation", "parts"),
    [("none", None), ("bwrap", ("allocator",)), ("bwrap", tuple(PARTS)[:-1])],
)
def test_a_drive_of_some_parts_or_unsandboxed_lends_no_zygote(isolation, parts, monkeypatch):
    monkeypatch.setattr(local, "Zygotes", None)  # any start would fail
    assert local.lent_zygotes(Namespace(isolation=isolation, parts=parts)) is None
