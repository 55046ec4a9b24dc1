"""Where a counterexample runs (`formats.run_in`), and how the terminal shows one
(`summary.counterexample_lines`): whole, or not at all, never cut, and as it is, to paste into
Python."""

import json
from pathlib import Path

import pytest

from grader.report.formats import KIT_PYTHON, failed_checks, run_in, safety_failures
from grader.report.i18n import tr
from grader.report.summary import (
    COUNTEREXAMPLE_LINES,
    LINE_CHARS,
    counterexample_lines,
    summary_lines,
)

FIXTURES = Path(__file__).parent / "fixtures"


def graded(path: str, folder: str = "") -> dict:
    return {"submission": {"path": path, "folder": folder}}


@pytest.mark.parametrize(
    ("path", "folder", "where"),
    [
        ("/home/me/buggy_sub", "", "in /home/me/buggy_sub, the folder that holds"),
        ("/home/me/cand", "submission/exercises", "in /home/me/cand/submission/exercises, the"),
        ("/home/me/cand.zip", "submission", "in the folder submission/ of /home/me/cand.zip"),
        ("/home/me/cand.tar.gz", "", "in the folder you unpack /home/me/cand.tar.gz into"),
    ],
)
def test_a_counterexample_says_where_it_runs(path: str, folder: str, where: str) -> None:
    said = run_in(graded(path, folder), "en")
    assert where in said, said
    assert KIT_PYTHON in said
    assert KIT_PYTHON in run_in(graded(path, folder), "zh")


def test_a_counterexample_too_long_for_the_terminal_is_left_to_the_report() -> None:
    """Cut short, the pasted text would lose its assert and exit 0, or lose its setup."""
    script = "\n".join(f"x{n} = {n}" for n in range(COUNTEREXAMPLE_LINES)) + "\nassert x0 == 1"
    assert counterexample_lines(script, "where", "en") == [
        tr("en", "counterexample_in_report", count=COUNTEREXAMPLE_LINES + 1)
    ]
    wide = f"x = {'1' * LINE_CHARS}\nassert x == 1"  # the terminal would cut its first line
    assert counterexample_lines(wide, "where", "en") == [
        tr("en", "counterexample_in_report", count=2)
    ]
    short = "x = 0\nassert x == 1"
    assert counterexample_lines(short, "where", "en") == [
        tr("en", "see_counterexample"),
        "where",
        "",
        "x = 0",
        "assert x == 1",
        "",
    ]


def test_the_terminals_counterexample_pastes_into_python_as_it_is(tmp_path: Path) -> None:
    """Printed under "what to look at first", the counterexample keeps none of the indent of the
    lines around it: the lines between its blank ones are the report's counterexample, and they
    compile as Python (indented, they raised IndentationError)."""
    report = json.loads((FIXTURES / "partial.json").read_text(encoding="utf-8"))
    printed = summary_lines(report, tmp_path)
    start = printed.index("", printed.index(f"  {tr('en', 'see_counterexample')}")) + 1
    end = next(n for n in range(start, len(printed)) if printed[n].startswith("  In the report"))
    pasted = "\n".join(printed[start : end - 1])  # up to the blank line before the report's link
    scripts = [check["counterexample"].rstrip() for part in report["parts"].values()
               for check in part["checks"] if check["counterexample"]]  # fmt: skip
    assert pasted in scripts
    compile(pasted, "<pasted>", "exec")


def severe(name: str, status: str, severity: str | None, message: str = "") -> dict:
    check = {"id": f"decode/{name}", "name": name, "status": status, "message": message}
    return check if severity is None else check | {"severity": severity}


def test_a_parts_failures_come_most_serious_first_and_safety_ones_are_listed() -> None:
    checks = [
        severe("speed", "failed", "speed"),
        severe("edge", "failed", "contract"),
        severe("fine", "passed", "safety"),
        severe("leak", "failed", "safety"),
        severe("broken", "error", "contract"),
        severe("garbled", "failed", "safety"),
        severe("stub", "failed", "safety", "not implemented: KVCacheManager.free"),
        severe("broken_import", "failed", "safety", "import failed: NameError: torch"),
    ]
    report = {"parts": {"decode": {"checks": checks}}}
    shown = [check["name"] for check in failed_checks(report["parts"]["decode"], {})]
    assert shown == ["leak", "garbled", "stub", "broken_import", "edge", "broken", "speed"]
    # a file that does not compile failed "garbled": the report says so once, elsewhere
    report["syntax_errors"] = [{"checks": ["decode/garbled"]}]
    failed = failed_checks(report["parts"]["decode"], {"decode/garbled": {}})
    assert [check["name"] for check in failed][:2] == ["leak", "stub"]
    assert safety_failures(report) == ["decode/leak"]  # the others never ran the code


def test_a_report_written_before_severities_lists_its_failures_in_order() -> None:
    checks = [severe("b", "failed", None), severe("a", "error", None)]
    part = {"checks": checks}
    assert [check["name"] for check in failed_checks(part, {})] == ["b", "a"]
    assert safety_failures({"parts": {"decode": part}}) == []
