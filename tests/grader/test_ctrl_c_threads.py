"""Ctrl-C reaches the main thread (`grader/interrupt.py`). Every thread the grader starts blocks
SIGINT, so that the kernel gives the signal to the main thread, the only one that raises
KeyboardInterrupt: a SIGINT taken by another thread (one forking a grading at that moment takes
it) left grade-all asleep until the grading under way had finished. A grading such a thread
starts runs with SIGINT unblocked, as any command does."""

import io
import signal
import subprocess
import threading
from argparse import Namespace
from pathlib import Path

import pytest

from grader import drive_progress, grade_all, interrupt
from grader.drive_progress import DriveProgress
from grader.scoring import progress
from grader.scoring.progress import ProgressLines

WAIT = 60.0  # seconds a test waits for a ticker's first tick: far more than it needs


def blocks_ctrl_c() -> bool:
    """Whether the calling thread blocks SIGINT."""
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


class Ticks:
    """What a ticker's method records: whether SIGINT was blocked, in each thread that called it."""

    def __init__(self) -> None:
        self.blocked: dict[bool, bool] = {}  # called in the main thread: blocked there
        self.from_a_thread = threading.Event()

    def record(self, *args: object) -> None:
        in_main = threading.current_thread() is threading.main_thread()
        self.blocked[in_main] = blocks_ctrl_c()
        if not in_main:
            self.from_a_thread.set()


def test_the_drive_grades_in_threads_that_block_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    def grade_one(name: str, entry: Path, args: Namespace) -> tuple[str, bool]:
        return name, blocks_ctrl_c()

    monkeypatch.setattr(grade_all, "grade_one", grade_one)
    outcomes: list[tuple[str, bool]] = []
    grade_all.grade_locally({"a": Path("a"), "b": Path("b")}, Namespace(), 2, outcomes.append)
    assert sorted(outcomes) == [("a", True), ("b", True)]
    assert not blocks_ctrl_c()


def test_the_drive_count_ticks_in_a_thread_that_blocks_ctrl_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = Ticks()
    monkeypatch.setattr(drive_progress, "LOG_EVERY", 0.01)
    monkeypatch.setattr(DriveProgress, "show_status", ticks.record)
    with DriveProgress(2, "en", io.StringIO()) as count:
        count.begin(2, at_once=2)
        assert ticks.from_a_thread.wait(WAIT)
    assert ticks.blocked == {True: False, False: True}


def test_the_check_count_ticks_in_a_thread_that_blocks_ctrl_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = Ticks()
    monkeypatch.setattr(progress, "TICK_SECONDS", 0.01)
    monkeypatch.setattr(ProgressLines, "tick", ticks.record)
    lines = ProgressLines(stream=io.StringIO())
    lines.pytest_sessionstart(None)
    try:
        assert ticks.from_a_thread.wait(WAIT)
    finally:
        lines.pytest_sessionfinish(None, 0)
    assert ticks.blocked == {False: True}
    assert not blocks_ctrl_c()


def blocked_in_a_command(**popen: object) -> bool:
    """Whether a command started from a thread that blocks SIGINT runs with it blocked."""
    said: list[str] = []

    def start() -> None:
        interrupt.leave_to_the_main_thread()
        status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True,
                                check=True, **popen).stdout  # fmt: skip
        said.extend(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:"))

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    (mask,) = said
    return bool(int(mask, 16) >> (signal.SIGINT - 1) & 1)


def test_a_grading_starts_with_ctrl_c_unblocked() -> None:
    assert blocked_in_a_command()  # a process inherits its thread's mask...
    assert not blocked_in_a_command(preexec_fn=grade_all.start_grading)  # ...a grading does not
