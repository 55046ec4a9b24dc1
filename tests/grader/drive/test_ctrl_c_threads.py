"""Ctrl-C reaches the main thread (`grader/interrupt.py`). Every thread the grader starts blocks
SIGINT, so that the kernel gives the signal to the main thread, the only one that raises
KeyboardInterrupt: a SIGINT taken by another thread (one forking a grading at that moment takes
it) left grade-all asleep until the grading under way had finished. A grading such a thread
starts runs with SIGINT unblocked, as any command does. A SIGINT a library's thread takes still
stops a drive: its main thread looks for one every second (`local.WAKE_EVERY`)."""

import io
import signal
import subprocess
import sys
import threading
from argparse import Namespace
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader import interrupt
from grader.drive import local
from grader.drive import progress as drive_progress
from grader.drive.progress import DriveProgress
from grader.scoring import progress
from grader.scoring.progress import ProgressLines

WAIT = 60.0  # seconds a test waits for a ticker's first tick, or Ctrl-C: far more than it needs
UNLENT = Namespace(isolation="none", parts=None)  # a drive that lends its gradings no zygote
PRINT_THE_MASK = (
    "import signal; print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))"
)


def blocks_ctrl_c() -> bool:
    """Whether the calling thread blocks SIGINT."""
    return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])


class Ticks:
    """What a ticker's method records, called from a thread other than the main one: whether that
    thread blocked SIGINT."""

    def __init__(self) -> None:
        self.blocked: list[bool] = []
        self.from_a_thread = threading.Event()

    def record(self, *args: object) -> None:
        if threading.current_thread() is not threading.main_thread():
            self.blocked.append(blocks_ctrl_c())
            self.from_a_thread.set()


def ticks_of(
    monkeypatch: pytest.MonkeyPatch, module: object, every: str, ticker: type, method: str
) -> Ticks:
    """What the ticker's `method` records, its interval (`module.every`) made short."""
    ticks = Ticks()
    monkeypatch.setattr(module, every, 0.01)
    monkeypatch.setattr(ticker, method, ticks.record)
    return ticks


@pytest.fixture
def main_thread_mask() -> Iterator[None]:
    """The main thread's SIGINT block (none, unless the runner was started blocking it) is as it
    was once the test is done."""
    before = blocks_ctrl_c()
    yield
    assert blocks_ctrl_c() == before


@pytest.mark.usefixtures("main_thread_mask")
def test_the_drive_grades_in_threads_that_block_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    def grade_one(name: str, entry: Path, args: Namespace, *lent: object) -> tuple[str, bool]:
        return name, blocks_ctrl_c()

    monkeypatch.setattr(local, "grade_one", grade_one)
    monkeypatch.setattr(local.Forker, "start", lambda: None)  # gradings started afresh
    outcomes: list[tuple[str, bool]] = []
    local.grade_locally({"a": Path("a"), "b": Path("b")}, UNLENT, 2, outcomes.append, lambda: None)
    assert sorted(outcomes) == [("a", True), ("b", True)]


@pytest.mark.usefixtures("main_thread_mask")
def test_ctrl_c_taken_by_a_library_thread_stops_the_drive(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SIGINT that a thread not the grader's own takes (torch's, Ray's) runs Python's handler
    there and wakes no lock: the drive's main thread still raises KeyboardInterrupt while a
    grading runs, and stops it (`local.STOPPING`), instead of waiting for it to end. The
    signal comes once the main thread is past the first grading's outcome, waiting for the
    other's."""
    stopping, grading, waiting = threading.Event(), threading.Event(), threading.Event()
    monkeypatch.setattr(local, "STOPPING", stopping)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal
    stopped: list[bool] = []

    def grade_one(name: str, entry: Path, args: Namespace, *lent: object) -> None:
        if name == "long":
            grading.set()
            stopped.append(stopping.wait(WAIT))  # False: the grading ended before Ctrl-C

    monkeypatch.setattr(local, "grade_one", grade_one)
    monkeypatch.setattr(local.Forker, "start", lambda: None)

    def library() -> None:
        if waiting.wait(WAIT) and grading.wait(WAIT):
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)

    thread = threading.Thread(target=library)
    entries = {"quick": Path("quick"), "long": Path("long")}
    try:
        thread.start()
        with pytest.raises(KeyboardInterrupt):
            local.grade_locally(entries, UNLENT, 2, lambda outcome: waiting.set(), lambda: None)
    finally:
        stopping.set()  # whatever happened, the grading ends
        thread.join()
        signal.signal(signal.SIGINT, previous)
    assert stopped == [True]


@pytest.mark.usefixtures("main_thread_mask")
def test_the_drive_count_ticks_in_a_thread_that_blocks_ctrl_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = ticks_of(monkeypatch, drive_progress, "LOG_EVERY", DriveProgress, "show_status")
    with DriveProgress(2, "en", io.StringIO()) as count:
        count.begin(2, at_once=2)
        assert ticks.from_a_thread.wait(WAIT)
    assert all(ticks.blocked)


@pytest.mark.usefixtures("main_thread_mask")
def test_the_check_count_ticks_in_a_thread_that_blocks_ctrl_c(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = ticks_of(monkeypatch, progress, "TICK_SECONDS", ProgressLines, "tick")
    lines = ProgressLines(stream=io.StringIO())
    lines.pytest_sessionstart(None)
    try:
        assert ticks.from_a_thread.wait(WAIT)
    finally:
        lines.pytest_sessionfinish(None, 0)
    assert all(ticks.blocked)


def blocked_in_a_command(**popen: object) -> bool:
    """Whether a command started from a thread that blocks SIGINT runs with it blocked."""

    def start() -> str:
        interrupt.leave_to_the_main_thread()
        return subprocess.run([sys.executable, "-c", PRINT_THE_MASK], capture_output=True,
                              text=True, check=True, **popen).stdout  # fmt: skip

    with ThreadPoolExecutor(1) as thread:
        said = thread.submit(start).result()
    return {"True\n": True, "False\n": False}[said]


def test_a_grading_starts_with_ctrl_c_unblocked() -> None:
    assert blocked_in_a_command()  # a process inherits its thread's mask...
    assert not blocked_in_a_command(preexec_fn=local.start_grading)  # ...a grading does not
