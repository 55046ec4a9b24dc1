"""A grading of a local drive reads nothing of the drive's input.

A local drive lends its zygotes to its gradings only where each grading would start the same
ones as it begins (`local.lent_zygotes`), and with the time to start them that the gradings'
options give: a drive of one submission, of some parts, or of unsandboxed workers starts none
(its gradings start what they need, when they need it)."""

import os
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from grader.drive import local
from grader.parts import PARTS
from grader.sandbox import process
from grader.sandbox.process import Limits


class StartedZygotes:
    """What `lent_zygotes` starts, without starting anything: the time it gave them."""

    def __init__(self, isolated: object, seconds: float) -> None:
        self.seconds = seconds

    def start(self, wanted: object) -> None:
        pass


@pytest.mark.parametrize(
    ("isolation", "parts", "gradings"),
    [("none", None, 2), ("bwrap", ("allocator",), 2), ("bwrap", tuple(PARTS)[:-1], 2),
     ("bwrap", None, 1)],
)  # fmt: skip
def test_a_drive_of_one_some_parts_or_unsandboxed_lends_no_zygote(
    isolation: str, parts: tuple[str, ...] | None, gradings: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "Zygotes", None)  # any start would fail
    args = Namespace(isolation=isolation, parts=parts, grader_options=[])
    assert local.lent_zygotes(args, gradings) is None


@pytest.mark.parametrize(
    ("options", "seconds"), [([], Limits.import_seconds), (["--import-timeout", "7"], 7.0)]
)
def test_the_lent_zygotes_take_the_gradings_time_to_start(
    options: list[str], seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "Zygotes", StartedZygotes)
    monkeypatch.setattr(process, "surely_no_gpu", lambda: True)
    monkeypatch.setattr(process, "may_not_fork", lambda env: True)
    monkeypatch.setattr(local.isolation, "probe", lambda mode: None)
    args = Namespace(isolation="bwrap", parts=None, grader_options=options)
    assert local.lent_zygotes(args, 2).seconds == seconds


def test_a_grading_reads_nothing_of_the_drives_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its standard input is /dev/null, whatever the drive's is (a terminal, a pipe, a file)."""
    shows_stdin = "import os; print(os.readlink('/proc/self/fd/0'))"
    monkeypatch.setattr(local, "grader_argv", lambda *_: [])
    monkeypatch.setattr(local, "command", lambda argv: [sys.executable, "-c", shows_stdin])
    args = Namespace(out=tmp_path, timeout=60.0)
    drives_stdin = os.dup(0)
    try:
        with open(__file__, "rb") as drive_input:
            os.dup2(drive_input.fileno(), 0)
        local.grade_one("one", tmp_path / "one", args)
    finally:
        os.dup2(drives_stdin, 0)
        os.close(drives_stdin)
    assert (tmp_path / "one" / "grade.log").read_text().strip() == "/dev/null"


class DeadServer:
    """A forker whose server has died: before the grading, or during it."""

    def __init__(self, during: bool) -> None:
        self.during = during

    def begin(self, *_: object) -> object:
        if not self.during:
            raise local.ServerGone("the drive's grading server has died")
        return object()

    def wait(self, *_: object) -> None:
        raise local.ServerGone("the drive's grading server died during the grading")


@pytest.mark.parametrize("during", [False, True])
def test_a_grading_whose_server_died_is_started_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, during: bool
) -> None:
    """A fault of the drive's machinery, not of the submission: the grading runs again, as a
    fresh `python -m grader`, in a report folder cleared of what the first had written."""
    started = []
    monkeypatch.setattr(local, "grader_argv", lambda *_: ["ARGV"])
    monkeypatch.setattr(local, "command", lambda argv: started.append(argv) or
                        [sys.executable, "-c", "print('afresh')"])  # fmt: skip
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "report.json").write_text("{}")  # left by the first
    args = Namespace(out=tmp_path, timeout=60.0)
    outcome = local.grade_one("one", tmp_path / "one", args, local.NOTHING_LENT, DeadServer(during))
    assert started == [["ARGV"]]
    assert (tmp_path / "one" / "grade.log").read_text().strip() == "afresh"
    assert not (tmp_path / "one" / "report.json").exists()
    assert outcome.failure  # the stand-in wrote no report
