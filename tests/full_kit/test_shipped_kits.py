"""The kits as they ship, set up and run as their users do, with nothing of this kit's own
environment or source tree on their path.

- The full kit: a `git clone` of this repository (the work tree's uncommitted changes laid over
  it, so that what is tested is what would be committed); `make candidate-kit`, `make grade` on
  the stubs and `make grade SUBMISSION=solutions`. Its `.venv` is a link to this kit's, which
  `make test` has just set up by the same Makefile from the same pins (a CI run of `make test`
  starts from a clean clone: that is the full kit's own set-up, tested); where this kit has none,
  the clone sets itself up.
- The candidate kit: built by that clone's `make candidate-kit`, unpacked into an empty folder,
  set up by its own Makefile; `make test` and `make grade` on the stubs, and on a finished
  submission (the answer key copied into `exercises/`), in a second unpacked copy that shares
  the first one's `.venv`. There `make test TESTS=tests/exercises` runs the tests of the contract
  the candidate's files keep: the kit's other tests are the grader's, which read `exercises/`
  only as a folder to grade or to name, or as the stubs' code (the contract's names, the
  similarity's base), where a finished submission only widens what they allow; the stubs' copy
  runs them all. A whole run of this kit's tests leaves them to it (`conftest.py`): a test checks
  that the candidate kit collects every one of them.

Every command runs as a user types it, in a shell environment without this test's Python
(`VIRTUAL_ENV`, `PYTHONPATH`, `GIT_*`, this kit's `.venv/bin` taken off `PATH`); pip's cache is
reused. Once the clone has built the candidate kit, its gradings run beside the candidate kit's
commands. A command that fails says which, in which kit, with the last lines of its output. Each
command's only time limit is a safety net, not a speed goal. A copy whose `.venv` is a link to a
set-up one (`link_venv`; the finished candidate copy's is the stubs' copy's) has its
`pyproject.toml` dated back to that set-up, so that its `make` sets nothing up again; it runs its
own grader from its own folder, as `python -m` does, and the editable install's metadata points
at the other copy, which holds the same files.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from full_kit.bundle import DEFAULT_OUT, TOP_FOLDER, kit_files
from grader import KIT_ROOT, provenance, seal_key, tarball
from grader.parts import PARTS, SUBMISSION_FILES
from tests.full_kit.conftest import LEFT, kits_testable
from tests.grading import NEEDS_CUDA, Graded

SAFETY_NET = 1800  # seconds for one command (a set-up on a loaded machine included)
LAST_LINES = 40
SUMMARY = "short test summary info"  # the heading of pytest's list of what did not pass
REPORT_FILES = ("report.json", "report.html", "report.md")
CANDIDATE, FINISHED = "candidate kit", "candidate kit, finished"  # the kits' names in messages
GRADE_KEY = ("grade", "SUBMISSION=solutions")
CONTRACT_TESTS = ("test", "TESTS=tests/exercises")  # the tests of the candidate's files
EXTRAS = {"grader.drive.cluster": "ray"}  # modules that need an optional extra: its package
OUTER = ("PYTEST_", "MAKE", "MFLAGS", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "GIT_")


@dataclass(frozen=True)
class Made:
    """A command run in a kit, and what it printed (stdout and stderr as one)."""

    kit: str
    command: str
    returncode: int
    output: str

    def assert_ok(self) -> "Made":
        """Passes when the command exited 0, else fails saying which, where, the tests it
        failed (pytest's summary lines, however long its output), and its end."""
        lines = self.output.splitlines()
        failed = failed_tests(lines)
        tail = "\n".join(lines[-LAST_LINES:])
        assert self.returncode == 0, (
            f"in the {self.kit}, `{self.command}` failed with exit status {self.returncode}; "
            + ("the tests it failed:\n" + "\n".join(failed) + "\n" if failed else "")
            + f"the last {LAST_LINES} lines of its output:\n{tail}"
        )
        return self


def failed_tests(lines: list[str]) -> list[str]:
    """The FAILED and ERROR lines of pytest's short summary in `lines`, at most `LAST_LINES`."""
    start = next((at for at, line in enumerate(lines) if SUMMARY in line), len(lines))
    failed = [line for line in lines[start:] if line.startswith(("FAILED ", "ERROR "))]
    more = len(failed) - LAST_LINES
    return failed[:LAST_LINES] + ([f"... and {more} more"] if more > 0 else [])


def users_environment() -> dict[str, str]:
    """This process's environment less what this test run put there: its Python, its make."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(OUTER)}
    path = [entry for entry in env.get("PATH", os.defpath).split(os.pathsep) if entry]
    env["PATH"] = os.pathsep.join(
        entry for entry in path if not Path(entry).resolve().is_relative_to(KIT_ROOT)
    )
    return env


def make(kit: str, root: Path, *args: str) -> Made:
    """`make ARGS` in `root`, as a user types it, in a session of its own: past the safety net
    everything it started is killed, and the step fails saying so."""
    command = " ".join(["make", *args])
    process = subprocess.Popen(
        ["make", "--no-print-directory", *args],
        cwd=root, env=users_environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace", start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=SAFETY_NET)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n(killed after {SAFETY_NET} s, the test's safety net)"
    return Made(kit, command, process.returncode, output)


def clone(target: Path) -> Path:
    """`target`: a clone of this repository, with the work tree's changes laid over it."""
    subprocess.run(["git", "clone", "--quiet", str(KIT_ROOT), str(target)], check=True)
    wanted = set(kit_files(KIT_ROOT))  # tracked or new, not ignored, not deleted
    for name in set(kit_files(target)) - wanted:
        (target / name).unlink()
    for name in wanted:
        source, copy = KIT_ROOT / name, target / name
        if not copy.is_file() or copy.read_bytes() != source.read_bytes():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy)
    return target


def unpack(archive: Path, place: Path) -> Path:
    """The candidate kit in `archive`, unpacked under `place`: its top folder."""
    tarball.unpack(archive.read_bytes(), place)
    return place / TOP_FOLDER


def report(root: Path, name: str) -> dict:
    """The report `make grade` wrote for the submission `name`, its three files checked."""
    folder = root / "reports" / name
    missing = [file for file in REPORT_FILES if not (folder / file).is_file()]
    assert not missing, f"{folder} lacks {missing}"
    return json.loads((folder / "report.json").read_text())


@contextlib.contextmanager
def empty_folder(prefix: str) -> Iterator[Path]:
    """A new empty folder, removed afterwards. Not under pytest's temp folder: the candidate
    kit's isolation tests check that no command line a worker can see names pytest."""
    place = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


@dataclass
class Shipped:
    """What each kit's commands did (by step: "full kit: make grade", ...), and where."""

    made: dict[str, Made]
    full: Path
    stubs: Path  # the candidate kit, its stubs untouched
    finished: Path  # the candidate kit, the answer key in its exercises/


def steps(kit: str, root: Path, *commands: tuple[str, ...]) -> dict[str, Made]:
    """Each of `commands` (make's arguments) run in `root` in turn, by step."""
    made = [make(kit, root, *command) for command in commands]
    return {f"{kit}: {done.command}": done for done in made}


@pytest.fixture(scope="module")
def shipped() -> Iterator[Shipped]:
    if not kits_testable():
        pytest.skip("the full kit is tested from a git clone: this kit is not a git repository")
    with empty_folder("full-kit-") as full_place, empty_folder("candidate-kit-") as place:
        full = clone(full_place / "kit")
        link_venv(full, KIT_ROOT / ".venv")
        made = steps("full kit", full, ("candidate-kit",))  # sets it up where not linked
        made["full kit: make candidate-kit"].assert_ok()
        stubs = unpack(full / DEFAULT_OUT, place / "stubs")
        finished = unpack(full / DEFAULT_OUT, place / "finished")
        for path in sorted((full / "solutions").glob("*.py")):
            shutil.copyfile(path, finished / "exercises" / path.name)
        with ThreadPoolExecutor(2) as pool:
            full_kit = pool.submit(steps, "full kit", full, ("grade",), GRADE_KEY)
            made |= steps(CANDIDATE, stubs, ("grade",))  # the first command sets it up
            link_venv(finished, stubs / ".venv")
            done = pool.submit(steps, FINISHED, finished, ("grade",), CONTRACT_TESTS)
            made |= steps(CANDIDATE, stubs, ("test",))
            made |= full_kit.result() | done.result()
        yield Shipped(made, full, stubs, finished)


def link_venv(copy: Path, venv: Path) -> None:
    """`copy`'s `.venv`: a link to `venv` where that is set up, with `copy`'s `pyproject.toml`
    dated back to the set-up, so that `copy`'s `make` sets nothing up again; else none."""
    installed = venv / ".installed"
    if installed.is_file():
        (copy / ".venv").symlink_to(venv, target_is_directory=True)
        when = installed.stat()
        os.utime(copy / "pyproject.toml", ns=(when.st_atime_ns, when.st_mtime_ns))


STEPS = [
    "full kit: make candidate-kit",
    "full kit: make grade",
    "full kit: make grade SUBMISSION=solutions",
    "candidate kit: make grade",
    pytest.param("candidate kit: make test", marks=pytest.mark.runs_the_shipped_tests),
    "candidate kit, finished: make grade",
    "candidate kit, finished: make test TESTS=tests/exercises",
]


@pytest.mark.parametrize("step", STEPS)
def test_each_command_of_each_kit_succeeds(shipped: Shipped, step: str) -> None:
    shipped.made[step].assert_ok()


def test_the_candidate_kit_collects_every_test_this_run_left_to_it(
    shipped: Shipped, pytestconfig: pytest.Config
) -> None:
    """The tests this session deselected for the candidate kit's `make test` (`conftest.py`; a
    whole run, all the shipped tests but those marked `both_kits`) are all among those it runs."""
    left = set(pytestconfig.stash[LEFT])
    assert not left - collected(shipped.stubs)


def collected(kit: Path) -> set[str]:
    """The ids of the tests that `kit`'s pytest, run as its `make test` runs it, selects."""
    listed = subprocess.run(
        [".venv/bin/python", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=kit, env=users_environment(), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, f"collecting in {kit} failed\n{listed.stdout[-3000:]}"
    return {line for line in listed.stdout.splitlines() if "::" in line}


def graded(made: Made, root: Path, name: str) -> Graded:
    """`make grade`'s run and the report it wrote for the submission `name`, its three files
    checked."""
    return Graded(made.returncode, made.output, "", report(root, name))


def skipped_for_want_of_cuda(check: dict) -> bool:
    return check["status"] == "skipped" and check["message"] == NEEDS_CUDA


def test_the_full_kit_gives_the_answer_key_full_marks(shipped: Shipped) -> None:
    """Without a CUDA device the kernel's GPU checks are skipped, and only they may be. Its only
    integrity flags say that each file matches the answer key."""
    made = shipped.made[f"full kit: make {' '.join(GRADE_KEY)}"]
    result = graded(made, shipped.full, "solutions")
    assert not result.report["errors"], result.report["errors"]
    assert "Traceback" not in made.output, made.output
    for part in PARTS:
        assert 0 < result.score(part) == result.max_score(part), result.describe(part)
        unexplained = [
            check["id"]
            for check in result.part(part)["checks"]
            if check["status"] != "passed" and not skipped_for_want_of_cuda(check)
        ]
        assert not unexplained, result.describe(part)
    assert result.report["score"] == result.report["max_score"] > 0
    flagged = {flag["file"]: flag["message"] for flag in result.report["integrity"]}
    assert flagged == dict.fromkeys(SUBMISSION_FILES, "matches the answer key: 100%"), flagged
    assert result.report["integration"]["status"] == "passed", result.report["integration"]
    assert result.report["environment"]["kit"] == "full"
    assert "simulation" in result.report
    key = seal_key.verifying_key(None)  # the session's own (tests/conftest.py), made by the grade
    assert provenance.problems(result.report, key) == []


def test_the_full_kit_gives_the_stubs_zero_and_says_not_implemented(shipped: Shipped) -> None:
    made = shipped.made["full kit: make grade"]
    result = graded(made, shipped.full, "exercises")
    assert not result.report["errors"], result.report["errors"]
    assert "Traceback" not in made.output, made.output
    assert result.report["score"] == 0 < result.report["max_score"], result.report["score"]
    checks = [check for part in PARTS for check in result.part(part)["checks"]]
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
    assert result.report["rescored"] == {}  # nothing implemented: nothing to grade again


def test_the_candidate_kit_grades_the_stubs_and_a_finished_submission(shipped: Shipped) -> None:
    stubs, finished = report(shipped.stubs, "exercises"), report(shipped.finished, "exercises")
    assert stubs["errors"] == finished["errors"] == []
    assert stubs["score"] == 0
    assert finished["score"] == finished["max_score"] > 0
    for graded in (stubs, finished):
        assert graded["environment"]["kit"] == "candidate"
        assert provenance.seal_state(graded) == "candidate"  # self-graded, unsealed
        assert list(graded["parts"]) == list(PARTS)
        assert "simulation" not in graded  # the full kit's simulator is not shipped
    grade = shipped.made["candidate kit: make grade"].output
    assert "Report: reports/exercises/report.html" in grade, grade


def test_a_check_is_worth_the_same_points_in_both_kits(shipped: Shipped) -> None:
    """The answer key graded by each kit: each check has the same points; the candidate kit's
    maximum leaves out what only the full kit grades, and says how much that is."""
    full = report(shipped.full, "solutions")
    candidate = report(shipped.finished, "exercises")
    for part_id in PARTS:
        parts = {"full": full["parts"][part_id], "candidate": candidate["parts"][part_id]}
        worth = {
            kit: {check["id"]: check["max_points"] for check in part["checks"]}
            for kit, part in parts.items()
        }
        assert worth["candidate"] == worth["full"], part_id
        whole = parts["full"]["max_score"] + parts["full"]["ungraded_points"]
        ours = parts["candidate"]["max_score"] + parts["candidate"]["ungraded_points"]
        assert ours == pytest.approx(whole, abs=0.02), part_id
    skipped = [
        check for check in candidate["parts"]["allocator"]["checks"] if check["status"] == "skipped"
    ]
    assert skipped, "the candidate kit graded the allocator's timings"
    assert all(check["message"].startswith("runs only in the full kit") for check in skipped)


def test_the_candidate_kits_readme_shows_the_line_its_grader_prints(shipped: Shipped) -> None:
    """The README's example of a part whose every check here passed is the line `make grade`
    prints for the answer key's allocator, word for word."""
    readme = (shipped.finished / "README.md").read_text(encoding="utf-8")
    example = next(line for line in readme.splitlines() if line.startswith("  allocator "))
    printed = shipped.made[f"{FINISHED}: make grade"].output
    assert example in printed.splitlines(), printed


def test_every_module_of_the_candidate_kit_imports_in_its_own_environment(
    shipped: Shipped,
) -> None:
    """A function may import the full kit's when it runs (`grade.simulation`, called only where
    `full_kit` is found); no module does when it is imported. A module of an optional extra
    (`EXTRAS`) imports where the extra is installed."""
    kit = shipped.stubs
    modules = sorted(
        ".".join(path.relative_to(kit).with_suffix("").parts).removesuffix(".__init__")
        for folder in ("grader", "kernels")
        for path in (kit / folder).rglob("*.py")
        if path.name != "__main__.py"
    )
    script = (
        f"import importlib, importlib.util\nfor name in {modules!r}:\n"
        f"    if importlib.util.find_spec({EXTRAS!r}.get(name, 'grader')):\n"
        "        importlib.import_module(name)\n"
        "print(importlib.import_module('grader').__file__, importlib.util.find_spec('full_kit'))"
    )
    imported = subprocess.run(
        [".venv/bin/python", "-c", script], cwd=kit, env=users_environment(),
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr[-3000:]
    grader_file, full_kit = imported.stdout.split()
    assert Path(grader_file).is_relative_to(kit), grader_file  # its own, not this kit's
    assert full_kit == "None"
