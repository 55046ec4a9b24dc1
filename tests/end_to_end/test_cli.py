"""The command line: what it refuses (exit 2, a message, no traceback), archives graded like
the folder they hold, wherever in them it lies, `--parts` limiting the report, and each report
saying which input it came from and never written over another input's."""

import io
import re
import shutil
import tarfile
import zipfile
from concurrent.futures import Future
from pathlib import Path

import pytest

from grader.parts import PARTS as KIT_PARTS
from grader.report.i18n import tr
from tests.end_to_end.test_golden_reports import stable
from tests.grading import KIT_ROOT, SOLUTIONS, Graded, concurrently, grade, run_grader

PARTS = ("--parts", "allocator")


def zip_of(folder: Path, archive: Path, inside: str | None = None) -> Path:
    """A .zip holding `folder`'s files in `inside/` (by default `folder` itself: one top folder,
    as most zip tools make it)."""
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.glob("*.py")):
            bundle.write(path, f"{inside or folder.name}/{path.name}")
        if inside:
            bundle.writestr(f"{inside.partition('/')[0]}/README.md", "# my notes\n")
    return archive


def tar_of(folder: Path, archive: Path) -> Path:
    """A .tar.gz holding `folder`'s files at its top."""
    with tarfile.open(archive, "w:gz") as bundle:
        for path in sorted(folder.glob("*.py")):
            bundle.add(path, path.name)
    return archive


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def graded(root: Path) -> dict[str, Future[Graded]]:
    """The answer key as a folder, a .zip, a .tar.gz and a .zip holding it deeper, graded on
    part 1 alone, each into `root/<kind>-report`."""
    submissions = {
        "folder": SOLUTIONS,
        "zip": zip_of(SOLUTIONS, root / "solutions.zip"),
        "tar.gz": tar_of(SOLUTIONS, root / "solutions.tar.gz"),
        "nested zip": zip_of(SOLUTIONS, root / "nested.zip", "submission/exercises"),
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


@pytest.mark.parametrize("kind", ["zip", "tar.gz", "nested zip"])
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


def test_the_one_folder_of_the_files_is_found_deeper(
    graded: dict[str, Future[Graded]], root: Path
) -> None:
    nested = graded["nested zip"].result()
    said = tr("en", "grading_folder", folder="submission/exercises")
    assert said in nested.stderr, nested
    assert nested.report["ignored_files"] == ["submission/README.md"]  # not __init__.py
    assert nested.report["submission"]["folder"] == "submission/exercises"
    path = str((root / "nested.zip").resolve())
    shown = tr("en", "graded_from_folder", path=path, folder="submission/exercises/")
    assert shown in nested.stdout  # the summary
    assert shown in (root / "nested zip-report" / "report.html").read_text()


def two_folders(tmp_path: Path) -> Path:
    for version in ("v1", "v2"):
        shutil.copytree(SOLUTIONS, tmp_path / "work" / version)
    return tmp_path / "work"


NOT_GRADED = [
    pytest.param(
        lambda tmp_path: tmp_path,
        "no block_allocator.py, kv_cache_manager.py, paged_attention.py, scheduler.py, "
        "prefix_cache.py anywhere in",
        id="empty",
    ),
    pytest.param(
        two_folders, "found submission files in 2 folders of {tmp}/work (v1/, v2/)", id="two"
    ),
    pytest.param(
        lambda tmp_path: KIT_ROOT,
        f"{KIT_ROOT} is the kit's own folder: grade {KIT_ROOT / 'exercises'} (make grade does)",
        id="the kit",
    ),
]


@pytest.mark.parametrize(("make", "says"), NOT_GRADED)
def test_not_one_folder_of_files_is_refused_at_once(make, says: str, tmp_path: Path) -> None:
    submission = make(tmp_path)
    result = run_grader(submission, tmp_path / "report")
    assert_refused(result, says.format(tmp=tmp_path))


def test_a_rubric_naming_an_unknown_check_is_refused(tmp_path: Path) -> None:
    rubric = tmp_path / "rubric.toml"
    rubric.write_text("[weights]\n" + "".join(f"{p} = 10\n" for p in KIT_PARTS) + "[points]\n"
                      '"allocator/allocate_timing" = 0\n')  # fmt: skip
    result = run_grader(SOLUTIONS, tmp_path / "report", *PARTS, "--rubric", str(rubric))
    assert_refused(result, "'allocator/allocate_timing': no such check (those of allocator: ")


def test_a_rubric_weighs_each_severitys_points(tmp_path: Path) -> None:
    """`[severity]` multiplies the points of each check of that severity within its part, and a
    check given in `[points]` keeps exactly those: in part 3, a 2-point safety check is worth four
    times the 1-point contract one, and of the timings only the one given points counts."""
    rubric = tmp_path / "rubric.toml"
    weights = "".join(f"{part.id} = {part.weight}\n" for part in KIT_PARTS.values())
    rubric.write_text(f"[weights]\n{weights}[points]\n\"gather/gather_speed\" = 1\n"
                      "[severity]\nsafety = 2\nspeed = 0\n")  # fmt: skip
    result = grade(SOLUTIONS, "--parts", "gather", "--rubric", str(rubric), out=tmp_path / "out")
    worth = {check["name"]: check["max_points"] for check in result.part("gather")["checks"]}
    safety, contract = worth["gather_stops_at_seq_len"], worth["gather_of_an_empty_request"]
    assert safety == pytest.approx(4 * contract, abs=0.02), worth
    assert worth["slot_mapping_speed"] == 0 < worth["gather_speed"] == pytest.approx(contract), (
        worth
    )
    assert result.score("gather") == result.max_score("gather") == 15


def test_every_report_says_which_input_it_came_from(
    graded: dict[str, Future[Graded]], root: Path
) -> None:
    folder = graded["folder"].result()
    path = str(SOLUTIONS.resolve())
    assert folder.report["submission"]["path"] == path
    assert tr("en", "graded_from", path=path) in folder.stdout  # the summary
    assert f"Graded from `{path}`" in (root / "folder-report" / "report.md").read_text()
    assert f"Graded from {path}" in (root / "folder-report" / "report.html").read_text()


def test_a_report_of_another_input_is_never_overwritten(
    graded: dict[str, Future[Graded]], root: Path, tmp_path: Path
) -> None:
    graded["folder"].result()
    out = root / "folder-report"
    written = {path.name: path.read_bytes() for path in out.iterdir()}
    other = shutil.copytree(SOLUTIONS, tmp_path / "solutions")
    result = run_grader(other, out, *PARTS)
    assert result.returncode == 2, result
    says = f"holds the report of another input, {SOLUTIONS.resolve()}, not of {other}: pass --out"
    assert re.search(re.escape(says), result.stderr), result
    assert {path.name: path.read_bytes() for path in out.iterdir()} == written


def test_the_grade_does_not_depend_on_pytest_settings_in_the_environment(tmp_path: Path) -> None:
    """A shell's PYTEST_ADDOPTS, a test runner's PYTEST_XDIST_WORKER (pytest-benchmark then
    skips its timings): the grader's checks see none of them."""
    outer = {"PYTEST_ADDOPTS": "--collect-only -x", "PYTEST_XDIST_WORKER": "gw0"}
    result = grade(SOLUTIONS, *PARTS, out=tmp_path / "report", env=outer)
    result.assert_clean()
    assert result.score("allocator") == result.max_score("allocator") == 15, result


@pytest.mark.parametrize("case", ["graded", "refused"])
def test_a_forked_grading_gives_what_a_fresh_python_m_grader_gives(case: str, tmp_path: Path):
    """These tests' gradings run forked from a grader that has done its imports
    (`tests/grader_server.py`); a fresh `python -m grader` gives the same exit status, output
    and report, times, the progress ticks of a slow check and report folders aside."""
    submission = SOLUTIONS if case == "graded" else tmp_path / "missing"
    forked = run_grader(submission, tmp_path / "out", *PARTS, "--seed", "7")
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    fresh = run_grader(submission, tmp_path / "out", *PARTS, "--seed", "7", env={})

    def shown(text: str) -> str:  # times aside, and the ticks a slow check prints as it runs
        ticks = re.sub(r"^.* \d+/\d+ checks: .* running .*\n", "", text, flags=re.MULTILINE)
        return re.sub(r"\d+(\.\d+)? s\b", "N s", ticks)

    assert forked.returncode == fresh.returncode == (0 if case == "graded" else 2), fresh
    assert shown(forked.stdout) == shown(fresh.stdout)
    assert shown(forked.stderr) == shown(fresh.stderr)
    if case == "graded":
        assert stable(forked.report) == stable(fresh.report)
    else:
        assert forked.report == fresh.report == {}
