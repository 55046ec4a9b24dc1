"""The grader on the kit's own folders: the answer key gets full marks, the stubs get zero.

This is `make grade SUBMISSION=solutions` and `make grade` (the stubs) on the parts the kit grades
(allocator, decode, gather, sharing), run as the command.
"""

from concurrent.futures import Future

import pytest

from tests.grading import EXERCISES, GRADED_PARTS, SOLUTIONS, Graded, concurrently, run_grader


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Future[Graded]]:
    """The answer key and the stubs, graded on every part the kit grades."""
    root = tmp_path_factory.mktemp("answer_key")
    parts = ("--parts", ",".join(GRADED_PARTS))
    return concurrently({
        folder.name: lambda folder=folder: run_grader(folder, root / folder.name, *parts)
        for folder in (SOLUTIONS, EXERCISES)
    })  # fmt: skip


def graded_checks(result: Graded) -> list[dict]:
    return [check for part in GRADED_PARTS for check in result.part(part)["checks"]]


def assert_ran_cleanly(result: Graded) -> None:
    assert result.returncode == 0, result
    assert result.report, f"no report\n{result}"
    assert not result.report["errors"], result.report["errors"]
    assert "Traceback" not in result.stdout + result.stderr, result


def test_answer_key_gets_full_marks(graded: dict[str, Future[Graded]]) -> None:
    result = graded["solutions"].result()
    assert_ran_cleanly(result)
    for part in GRADED_PARTS:
        assert 0 < result.score(part) == result.max_score(part), result.describe(part)
        assert not result.not_passed(part), result.describe(part)
    assert result.report["score"] == result.report["max_score"] > 0
    assert not result.report["integrity"], result.report["integrity"]


def test_stubs_get_zero_and_say_not_implemented(graded: dict[str, Future[Graded]]) -> None:
    result = graded["exercises"].result()
    assert_ran_cleanly(result)
    assert result.report["score"] == 0 < result.report["max_score"], result.report["score"]
    checks = graded_checks(result)
    assert checks, "no checks ran"
    wrong = [
        f"{check['id']}: {check['status']} {check['message'][:100]}"
        for check in checks
        if check["status"] != "failed"
        or not check["message"].startswith("not implemented")
        or check["traceback"]
    ]
    assert not wrong, "checks that do not just say 'not implemented':\n" + "\n".join(wrong)
