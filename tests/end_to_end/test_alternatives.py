"""Correct allocators unlike the answer key's get full marks: the grader checks the contract,
never one free-list policy. Each is a whole `block_allocator.py` from `submissions/alternatives/`,
graded with the answer key's `kv_cache_manager.py`, which builds on it (parts 1 and 6)."""

from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.grading import FIXTURES, Graded, build_submission, concurrently, grade
from tests.grading import selected_params as selected

ALTERNATIVES = sorted(path.name for path in (FIXTURES / "alternatives").iterdir() if path.is_dir())
PARTS = ("allocator", "sharing")


@pytest.fixture(scope="module")
def graded(request: pytest.FixtureRequest, tmp_path_factory) -> dict[str, Future[Graded]]:
    root: Path = tmp_path_factory.mktemp("alternatives")

    def job(name: str):
        allocator = FIXTURES / "alternatives" / name / "block_allocator.py"
        folder = build_submission(root / name, files={"block_allocator.py": allocator})
        return lambda: grade(folder, "--parts", ",".join(PARTS))

    return concurrently({name: job(name) for name in selected(request, "name")})


def test_the_alternatives_are_there() -> None:
    assert ALTERNATIVES == ["bitmap_cursor", "fifo_deque", "lifo_list", "lowest_id_heap"]


@pytest.mark.parametrize("name", ALTERNATIVES)
def test_a_correct_alternative_gets_full_marks(name: str, graded: dict[str, Future[Graded]]):
    result = graded[name].result()
    assert not result.report["errors"], result.report["errors"]
    for part in PARTS:
        assert 0 < result.score(part) == result.max_score(part), result.describe(part)
