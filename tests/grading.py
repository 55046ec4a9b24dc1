"""Helpers of the grader's end-to-end tests: build a submission, run the CLI, read its report.

A submission is built in a test's temp folder from a base (the answer key by default), with
whole files replaced and exact text edits applied; every edit's old text must occur exactly once,
so that a table of mutants cannot rot silently when the answer key changes. The grader runs as
the command a hiring team types (`python -m grader ...`, from the kit's root), with a timeout,
and the test reads the `report.json` it wrote: in a child forked from a grader that has done its
imports (`grader_server.py`), or, where the test changes the environment, as a fresh process.

A grading that several test modules read (a mutant whose verdicts test_buggy.py asserts and whose
counterexamples test_counterexamples.py runs) is graded once per test session, in whichever
module or xdist worker asks first (`grade_shared`).
"""

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from grader import KIT_ROOT
from grader.parts import PARTS
from tests.grader_server import CLI_TIMEOUT, GraderServer

SOLUTIONS = KIT_ROOT / "solutions"
EXERCISES = KIT_ROOT / "exercises"
FIXTURES = Path(__file__).resolve().parent / "submissions"
CHECKS_DIR = KIT_ROOT / "grader" / "checks"
GRADED_PARTS = tuple(part for part in PARTS if part != "kernel")  # the CPU-quick parts
# Added to a grading's options where its tests read verdicts and messages, not how small a
# counterexample is: no failure is shrunk (`--shrinks`: the same verdicts, found sooner).
VERDICTS_ONLY = ("--shrinks", "0")
CUT_SHORT = "time budget"  # in the message of a check cut short by --part-timeout
NEEDS_CUDA = "needs a CUDA device"  # the message of the kernel checks skipped without one
# A timing check's message where the worker's timed workload did other work than the one asked.
NOT_AS_ASKED = "the timed work was not done as asked"
CONCURRENT_GRADINGS = 2  # per test module: mostly one busy process each; make test runs a
# module per core (pytest-xdist), so a 2-core CI machine runs up to 4 gradings at a time

T = TypeVar("T")


@dataclass(frozen=True)
class Edit:
    """Replace `old`, which must occur exactly once in `file`, by `new`."""

    file: str
    old: str
    new: str


def apply_edit(text: str, edit: Edit) -> str:
    """`text` with `edit` applied; fails the test if the old text is not there exactly once."""
    count = text.count(edit.old)
    assert count == 1, f"{edit.file}: the old text occurs {count} times, not once:\n{edit.old}"
    return text.replace(edit.old, edit.new)


def submission_texts(
    base: Path = SOLUTIONS,
    files: Mapping[str, Path | str] | None = None,
    edits: Iterable[Edit] = (),
) -> dict[str, str]:
    """`base`'s modules by name, some replaced (by a file or by text), then edited."""
    texts = {path.name: path.read_text() for path in sorted(base.glob("*.py"))}
    for name, source in (files or {}).items():
        texts[name] = source.read_text() if isinstance(source, Path) else source
    for edit in edits:
        texts[edit.file] = apply_edit(texts[edit.file], edit)
    return texts


def build_submission(
    folder: Path,
    base: Path = SOLUTIONS,
    files: Mapping[str, Path | str] | None = None,
    edits: Iterable[Edit] = (),
) -> Path:
    """`folder` holding `base`'s modules, some replaced (by a file or by text), then edited."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in submission_texts(base, files, edits).items():
        (folder / name).write_text(text)
    return folder


@dataclass
class Graded:
    """One run of the grader's CLI: its exit status, its output and the report it wrote."""

    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any] = field(default_factory=dict)

    def part(self, part: str) -> dict[str, Any]:
        assert part in self.report.get("parts", {}), f"no part {part!r} in the report\n{self}"
        return self.report["parts"][part]

    def score(self, part: str) -> float:
        return self.part(part)["score"]

    def max_score(self, part: str) -> float:
        return self.part(part)["max_score"]

    def not_passed(self, part: str) -> list[str]:
        """Ids of the part's checks that did not pass."""
        return [check["id"] for check in self.part(part)["checks"] if check["status"] != "passed"]

    def caught(self, part: str) -> list[str]:
        """Ids of the part's checks that failed on their own, not cut short by --part-timeout."""
        return [
            check["id"]
            for check in self.part(part)["checks"]
            if check["status"] == "failed" and CUT_SHORT not in check["message"]
        ]

    def assert_clean(self) -> None:
        """The grader wrote its own report, with no error and no check it could not run."""
        assert not self.report["errors"], self.report["errors"]
        errored = [
            check["id"]
            for part in self.report["parts"].values()
            for check in part["checks"]
            if check["status"] == "error"
        ]
        assert not errored, f"checks the grader could not run: {errored}\n{self}"

    def describe(self, part: str) -> str:
        """The part's score and each check's status and message, for an assertion message."""
        lines = [f"{part}: {self.score(part)} / {self.max_score(part)}"]
        for check in self.part(part)["checks"]:
            message = check["message"].splitlines()[0] if check["message"] else ""
            lines.append(f"  {check['id']}: {check['status']} {message}"[:200])
        return "\n".join(lines)

    def __str__(self) -> str:
        return (
            f"exit status {self.returncode}\nstdout:\n{self.stdout[-3000:]}\n"
            f"stderr:\n{self.stderr[-3000:]}\nerrors: {self.report.get('errors')}"
        )


def run_grader(
    submission: Path,
    out: Path,
    *options: str,
    env: Mapping[str, str] | None = None,
    guarded: bool = True,
) -> Graded:
    """`python -m grader SUBMISSION --out OUT OPTIONS...`, run from the kit's root; with `env`
    (added to the environment) as a fresh process, since modules read the environment when they
    are imported; without, in a child forked from a grader that has done its imports
    (`GraderServer`). Not `guarded`: with the file rule off (`tests/unguarded.py`), for a test
    of what stops a file when it runs."""
    argv = [str(submission), "--out", str(out), *options]
    if env is None:
        returncode, stdout, stderr = GraderServer.shared().run(argv, guarded)
    else:
        returncode, stdout, stderr = run_fresh(argv, env, guarded)
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return Graded(returncode, stdout, stderr, report)


def run_fresh(
    argv: Sequence[str], env: Mapping[str, str], guarded: bool = True
) -> tuple[int, str, str]:
    """`python -m grader ARGV` as a new process, `env` added to the environment: its exit
    status, stdout and stderr (`python -m tests.unguarded ARGV`, not `guarded`)."""
    done = subprocess.run(
        [sys.executable, "-m", "grader" if guarded else "tests.unguarded", *argv],
        cwd=KIT_ROOT,
        env=os.environ | dict(env),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def grade(
    submission: Path,
    *options: str,
    out: Path | None = None,
    env: Mapping[str, str] | None = None,
    guarded: bool = True,
) -> Graded:
    """Grade `submission` (the report goes to `out`, else beside it); fails if none was written.
    Not `guarded`: with the file rule off (`run_grader`)."""
    out = out or submission.parent / f"{submission.name}-report"
    graded = run_grader(submission, out, *options, env=env, guarded=guarded)
    assert graded.returncode == 0, f"the grader failed\n{graded}"
    assert graded.report, f"the grader wrote no report\n{graded}"
    return graded


def grade_shared(
    shared: Path,
    name: str,
    options: Sequence[str],
    files: Mapping[str, Path | str] | None = None,
    edits: Iterable[Edit] = (),
) -> Graded:
    """The answer key with `files` and `edits`, in a folder `name`, graded with `options` once
    per `shared` folder (the `shared_gradings` fixture: one per test session, every xdist
    worker's): the first caller grades it while holding its lock, every later one, in any
    process, reads what that grading left. The same inputs make the same key. A grading that
    fails leaves nothing: the next caller grades again, and fails the same way."""
    inputs = [name, submission_texts(SOLUTIONS, files, edits), list(options)]
    key = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:16]
    saved = shared / key / "graded.json"
    with (shared / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its process dies
        if saved.is_file():
            return Graded(**json.loads(saved.read_text()))
        graded = grade(build_submission(shared / key / name, files=files, edits=edits), *options)
        saved.write_text(json.dumps(asdict(graded)))
        return graded


def mutant_options(options: Sequence[str], replayed: bool) -> tuple[str, ...]:
    """A mutant's grading options: `options`, and `VERDICTS_ONLY` unless test_counterexamples.py
    runs its counterexamples (`replayed`), which are then shrunk as a candidate's are."""
    return tuple(options) if replayed else (*options, *VERDICTS_ONLY)


def concurrently(jobs: Mapping[str, Callable[[], T]]) -> dict[str, Future[T]]:
    """Every job run, a few at a time; each done future holds a result or the job's exception."""
    with ThreadPoolExecutor(CONCURRENT_GRADINGS) as pool:
        return {name: pool.submit(job) for name, job in jobs.items()}


def module_items(request: pytest.FixtureRequest) -> list[pytest.Item]:
    """The tests of the requesting module that this session runs (after `-k`, `-m`...)."""
    return [item for item in request.session.items if item.module is request.module]


def selected_params(request: pytest.FixtureRequest, argname: str) -> list[Any]:
    """The values of `argname` in the requesting module's tests that this session runs."""
    values = {}
    for item in module_items(request):
        callspec = getattr(item, "callspec", None)
        if callspec and argname in callspec.params:
            values[callspec.id] = callspec.params[argname]
    return list(values.values())


def without_times(report: dict[str, Any]) -> dict[str, Any]:
    """`report` without what a rerun may change: times, the measured benchmark figures, and the
    seal over them all."""
    kept = {key: value for key, value in report.items() if key not in ("seconds", "started_at")}
    made = report["provenance"]
    kept["provenance"] = {key: value for key, value in made.items() if key != "seal"}
    kept["parts"] = {
        part_id: {
            **{key: value for key, value in part.items() if key != "seconds"},
            "checks": [
                {key: value for key, value in check.items() if key != "seconds"}
                for check in part["checks"]
            ],
        }
        for part_id, part in report["parts"].items()
    }
    kept["benchmarks"] = [
        {key: value for key, value in benchmark.items() if not key.endswith(("seconds", "ratio"))}
        for benchmark in report["benchmarks"]
    ]
    return kept
