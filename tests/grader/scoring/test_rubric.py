"""A hiring team's rubric: the example in `rubric.py` is one, and a part or a check that does not
exist is refused with the ones that do (every id a real report gives may be weighed:
`tests/end_to_end/test_golden_reports.py`)."""

import re
from pathlib import Path

import pytest

from grader.parts import PARTS
from grader.scoring import rubric
from grader.scoring.rubric import load_rubric

WEIGHTS = "[weights]\n" + "".join(f"{part} = {part_.weight}\n" for part, part_ in PARTS.items())


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rubric.toml"
    path.write_text(text)
    return path


def docstring_example() -> str:
    """The TOML the module's docstring shows: its indented lines."""
    lines = rubric.__doc__.split("):\n", 1)[1].splitlines()
    example = []
    for line in lines:
        if line and not line.startswith("    "):
            break
        example.append(line.removeprefix("    "))
    return "\n".join(example) + "\n"


def test_the_docstrings_example_is_a_valid_rubric(tmp_path: Path) -> None:
    loaded = load_rubric(written(tmp_path, docstring_example()))
    assert loaded.weights == {part.id: float(part.weight) for part in PARTS.values()}
    assert loaded.points == {"allocator/freed_blocks_are_reused": 0}
    assert loaded.severity == {"safety": 2.0}


def test_an_unknown_severity_is_refused_with_the_severities(tmp_path: Path) -> None:
    path = written(tmp_path, WEIGHTS + "[severity]\nsafety = 2\ncorrectness = 3\n")
    says = "[severity] names 'correctness': the severities are safety, contract, speed"
    with pytest.raises(ValueError, match=re.escape(says)):
        load_rubric(path)


def test_a_negative_severity_factor_is_refused(tmp_path: Path) -> None:
    path = written(tmp_path, WEIGHTS + "[severity]\nspeed = -1\n")
    with pytest.raises(ValueError, match="speed = -1 must be a finite number >= 0"):
        load_rubric(path)


def test_an_unknown_check_is_refused_with_its_parts_checks(tmp_path: Path) -> None:
    path = written(tmp_path, WEIGHTS + '[points]\n"allocator/allocate_timing" = 0\n')
    with pytest.raises(ValueError, match="'allocator/allocate_timing': no such check") as refused:
        load_rubric(path)
    listed = str(refused.value).split("those of allocator: ", 1)[1]
    assert "freed_blocks_are_reused, new_pool_is_all_free" in listed
    assert "decode" not in listed  # the part's own checks, not every part's


def test_a_check_of_an_unknown_part_is_refused_with_the_parts(tmp_path: Path) -> None:
    path = written(tmp_path, WEIGHTS + '[points]\n"attention/scale" = 1\n"kernel/scale" = 1\n')
    says = f"'attention/scale': no part 'attention' (the parts: {', '.join(PARTS)})"
    with pytest.raises(ValueError, match=re.escape(says)):
        load_rubric(path)


def test_weights_of_an_unknown_part_are_refused(tmp_path: Path) -> None:
    path = written(tmp_path, WEIGHTS.replace("kernel =", "attention ="))
    with pytest.raises(ValueError, match=r"\(no part attention; kernel missing\)"):
        load_rubric(path)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        pytest.param(
            WEIGHTS + '[point]\n"allocator/scale" = 0\n', "'point' is not a table", id="typo"
        ),
        pytest.param("points = 3\n" + WEIGHTS, "'points' is not a table", id="points before"),
        pytest.param(WEIGHTS + "[points\n", "is not valid TOML", id="not TOML"),
    ],
)
def test_anything_but_the_two_tables_is_refused(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ValueError, match=f"rubric.toml.*{says}"):
        load_rubric(written(tmp_path, text))


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "true", '"10"'])
def test_a_weight_that_is_not_a_finite_number_is_refused(tmp_path: Path, value: str) -> None:
    path = written(tmp_path, WEIGHTS.replace("allocator = 15\n", f"allocator = {value}\n"))
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        load_rubric(path)
