"""Ctrl-C during `python -m grader`: the grading stops, every worker it started dies, an earlier
report is left byte for byte as it was, one line says so, and the exit status is 130.

The grading runs in a session of its own, as a terminal's foreground job; SIGINT goes to its
process group, as Ctrl-C sends it. Its workers run in sessions of their own (`process.py`), so
they are found as the grading's descendants, from /proc, while it runs, each by its pid and its
start time (a pid may be reused), and looked for again once it is gone.
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.report.i18n import tr
from tests.ctrl_c import sigint_at_default
from tests.grading import CLI_TIMEOUT, KIT_ROOT, Edit, build_submission, grade

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds the workers through Linux's /proc"
)
# The decode part's first check never returns: its worker is busy when Ctrl-C comes.
HANGING = Edit(
    "kv_cache_manager.py",
    "        if block_size < 1:\n",
    "        while True:\n            pass\n        if block_size < 1:\n",
)
STOP_SECONDS = 30.0  # a generous bound: about 2 s on an idle machine
GONE_SECONDS = 30.0  # for killed processes to leave the process table


@dataclass(frozen=True)
class Process:
    """One process as /proc shows it; `pid` and `started` (clock ticks after boot) name it."""

    pid: int
    parent: int
    session: int
    state: str
    started: int


def processes() -> dict[int, Process]:
    """Every process now, by pid."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        pid = int(entry.name)
        table[pid] = Process(pid, int(fields[1]), int(fields[3]), fields[0], int(fields[19]))
    return table


def descendants(root: int, table: dict[int, Process]) -> set[tuple[int, int]]:
    """The (pid, start time) of every process below `root`."""
    children: dict[int, list[Process]] = {}
    for process in table.values():
        children.setdefault(process.parent, []).append(process)
    found, pending = set(), [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.add((child.pid, child.started))
            pending.append(child.pid)
    return found


def alive(named: Iterable[tuple[int, int]], session: int) -> list[Process]:
    """The processes of `named` still running (zombies are dead), and any left in `session`."""
    named = set(named)
    return [
        process
        for process in processes().values()
        if process.state != "Z"
        and ((process.pid, process.started) in named or process.session == session)
    ]


class Lines:
    """The lines a stream has written so far, read by a thread of their own."""

    def __init__(self, stream: Iterable[str]) -> None:
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(stream), daemon=True)
        self.reader.start()

    def text(self) -> str:
        return "".join(self.lines)


def wait_for(
    condition: Callable[[], bool], seconds: float, what: str, watch: Callable[[], None]
) -> None:
    """Call `watch` every 0.1 s until `condition()` holds; fail, saying `what`, past `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds:g} s for {what}"
        watch()
        time.sleep(0.1)


def test_ctrl_c_stops_the_grading_kills_its_workers_and_writes_nothing(tmp_path: Path) -> None:
    submission = build_submission(tmp_path / "candidate", edits=[HANGING])
    out = tmp_path / "report"
    grade(submission, "--parts", "allocator", out=out)  # the earlier report, of the same input
    earlier = {path.name: path.read_bytes() for path in out.iterdir()}
    grading = subprocess.Popen(
        [sys.executable, "-m", "grader", str(submission), "--out", str(out),
         "--parts", "allocator,decode"],
        cwd=KIT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own session and group, as a terminal's foreground job
        preexec_fn=sigint_at_default,
    )  # fmt: skip
    seen: set[tuple[int, int]] = set()  # every process the grading started, while it ran

    def watch() -> None:
        seen.update(descendants(grading.pid, processes()))

    try:
        stderr, stdout = Lines(grading.stderr), Lines(grading.stdout)
        wait_for(lambda: any(line.split()[:1] == ["allocator"] for line in stderr.lines),
                 CLI_TIMEOUT, "the allocator part's progress line", watch)  # fmt: skip
        wait_for(lambda: bool(descendants(grading.pid, processes())), CLI_TIMEOUT,
                 "a worker of the decode part", watch)  # fmt: skip
        time.sleep(1.0)  # into its first check, which never returns
        watch()
        assert grading.poll() is None, stderr.text()
        interrupted = time.monotonic()
        os.killpg(grading.pid, signal.SIGINT)  # Ctrl-C
        wait_for(lambda: grading.poll() is not None, STOP_SECONDS, "the grading to stop", watch)
        stopped = time.monotonic() - interrupted
        stderr.reader.join(10)
        stdout.reader.join(10)
        assert seen, "no worker was running when Ctrl-C came"
        wait_for(lambda: not alive(seen, grading.pid), GONE_SECONDS, "the workers to die", watch)
    finally:  # whatever failed, nothing the test started outlives it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(grading.pid, signal.SIGKILL)
        for process in alive(seen, grading.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        grading.wait()
    said = stderr.text()
    assert grading.returncode == 130, said
    assert [line for line in said.splitlines() if line.strip()][-1] == tr("en", "interrupted")
    assert "Traceback" not in said, said
    assert stdout.text() == "", stdout.text()  # no summary
    assert {path.name: path.read_bytes() for path in out.iterdir()} == earlier
    print(f"stopped {stopped:.1f} s after Ctrl-C; {len(seen)} worker processes, all gone")
