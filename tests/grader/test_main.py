"""`python -m grader`'s own rules, without grading: a report folder is written only where it holds
nothing or an earlier report of the same input, and the report is written held from Ctrl-C."""

import argparse
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from grader import interrupt
from grader.__main__ import (
    GRADER_MEMORY_BYTES,
    check_report_folder,
    launch_early,
    main,
    with_shrinks,
)
from grader.cli import parser
from grader.drive import command as drive_command
from grader.parts import PARTS
from grader.report.i18n import tr
from grader.sandbox import process
from grader.sandbox.isolation import Isolation
from grader.sandbox.process import INTERPRETED
from grader.sandbox.zygotes import Zygotes, grading_sides
from grader.scoring.profiles import PROFILES
from tests.grader.report.english import english_words
from tests.grading import EXERCISES


def a_report(folder: Path, submission: str) -> Path:
    """`folder` holding a report (the fields a reader checks) of the input at `submission`."""
    folder.mkdir(parents=True, exist_ok=True)
    report = {"score": 1.0, "max_score": 2.0, "parts": {}, "submission": {"path": submission}}
    (folder / "report.json").write_text(json.dumps(report))
    (folder / "report.html").write_text("<p>earlier</p>")
    return folder


def test_an_absent_or_empty_folder_takes_any_report(tmp_path: Path) -> None:
    check_report_folder(tmp_path / "absent", tmp_path / "a")
    (tmp_path / "empty").mkdir()
    check_report_folder(tmp_path / "empty", tmp_path / "a")


def test_the_report_of_the_same_input_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate's loop: the same folder graded again, however its path was written."""
    submission = tmp_path / "kit" / "exercises"
    submission.mkdir(parents=True)
    check_report_folder(a_report(tmp_path / "resolved", str(submission)), submission)
    monkeypatch.chdir(tmp_path / "kit")
    check_report_folder(a_report(tmp_path / "relative", "exercises"), submission)
    check_report_folder(a_report(tmp_path / "dotted", "../kit/./exercises"), submission)


def test_the_report_of_another_input_is_not_overwritten(tmp_path: Path) -> None:
    out = a_report(tmp_path / "reports" / "exercises", "/home/a/exercises")
    says = (
        f"{out} holds the report of another input, /home/a/exercises, not of "
        f"/home/b/exercises: pass --out with another folder, or remove {out} to replace it"
    )
    with pytest.raises(ValueError, match=re.escape(says)):
        check_report_folder(out, Path("/home/b/exercises"))


@pytest.mark.parametrize(
    ("files", "says"),
    [
        pytest.param({"notes.txt": "mine"}, "holds files that are not a grade report", id="notes"),
        pytest.param({"report.json": "{}"}, "not a grade report", id="another json"),
        pytest.param({"report.json": "{"}, "not a grade report", id="half written"),
        pytest.param(
            {"report.json": '{"score": 0, "max_score": 0, "parts": {}}'},
            "not a grade report",
            id="no submission",
        ),
    ],
)
def test_a_folder_holding_anything_but_a_report_is_refused(
    tmp_path: Path, files: dict[str, str], says: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    with pytest.raises(ValueError, match=f"{says}: pass --out with a new or empty folder"):
        check_report_folder(out, tmp_path / "submission")


def test_a_file_is_no_report_folder(tmp_path: Path) -> None:
    (tmp_path / "out").write_text("")
    with pytest.raises(ValueError, match="out is a file, not a report folder: pass --out"):
        check_report_folder(tmp_path / "out", tmp_path / "submission")


@pytest.mark.parametrize("holds", ["a file", "notes"])
def test_a_refused_report_folder_is_said_in_the_graders_language(
    tmp_path: Path, capsys: pytest.CaptureFixture, holds: str
) -> None:
    """Nothing graded, exit status 2, and one line in `--lang`: the grader's name aside."""
    out = tmp_path / "out"
    if holds == "a file":
        out.write_text("")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    assert main([str(EXERCISES), "--out", str(out), "--lang", "zh"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(tr("zh", "grader_error", error=out)), err
    assert err.count("\n") == 1, err
    assert [word for word in english_words(err) if word != "grader"] == [], err


def test_held_ignores_ctrl_c_within_and_restores_its_handler() -> None:
    before = signal.getsignal(signal.SIGINT)
    with interrupt.held():
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) == before


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "lots"])
@pytest.mark.parametrize(
    "option", ["--memory-limit-gb", "--call-timeout", "--import-timeout", "--part-timeout"]
)
def test_a_limit_must_be_a_number_above_0(
    option: str, value: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["exercises", option, value])
    assert f"{option}: {value!r}: give a number above 0" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["-1", "2.5", "", "lots", "²", "١٢"])
def test_shrinks_must_be_a_whole_number(value: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["exercises", "--shrinks", value])
    assert f"--shrinks: {value!r}: give a whole number, 0 or more" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "shrinks"), [([], 25), (["--shrinks", "0"], 0)])
def test_shrinks_replaces_the_profiles_own(given: list[str], shrinks: int) -> None:
    args = parser().parse_args(["exercises", *given])
    assert with_shrinks(PROFILES[args.profile], args.shrinks).shrinks == shrinks


@pytest.mark.parametrize("command", [parser, drive_command.parser], ids=["grade", "grade-all"])
def test_every_option_says_what_it_does(command) -> None:
    """`--help` describes every option and argument, none left as its bare name."""
    undescribed = [
        action.dest
        for action in command()._actions
        if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()
    ]
    assert undescribed == []


@pytest.mark.parametrize("before", [None, 1 << 30])
def test_the_grading_process_bounds_its_own_memory_and_keeps_a_lower_limit(before) -> None:
    """The limit the grading process sets itself, in a process of its own (rlimits are kept)."""
    code = (
        "import resource\n"
        f"if {before} is not None:\n"
        f"    resource.setrlimit(resource.RLIMIT_DATA, ({before}, resource.RLIM_INFINITY))\n"
        "from grader.__main__ import limit_own_memory\n"
        "limit_own_memory()\n"
        "print(resource.getrlimit(resource.RLIMIT_DATA)[0])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(done.stdout) == (before or GRADER_MEMORY_BYTES)


@pytest.mark.parametrize(
    ("parts", "gpu", "forks", "early"),
    [
        (tuple(PARTS), False, True, True),
        (("allocator", "kernel"), False, True, False),
        (tuple(PARTS), True, True, False),
        (tuple(PARTS), False, False, False),
    ],
    ids=["every part, no GPU", "some parts", "a GPU's device file", "no worker forked"],
)
def test_zygotes_are_launched_early_only_where_the_grading_surely_starts_them(
    monkeypatch: pytest.MonkeyPatch, parts: tuple[str, ...], gpu: bool, forks: bool, early: bool
) -> None:
    """`python -m grader` launches its zygotes before it imports torch only where the grading
    will start them: every part chosen, no GPU here (workers under Triton's interpreter) and
    workers that may be forked; otherwise the grading starts those it needs, when it needs
    them."""
    wanted: list[tuple] = []
    monkeypatch.setattr(Zygotes, "launch", lambda _, pairs: wanted.extend(pairs))
    monkeypatch.setattr(process, "surely_no_gpu", lambda: not gpu)
    monkeypatch.setattr(process, "may_not_fork", lambda _: forks)
    launch_early(Zygotes(Isolation("/usr/bin/bwrap"), 60.0), parts)
    assert wanted == ([(side, INTERPRETED) for side in grading_sides()] if early else [])
