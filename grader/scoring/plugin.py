"""The pytest plugin the grader runs its checks with: collection, points and outcomes.

Checks are pytest functions named `check_*` in `grader/checks/<part>*.py`; each module marks its
part (`pytestmark = pytest.mark.part("allocator")`), a part whose `checks` in `grader/parts.toml`
name that module, and each check its points (`@pytest.mark.points(3)`) and the severity of its
failure (`@pytest.mark.severity("safety")`, `grader/severity.py`). Both are read at collection,
so a check that never gets to run still counts in the maximum score; a rubric may weigh a
severity's points.

`GradingPlugin` is one plugin made of three concerns: this module's (collection, points,
outcomes as `CheckResult`s), the fixtures and the workers behind them (`fixtures.py`), and the
progress lines (`progress.py`). `grade.run_checks` grades the parts built on the candidate's
allocator that lost points a second time, with a plugin made with `swapped`, when that allocator
fails part 1, and keeps per part the better grading (`rescored` records both).

A check fails when the submission made it fail: an assertion, an exception from its code, or a
`SubmissionFailure` (not submitted, not implemented, crashed, timed out). Any other exception is
the grader's own fault and shows as status "error".
"""

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from string import Formatter
from typing import Any

import hypothesis
import hypothesis.core
import pytest
from hypothesis.internal.conjecture import providers

from grader.checks.support.expect import RuleBroken
from grader.parts import PARTS
from grader.said import Said, message_of, said
from grader.sandbox.process import SubmissionFailure, described
from grader.sandbox.proxy import RemoteError
from grader.sandbox.transcript import Transcript
from grader.scoring import shrinking
from grader.scoring.fixtures import WorkerFixtures, check_id, check_name
from grader.scoring.profiles import hypothesis_settings
from grader.scoring.progress import ProgressLines
from grader.scoring.raised import raised_at, remote_error_of
from grader.scoring.timing import ResultsDiffer
from grader.severity import SEVERITIES

NO_LOCAL_CONSTANTS = providers.Constants()  # `pytest_configure`

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
    severity: str  # one of `SEVERITIES`, from the check's marker
    message: str = ""
    counterexample: str = ""
    hypothesis: str = ""
    traceback: str = ""
    seconds: float = 0.0
    # Where in the candidate's files its exception behind the failure was raised (`raised.py`):
    # `{"file", "line"}`, checked, with the line's `function` and `code`, by `raised.code_marks`.
    raised_at: dict = field(default_factory=dict)
    # The rule of its own part whose break caused the failure (`rules.py`), set by
    # `grade.name_causes` (and `grade.not_timed`): its diagnosis, question and severity are the
    # rule's.
    cause: str = ""
    # The rules a failure may have broken, where checks of several parts meet them (`rules.py`),
    # which `grade.leave_to_the_owners` reads. Not in the report.
    rules: tuple[str, ...] = ()
    # How a timed workload's results, the candidate's own, differ from the contract
    # (`timing.ResultsDiffer`), which `grade.not_timed` reads. Not in the report.
    results_differ: str = ""


@dataclass(kw_only=True)
class GradingPlugin(WorkerFixtures, ProgressLines):
    """Everything the checks need from the grader, and what they leave behind: every collected
    check has a `CheckResult` in `results`, "error" until its outcome says otherwise."""

    seeded: bool  # a fixed hypothesis seed: the grading's examples are reproducible
    point_overrides: dict[str, float] = field(default_factory=dict)  # by check id (the rubric)
    severity_factors: dict[str, float] = field(default_factory=dict)  # by severity (the rubric)
    results: dict[str, CheckResult] = field(default_factory=dict)  # by check id
    rescored: dict[str, dict] = field(default_factory=dict)  # by part: both gradings, the kept one
    errors: list[str] = field(default_factory=list)  # the grader's own failures, for the report

    # -- collection: every check's part and points ----------------------------------------------

    def pytest_configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", "part(id): the part a check module grades")
        config.addinivalue_line("markers", "points(n): what a check is worth within its part")
        config.addinivalue_line("markers", "severity(kind): what a check's failure means")
        hypothesis.settings.register_profile(
            "grader", hypothesis_settings(self.grading_profile, self.seeded)
        )
        hypothesis.settings.load_profile("grader")
        shrinking.bound(self.grading_profile)  # by work, through a worker (`shrinking.py`)
        # Hypothesis traces every line the grader runs once a property fails, only to print which
        # lines failing cases ran (`is_coverage`: dropped); under Python 3.11's settrace that is
        # most of a failing check's time. Its examples and its shrinking do not depend on it, and
        # it supports turning it off this way (the note on `_should_trace` in hypothesis/core.py).
        hypothesis.core.StateForActualGivenExecution._should_trace = lambda _: False
        # Hypothesis also draws, now and then, a literal constant of any "local" module loaded in
        # this process: the grader's own, except where the kit is installed in site-packages.
        # The examples would then change with any edit of the grader, and with how the kit is
        # installed. Examples come from the profile and the seed alone: no local constant.
        providers._get_local_constants = lambda: NO_LOCAL_CONSTANTS
        providers.CONSTANTS_CACHE.cache.clear()  # any pool drawn before, local constants and all

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            name = check_name(item)
            part, points, severity = (item.get_closest_marker(marker)
                                      for marker in ("part", "points", "severity"))  # fmt: skip
            if part is None or points is None or severity is None:
                raise pytest.UsageError(f"{item.nodeid} lacks a part, points or severity marker")
            part_id, module, kind = part.args[0], item.path.stem, severity.args[0]
            if part_id not in PARTS or module not in PARTS[part_id].checks:
                raise pytest.UsageError(f"{module}.py is not a check module of part {part_id!r}")
            if kind not in SEVERITIES:
                raise pytest.UsageError(f"{item.nodeid}: severity {kind!r} is none of {SEVERITIES}")
            key = check_id(item)
            weighed = points.args[0] * self.severity_factors.get(kind, 1.0)
            max_points = float(self.point_overrides.get(key, weighed))
            item.stash[RESULT] = CheckResult(key, part_id, name, "error", 0, max_points, kind)
            self.results[key] = item.stash[RESULT]
            self.expect(item.nodeid, item.stash[RESULT])

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
            result.message = skip_reason(report, call)
        elif report.passed:
            result.status, result.points = "passed", result.max_points
        elif result.status != "failed":  # a teardown error does not hide the call's failure
            submission = item.funcargs.get("submission")
            transcript = submission.transcript if submission else None
            error = call.excinfo.value
            failure = submission.sandbox.failure if submission else None
            if failure is not None and not isinstance(error, SubmissionFailure):
                error = failure  # hypothesis met it while shrinking, and reported a flaky test
            self.record_failure(result, error, transcript, call.excinfo)
            result.raised_at = raised_at(error, self.own_files(result.part))
        return report

    def own_files(self, part: str) -> list[str]:
        """The names of the submission's files that `part`'s workers get as this grading does,
        not a stand-in in their place (`files_for`); `raised.code_marks` then keeps only those
        the file rule left as the candidate wrote them."""
        return [name for name, content in self.files_for(part).items()
                if self.files.get(name) == content]  # fmt: skip

    def record_failure(
        self,
        result: CheckResult,
        error: BaseException,
        transcript: Transcript | None,
        excinfo: Any,
    ) -> None:
        result.points = 0
        notes = "\n".join(
            kept
            for note in getattr(error, "__notes__", ())
            if not is_coverage(note) and (kept := without_reproduce_failure(note.strip()))
        )
        if isinstance(error, SubmissionFailure):
            result.status, result.message = "failed", described(error)
        elif isinstance(error, AssertionError | RemoteError):
            result.status = "failed"
            if isinstance(error, RemoteError):
                result.message = said(
                    "unexpected exception from the submission: {error}", error=error
                )
                result.traceback = error.traceback
                if result.severity == "speed" and error.candidates:  # this process's call
                    result.results_differ = said("it raised {error}", error=error)
            else:
                result.message = first_lines(message_of(error)) or repr(error)
                remote = remote_error_of(error)
                if remote is not None and result.severity == "speed":  # a timed run raised
                    result.traceback = remote.traceback
            if isinstance(error, RuleBroken):
                result.rules = error.rules
            if isinstance(error, ResultsDiffer):
                result.results_differ = error.misstep
            if transcript is not None and (transcript.lines or transcript.ending):
                result.counterexample = transcript.render(first_line(result.message))
            result.hypothesis = notes
        else:
            result.status = "error"
            result.message = said(
                "the grader failed in this check: {error}", error=f"{type(error).__name__}: {error}"
            )
            shown = without_reproduce_failure(str(excinfo.getrepr(style="short")))
            result.traceback = shown[-4000:]
            result.hypothesis = notes


RESULT = pytest.StashKey[CheckResult]()


def check_names(module: str) -> set[str]:
    """The check names (function names without `check_`) that `CHECKS_DIR/<module>` defines."""
    tree = ast.parse((CHECKS_DIR / f"{module}.py").read_text())
    return {
        node.name.removeprefix("check_")
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")
    }


def skip_reason(report: pytest.TestReport, call: pytest.CallInfo) -> str:
    """Why a check was skipped: the message it was skipped with (a `Said` stays one)."""
    said_why = getattr(call.excinfo.value, "msg", None) if call.excinfo else None
    if isinstance(said_why, Said):
        return said_why
    longrepr = report.longrepr
    return longrepr[2].removeprefix("Skipped: ") if isinstance(longrepr, tuple) else str(longrepr)


def is_coverage(note: str) -> bool:
    """Hypothesis' explanation of which grader lines failing cases ran: no help to a candidate.
    The grader turns its tracing off (`pytest_configure`); this drops what a Hypothesis that
    traces anyway (a release that renames what is patched there) would write."""
    note = note.strip()
    return note.startswith(("Explanation", "These lines")) or bool(
        re.fullmatch(r"\S+\.py:\d+", note)
    )


def without_reproduce_failure(note: str) -> str:
    """`note` without Hypothesis' advice to add `@reproduce_failure(...)` to a test function:
    it names the grader's own test, of no use to a candidate (the counterexample replays it)."""
    return "\n".join(line for line in note.splitlines() if "@reproduce_failure" not in line)


def first_lines(text: str, count: int = 12) -> str:
    """`text`'s first `count` lines; a message that is all of them, itself (a `Said` stays
    one)."""
    lines = "\n".join(text.strip().splitlines()[:count])
    return text if isinstance(text, Said) and lines == text else lines


def first_line(message: str) -> str:
    """The first line of `message`, a counterexample's `# fails:` line: a message of one line
    itself; of a longer message, its first line as the catalog has it, where it does."""
    head = message.splitlines()[0] if message else message
    if head == message:
        return message
    if not isinstance(message, Said):
        return head
    template = message.id.split("\n", 1)[0]
    names = {name for _, name, _, _ in Formatter().parse(template) if name is not None}
    first = said(template, **{name: message.params[name] for name in names})
    return first if first == head else head
