"""The pytest plugin the grader runs its checks with: fixtures, points, outcomes, progress.

Checks are pytest functions named `check_*` in `grader/checks/<part>*.py`; each module marks its
part (`pytestmark = pytest.mark.part("allocator")`) and each check its points
(`@pytest.mark.points(3)`). Points are read at collection, so a check that never gets to run
still counts in the maximum score.

Fixtures: `submission` (the candidate's package in a fresh worker, one per check module),
`reference` (the kit's answer key in a worker of its own, for timing and for comparing traces;
the check is skipped where the answer key is not shipped), `profile`, `record_benchmark` (a
timing, for the report) and `record_section` (any other JSON data for the report).

A part built on other parts (its `swapped` files in `grader/parts.toml`) is scored apart from them:
its worker gets the answer key's modules for those parts in place of the candidate's, where the kit
ships the answer key, as bytecode without their source text (`sourceless`; bytecode can be
disassembled: the scan flags `marshal` and `dis`);
`part_notes` says which files each such part was scored with. A plugin made with `swapped` does
the same for every part it grades: `grade.run_checks` grades the parts built on the candidate's
allocator a second time that way when that allocator fails part 1, and keeps per part the better
grading (`rescored` records both).

A check fails when the submission made it fail: an assertion, an exception from its code, or a
`SubmissionFailure` (not submitted, not implemented, crashed, timed out). Any other exception is
the grader's own fault and shows as status "error".
"""

import ast
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis.internal.conjecture import engine as conjecture_engine

from grader.parts import PARTS
from grader.sandbox.isolation import Isolation
from grader.sandbox.process import Limits, Sandbox, SubmissionFailure, sourceless
from grader.sandbox.proxy import RemoteError, Submission
from grader.scoring.profiles import SHRINK_SECONDS, Profile, hypothesis_settings
from grader.scoring.timing import IMPLAUSIBLE_SPEEDUP

CHECKS_DIR = Path(__file__).resolve().parents[1] / "checks"


@dataclass
class CheckResult:
    """One check's verdict, as `report.json` lists it."""

    id: str
    part: str
    name: str
    status: str  # passed | failed | error | skipped
    points: float
    max_points: float
    message: str = ""
    counterexample: str = ""
    hypothesis: str = ""
    traceback: str = ""
    seconds: float = 0.0


@dataclass
class PartProgress:
    total: int = 0
    done: int = 0
    started: float = 0.0


@dataclass
class GradingPlugin:
    """Everything the checks need from the grader, and what they leave behind."""

    files: dict[str, bytes]
    package: str
    reference_files: dict[str, bytes] | None
    grading_profile: Profile
    seeded: bool
    limits: Limits
    worker_env: dict[str, dict[str, str]]  # by part
    isolation: Isolation | None = None  # None: bubblewrap where a sandbox can be made
    point_overrides: dict[str, float] = field(default_factory=dict)
    live: bool = False
    swapped: tuple[str, ...] = ()  # answer-key files in place of the candidate's, in every part
    quiet: bool = False  # no progress lines: a run whose results the report does not show
    results: dict[str, CheckResult] = field(default_factory=dict)
    events: dict[str, list[str]] = field(default_factory=dict)
    benchmarks: list[dict] = field(default_factory=list)
    sections: dict[str, dict] = field(default_factory=dict)
    part_notes: dict[str, str] = field(default_factory=dict)
    progress: dict[str, PartProgress] = field(default_factory=dict)
    part_of_node: dict[str, str] = field(default_factory=dict)
    deadlines: dict[str, float] = field(default_factory=dict)
    rescored: dict[str, dict] = field(default_factory=dict)  # by part: both gradings, the kept one
    errors: list[str] = field(default_factory=list)  # the grader's own failures, for the report

    # -- collection: every check's part and points ----------------------------------------------

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "part(id): the part a check module grades")
        config.addinivalue_line("markers", "points(n): what a check is worth within its part")
        hypothesis.settings.register_profile(
            "grader", hypothesis_settings(self.grading_profile, self.seeded)
        )
        hypothesis.settings.load_profile("grader")
        # Shrinking a failure through a worker is slow: bound it by work (`profiles.py`).
        conjecture_engine.MAX_SHRINKS = self.grading_profile.shrinks
        conjecture_engine.MAX_SHRINKING_SECONDS = SHRINK_SECONDS

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            part, name = item.get_closest_marker("part"), item.name.removeprefix("check_")
            points = item.get_closest_marker("points")
            if part is None or points is None:
                raise pytest.UsageError(f"{item.nodeid} lacks a part or points marker")
            check_id = f"{part.args[0]}/{name}"
            max_points = float(self.point_overrides.get(check_id, points.args[0]))
            item.stash[RESULT] = CheckResult(check_id, part.args[0], name, "error", 0, max_points)
            self.results[check_id] = item.stash[RESULT]
            self.progress.setdefault(part.args[0], PartProgress()).total += 1
            self.part_of_node[item.nodeid] = part.args[0]

    # -- fixtures -------------------------------------------------------------------------------

    @pytest.fixture(scope="module")
    def submission(self, request: pytest.FixtureRequest) -> Any:
        part = request.node.get_closest_marker("part").args[0]
        sandbox = self.sandbox_for(part, self.files_for(part))
        try:
            yield Submission(sandbox, self.package)
        finally:
            sandbox.close()
            self.events.setdefault(part, []).extend(sandbox.events)

    @pytest.fixture(scope="module")
    def reference(self, request: pytest.FixtureRequest) -> Any:
        if self.reference_files is None:
            pytest.skip("runs only in the full kit: the answer key it is compared with is absent")
        part = request.node.get_closest_marker("part").args[0]
        sandbox = self.sandbox_for(part, self.reference_files)
        try:
            yield Submission(sandbox, "solutions")
        finally:
            sandbox.close()

    def files_for(self, part: str) -> dict[str, bytes]:
        """The candidate's files, with those `part` builds on, and `swapped`, replaced by the
        answer key's (where the kit ships it)."""
        built_on = PARTS[part].swapped
        if built_on:
            names = " and ".join(built_on)
            self.part_notes[part] = (
                f"scored with your own {names}: the full kit swaps in its reference ones"
                if self.reference_files is None
                else f"scored with the kit's reference {names} in place of yours"
            )
        replaced = (*built_on, *self.swapped) if self.reference_files is not None else ()
        if not replaced:
            return self.files
        files = {name: content for name, content in self.files.items() if name not in replaced}
        return files | dict(sourceless(name, self.reference_files[name]) for name in replaced)

    def sandbox_for(self, part: str, files: dict[str, bytes]) -> Sandbox:
        """A worker for `part`; all of a part's workers share its wall-clock budget."""
        deadline = self.deadlines.setdefault(part, time.monotonic() + self.limits.part_seconds)
        return Sandbox(files, self.limits, self.worker_env[part], deadline, self.isolation)

    @pytest.fixture
    def profile(self) -> Profile:
        return self.grading_profile

    @pytest.fixture
    def record_benchmark(self, request: pytest.FixtureRequest) -> Any:
        """`record_benchmark(name, candidate_s, reference_s, ratio, limit)`, for the report."""
        part = request.node.get_closest_marker("part").args[0]

        def record(name: str, candidate: float, reference: float, ratio: float, limit: float):
            self.benchmarks.append({
                "name": name,
                "part": part,
                "candidate_seconds": candidate,
                "reference_seconds": reference,
                "ratio": round(ratio, 3),
                "limit": limit,
                "rounds": self.grading_profile.timing_rounds,
                "passed": ratio <= limit and ratio * IMPLAUSIBLE_SPEEDUP >= 1,
            })  # fmt: skip

        return record

    @pytest.fixture
    def record_section(self) -> Any:
        """`record_section(name, value)`: JSON-able data the report shows under `name`."""

        def record(name: str, value: dict) -> None:
            self.sections[name] = value

        return record

    @pytest.fixture(autouse=True)
    def fresh_check(self, request: pytest.FixtureRequest) -> None:
        """Before each check: a working worker and an empty transcript."""
        for name in ("submission", "reference"):
            if name in request.fixturenames:
                workers = request.getfixturevalue(name)
                workers.sandbox.next_check()
                workers.transcript.reset()

    # -- outcomes -------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        result = item.stash.get(RESULT, None)
        if result is None or (call.when != "call" and report.passed):
            return report
        result.seconds += call.duration
        if report.skipped:
            result.status, result.points = "skipped", 0
            result.message = skip_reason(report)
        elif report.passed:
            result.status, result.points = "passed", result.max_points
        elif result.status != "failed":  # a teardown error does not hide the call's failure
            submission = item.funcargs.get("submission")
            transcript = submission.transcript.render() if submission else ""
            error = call.excinfo.value
            failure = submission.sandbox.failure if submission else None
            if failure is not None and not isinstance(error, SubmissionFailure):
                error = failure  # hypothesis met it while shrinking, and reported a flaky test
            self.record_failure(result, error, transcript, call.excinfo)
        return report

    def record_failure(
        self, result: CheckResult, error: BaseException, transcript: str, excinfo: Any
    ) -> None:
        result.points = 0
        notes = "\n".join(
            note.strip() for note in getattr(error, "__notes__", ()) if not is_coverage(note)
        )
        if isinstance(error, SubmissionFailure):
            result.status, result.message = "failed", f"{error.label}: {error}"
        elif isinstance(error, AssertionError | RemoteError):
            result.status = "failed"
            if isinstance(error, RemoteError):
                result.message = f"unexpected exception from the submission: {error}"
                result.traceback = error.traceback
            else:
                result.message = first_lines(str(error)) or repr(error)
            if transcript:
                result.counterexample = f"{transcript}\n# fails: {result.message.splitlines()[0]}"
            result.hypothesis = notes
        else:
            result.status = "error"
            result.message = f"the grader failed in this check: {type(error).__name__}: {error}"
            result.traceback = str(excinfo.getrepr(style="short"))[-4000:]
            result.hypothesis = notes

    # -- progress -------------------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        part = self.progress[self.part_of_node[nodeid]]
        part.started = part.started or time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        part_id = self.part_of_node[nodeid]
        part = self.progress[part_id]
        part.done += 1
        if self.quiet:
            return
        seconds = time.monotonic() - part.started
        line = f"  {part_id:<10} {part.done:>3}/{part.total} checks  {seconds:6.1f} s"
        if self.live:
            end = "\n" if part.done == part.total else ""
            print(f"\r{line}", end=end, file=sys.stderr, flush=True)
        elif part.done == part.total:
            print(line, file=sys.stderr, flush=True)


RESULT = pytest.StashKey[CheckResult]()


def check_names(module: str) -> set[str]:
    """The check names (function names without `check_`) that `CHECKS_DIR/<module>` defines."""
    tree = ast.parse((CHECKS_DIR / f"{module}.py").read_text())
    return {
        node.name.removeprefix("check_")
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")
    }


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return longrepr[2].removeprefix("Skipped: ") if isinstance(longrepr, tuple) else str(longrepr)


def is_coverage(note: str) -> bool:
    """Hypothesis' explanation of which grader lines failing cases ran: no help to a candidate."""
    note = note.strip()
    return note.startswith(("Explanation", "These lines")) or bool(
        re.fullmatch(r"\S+\.py:\d+", note)
    )


def first_lines(text: str, count: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[:count])
