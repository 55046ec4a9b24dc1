"""The grader on the kit's own folders: the answer key gets full marks, the stubs get zero.

This is `make grade SUBMISSION=solutions` and `make grade` (the stubs) on every part, run as the
command. Without a CUDA device the kernel's GPU checks are skipped, and only they may be.
"""

from concurrent.futures import Future

import pytest
import torch

from grader.parts import PARTS
from tests.grading import EXERCISES, NEEDS_CUDA, SOLUTIONS, Graded, concurrently, run_grader


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Future[Graded]]:
    """The answer key and the stubs, graded on every part, as `make grade` does."""
    root = tmp_path_factory.mktemp("answer_key")
    return concurrently({
        folder.name: lambda folder=folder: run_grader(folder, root / folder.name)
        for folder in (SOLUTIONS, EXERCISES)
    })  # fmt: skip


def graded_checks(result: Graded) -> list[dict]:
    return [check for part in PARTS for check in result.part(part)["checks"]]


def skipped_for_want_of_cuda(check: dict) -> bool:
    return (
        check["status"] == "skipped"
        and check["message"] == NEEDS_CUDA
        and not (torch.cuda.is_available())
    )


def assert_ran_cleanly(result: Graded) -> None:
    assert result.returncode == 0, result
    assert result.report, f"no report\n{result}"
    assert not result.report["errors"], result.report["errors"]
    assert "Traceback" not in result.stdout + result.stderr, result


def test_answer_key_gets_full_marks(graded: dict[str, Future[Graded]]) -> None:
    result = graded["solutions"].result()
    assert_ran_cleanly(result)
    for part in PARTS:
        assert 0 < result.score(part) == result.max_score(part), result.describe(part)
        unexplained = [
            check["id"]
            for check in result.part(part)["checks"]
            if check["status"] != "passed" and not skipped_for_want_of_cuda(check)
        ]
        assert not unexplained, result.describe(part)
    assert result.report["score"] == result.report["max_score"] > 0
    assert not result.report["integrity"], result.report["integrity"]
    assert result.report["integration"]["status"] == "passed", result.report["integration"]


def test_stubs_get_zero_and_say_not_implemented(graded: dict[str, Future[Graded]]) -> None:
    result = graded["exercises"].result()
    assert_ran_cleanly(result)
    assert result.report["score"] == 0 < result.report["max_score"], result.report["score"]
    checks = graded_checks(result)
    assert checks, "no checks ran"
    wrong = [
        f"{check['id']}: {check['status']} {check['message'][:100]}"
        for check in checks
        if not skipped_for_want_of_cuda(check)
        and (
            check["status"] != "failed"
            or not check["message"].startswith("not implemented")
            or check["traceback"]
        )
    ]
    assert not wrong, "checks that do not just say 'not implemented':\n" + "\n".join(wrong)
    integration = result.report["integration"]
    assert integration["status"] == "failed", integration
    assert integration["message"].startswith("not implemented"), integration
