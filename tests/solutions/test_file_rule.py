"""The kit's own answers, stubs and correct alternatives keep the file rule."""

from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.file_rule import breaks

ALTERNATIVES = KIT_ROOT / "tests" / "submissions" / "alternatives"


@pytest.mark.parametrize(
    "path",
    [
        *sorted((KIT_ROOT / "solutions").glob("*.py")),
        *sorted((KIT_ROOT / "exercises").glob("*.py")),
        *sorted(ALTERNATIVES.glob("*/*.py")),
    ],
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_the_answer_key_the_stubs_and_the_alternatives_keep_the_rule(path: Path) -> None:
    """Each file as its submission holds it: beside the answer key's other files."""
    files = {answer.name: answer.read_bytes() for answer in (KIT_ROOT / "solutions").glob("*.py")}
    assert breaks(files | {path.name: path.read_bytes()}) == {}
