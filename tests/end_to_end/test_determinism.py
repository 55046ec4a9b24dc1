"""The grade is a function of the submission and the seed: rerunning gives the same report, and
a private seed (`--seed N`, fresh hidden examples) still gives the answer key full marks (its
golden report's grading, at seed 7) and still finds a bug that only a random example reaches."""

from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.end_to_end.test_golden_reports import grade_case
from tests.grading import (
    GRADED_PARTS,
    Edit,
    Graded,
    build_submission,
    concurrently,
    grade,
    without_times,
)

# test_buggy's free_accepts_a_negative_id_which_wraps: a negative id that wraps to the last
# block is found only by the random allocate/free sequences, so only a seed's examples find it.
WRAPPING_IDS = Edit(
    "block_allocator.py",
    "if not 0 <= block_id < self.num_blocks:",
    "if block_id >= self.num_blocks:",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, shared_gradings: Path) -> dict[str, Future[Graded]]:
    root: Path = tmp_path_factory.mktemp("determinism")
    buggy = build_submission(root / "buggy", edits=[WRAPPING_IDS])
    seeded = ("--parts", "allocator", "--seed", "7")
    return concurrently({
        "first": lambda: grade(buggy, *seeded),
        "again": lambda: grade(buggy, *seeded, out=root / "again"),
        "answer key": lambda: grade_case("answer_key", shared_gradings),
    })  # fmt: skip


def test_same_submission_and_seed_give_the_same_report(graded: dict[str, Future[Graded]]):
    first, again = graded["first"].result(), graded["again"].result()
    assert first.report["environment"]["seed"] == 7
    assert without_times(first.report) == without_times(again.report)


def test_a_private_seed_still_finds_the_bug(graded: dict[str, Future[Graded]]) -> None:
    result = graded["first"].result()
    assert result.score("allocator") < result.max_score("allocator"), result.describe("allocator")


def test_a_private_seed_gives_the_answer_key_full_marks(graded: dict[str, Future[Graded]]):
    result = graded["answer key"].result()
    assert result.report["environment"]["seed"] == 7
    assert not result.report["errors"], result.report["errors"]
    for part in GRADED_PARTS:
        assert 0 < result.score(part) == result.max_score(part), result.describe(part)
