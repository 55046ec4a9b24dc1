"""The command line: what it refuses (exit 2, a message, no traceback), archives graded like
the folder they hold, and `--parts` limiting the report."""

import io
import tarfile
import zipfile
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.grading import SOLUTIONS, Graded, concurrently, grade, run_grader

PARTS = ("--parts", "allocator")


def zip_of(folder: Path, archive: Path) -> Path:
    """A .zip holding `folder` itself (one top folder, as most zip tools make it)."""
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.glob("*.py")):
            bundle.write(path, f"{folder.name}/{path.name}")
    return archive


def tar_of(folder: Path, archive: Path) -> Path:
    """A .tar.gz holding `folder`'s files at its top."""
    with tarfile.open(archive, "w:gz") as bundle:
        for path in sorted(folder.glob("*.py")):
            bundle.add(path, path.name)
    return archive


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, Future[Graded]]:
    """The answer key as a folder, a .zip and a .tar.gz, graded on part 1 alone."""
    root: Path = tmp_path_factory.mktemp("cli")
    submissions = {
        "folder": SOLUTIONS,
        "zip": zip_of(SOLUTIONS, root / "solutions.zip"),
        "tar.gz": tar_of(SOLUTIONS, root / "solutions.tar.gz"),
    }
    return concurrently({
        kind: lambda kind=kind, path=path: grade(path, *PARTS, out=root / f"{kind}-report")
        for kind, path in submissions.items()
    })  # fmt: skip


def assert_refused(result: Graded, reason: str) -> None:
    """Exit status 2, a one-line reason on stderr, no traceback and no report."""
    assert result.returncode == 2, result
    assert reason in result.stderr, result
    assert "Traceback" not in result.stdout + result.stderr, result
    assert not result.report, result.report


def test_a_text_file_is_refused(tmp_path: Path) -> None:
    notes = tmp_path / "submission.txt"
    notes.write_text("def allocate(n): ...\n")
    result = run_grader(notes, tmp_path / "report")
    assert_refused(result, "is not a folder, a .zip or a .tar.gz")


def test_a_tar_escaping_its_folder_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "escape.tar.gz"
    with tarfile.open(archive, "w:gz") as bundle:
        for name in ("block_allocator.py", "../x"):
            data = (SOLUTIONS / "block_allocator.py").read_bytes()
            entry = tarfile.TarInfo(name)
            entry.size = len(data)
            bundle.addfile(entry, io.BytesIO(data))
    result = run_grader(archive, tmp_path / "report")
    assert_refused(result, "unsafe path '../x'")
    assert not (tmp_path / "x").exists()


def test_an_unknown_part_is_refused(tmp_path: Path) -> None:
    result = run_grader(SOLUTIONS, tmp_path / "report", "--parts", "allocator,attention")
    assert_refused(result, "unknown part attention")


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_an_archive_grades_like_its_folder(kind: str, graded: dict[str, Future[Graded]]) -> None:
    folder, archive = graded["folder"].result(), graded[kind].result()
    assert archive.report["submission"]["files"] == folder.report["submission"]["files"]
    assert archive.describe("allocator") == folder.describe("allocator")
    assert 0 < archive.score("allocator") == archive.max_score("allocator")


def test_parts_limits_the_report_to_those_parts(graded: dict[str, Future[Graded]]) -> None:
    report = graded["folder"].result().report
    assert list(report["parts"]) == ["allocator"]
    assert report["parts"]["allocator"]["checks"], report["parts"]
    assert report["max_score"] == report["parts"]["allocator"]["max_score"]
