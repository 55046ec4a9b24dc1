"""The grading plugin's progress lines, on stderr: what each part's checks are doing.

While a part runs, its line says how many of its checks have finished, how they went, and which
check is running now; when its last check finishes, the part's final line gives the tally and the
part's time:

      gather      3/8 checks: 2 passed, 1 failed  12.3 s  running random_writes_read_back (9 s)
      allocator   8 checks: 0 passed, 8 failed  0.4 s

On a terminal (`live`) the running line is rewritten in place as each check starts and ends, and
every `TICK_SECONDS` while one runs. Elsewhere (CI, grade-all's logs) lines are printed whole: once
a check has run for `SLOW_CHECK_SECONDS`, and at least every `HEARTBEAT_SECONDS` while a part runs;
then the part's final line. A `quiet` grading prints none. The words are `grader/report/i18n.py`'s,
in the grading's `lang`.

The parts a second grading process grades (`grader/beside.py`) write their lines there, whole:
the timer thread shows them here as they come, each on a line of its own.

Between pytest's hooks the lines are refreshed by a timer thread, which only formats and writes
them, under `lock`: the checks, their workers and every hook stay on pytest's thread (a worker's
parent-death signal follows the thread that started it). The lines go to a duplicate of the
grader's stderr taken when the session starts, so that pytest's capture of a running check's
output does not swallow them. Every collected check must be `expect`ed before it runs: the count of
a part's checks is what ends its line.
"""

import os
import shutil
import sys
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import pytest

from grader import interrupt
from grader.beside import Beside
from grader.report.i18n import tr

TICK_SECONDS = 1.0  # how often the timer thread looks at the running check
SLOW_CHECK_SECONDS = 5.0  # not live: a check running this long gets a line naming it
HEARTBEAT_SECONDS = 15.0  # not live: the longest silence while a part runs
CLEAR_TO_END = "\x1b[K"  # a terminal's "erase to the end of the line"


class Verdict(Protocol):
    """What the progress lines read of a check's result (`plugin.CheckResult`)."""

    part: str
    name: str
    status: str  # passed | failed | error | skipped; final when the check's last phase ends


@dataclass
class PartProgress:
    """One part's checks: how many were collected, how the finished ones went, when it began."""

    total: int = 0
    tally: Counter[str] = field(default_factory=Counter)  # finished checks, by status
    started: float | None = None

    @property
    def done(self) -> int:
        return sum(self.tally.values())


@dataclass
class Running:
    """The check under way, since when, and whether a plain line has named it yet."""

    check: Verdict
    since: float
    named: bool = False


def step_line(lang: str, key: str, **values: object) -> None:
    """A step of the grading between the parts' checks (a part graded again on the kit's
    allocator, the engine check), as its own line on stderr, in `lang`."""
    print(f"  {tr(lang, key, **values)}", file=sys.stderr, flush=True)


def tally_text(lang: str, tally: Counter[str]) -> str:
    """The finished checks' tally, "2 passed, 1 failed", with the skipped ones and the grader's
    errors where there are any."""
    text = tr(lang, "progress_tally", passed=tally["passed"], failed=tally["failed"])
    if tally["skipped"]:
        text += tr(lang, "progress_skipped", count=tally["skipped"])
    if tally["error"]:
        text += tr(lang, "progress_errors", count=tally["error"])
    return text


def running_line(
    lang: str, part_id: str, part: PartProgress, now: float, running: Running | None
) -> str:
    """A started part's line at time `now`: its checks done of all, their tally, its seconds,
    and the check `running` now with its own seconds, if one is."""
    checks = tr(lang, "progress_running", done=f"{part.done:>2}", total=part.total,
                tally=tally_text(lang, part.tally))  # fmt: skip
    line = f"  {part_id:<10} {checks}  {seconds_text(lang, now - part.started)}"
    if running is None:
        return line
    check_seconds = f"{now - running.since:.0f}"
    return f"{line}  {tr(lang, 'progress_now', name=running.check.name, seconds=check_seconds)}"


def final_line(lang: str, part_id: str, part: PartProgress, now: float) -> str:
    """A part's line once its last check has finished, at time `now`: the tally, the seconds."""
    key = "progress_done_one" if part.total == 1 else "progress_done"
    checks = tr(lang, key, total=f"{part.total:>2}", tally=tally_text(lang, part.tally))
    return f"  {part_id:<10} {checks}  {seconds_text(lang, now - part.started)}"


def seconds_text(lang: str, seconds: float) -> str:
    return tr(lang, "progress_seconds", seconds=f"{seconds:.1f}")


def display_width(text: str) -> int:
    """The columns `text` takes on a terminal: two for a wide (CJK) character, one otherwise."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def fitted(text: str, columns: int) -> str:
    """`text` cut to fewer than `columns` columns, so that a terminal never wraps it (a wrapped
    line cannot be rewritten in place)."""
    while text and display_width(text) >= columns:
        text = text[:-1]
    return text


def terminal_columns(stream: TextIO) -> int:
    """The width of the terminal `stream` writes to; where it cannot be told (not a terminal, or
    a terminal of no size, as `script` makes one), `COLUMNS` or 80."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns or shutil.get_terminal_size().columns


def stderr_duplicate() -> TextIO:
    """A stream on a duplicate of file descriptor 2, taken while pytest's capture is suspended:
    it still reaches the grader's stderr while a check runs and pytest captures fd 2."""
    encoding = getattr(sys.__stderr__, "encoding", None) or "utf-8"
    return open(os.dup(2), "w", encoding=encoding, errors="replace")


@dataclass(kw_only=True)
class ProgressLines:
    """The pytest hooks that report each part's progress (a mixin of `GradingPlugin`)."""

    live: bool = False  # a terminal: rewrite one line in place
    quiet: bool = False  # no progress lines: a run whose results the report does not show
    lang: str = "en"  # of the lines' words: "en" or "zh"
    stream: TextIO | None = None  # where the lines go; None: the grader's (`stderr_duplicate`)
    clock: Callable[[], float] = time.monotonic
    progress: dict[str, PartProgress] = field(default_factory=dict)  # by part
    checks: dict[str, Verdict] = field(default_factory=dict)  # by pytest node id
    running: Running | None = None
    last_shown: float = 0.0  # when a plain line was last printed, or the running part began
    line_open: bool = False  # a live line is on the terminal without its newline
    owns_stream: bool = False  # `stream` was opened here: closed at the session's end
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: threading.Event = field(default_factory=threading.Event)
    ticker: threading.Thread | None = None
    beside: Beside | None = None  # the grading process beside, whose lines the timer shows too

    def expect(self, nodeid: str, check: Verdict) -> None:
        """Count `check` (pytest's `nodeid`) among its part's, at collection."""
        self.progress.setdefault(check.part, PartProgress()).total += 1
        self.checks[nodeid] = check

    # -- the session: the stream and the timer thread -------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.quiet:
            return
        if self.stream is None:
            self.stream, self.owns_stream = stderr_duplicate(), True
        self.stopped.clear()
        self.ticker = threading.Thread(target=self.tick_until_stopped, name="progress", daemon=True)
        self.ticker.start()

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.ticker is not None:
            self.stopped.set()
            self.ticker.join()
            self.ticker = None
        with self.lock:
            if self.line_open:  # a part cut short (pytest stopped early) leaves its line open
                self.write("\n")
            if self.owns_stream:
                self.stream.close()
                self.stream, self.owns_stream = None, False

    def tick_until_stopped(self) -> None:
        interrupt.leave_to_the_main_thread()
        while not self.stopped.wait(TICK_SECONDS):
            self.tick()

    # -- the checks -----------------------------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self.lock:
            now, check = self.clock(), self.checks[nodeid]
            part = self.progress[check.part]
            if part.started is None:
                part.started = self.last_shown = now
            self.running = Running(check, now)
            if self.live and not self.quiet:
                self.show(running_line(self.lang, check.part, part, now, self.running))

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        with self.lock:
            now, check = self.clock(), self.checks[nodeid]
            part = self.progress[check.part]
            part.tally[check.status] += 1
            self.running = None
            if self.quiet:
                return
            if part.done == part.total:
                self.show(final_line(self.lang, check.part, part, now), end=True)
                self.last_shown = now
            elif self.live:
                self.show(running_line(self.lang, check.part, part, now, None))

    def tick(self) -> None:
        """Between hooks: refresh the running check's line on a terminal; elsewhere print it when
        the check has become slow, or when the part has been silent too long."""
        with self.lock:
            if self.beside is not None and not self.quiet:
                self.beside.relay(lambda line: self.show(line, end=True))
            running = self.running
            if running is None or self.quiet:
                return
            now = self.clock()
            slow = not running.named and now - running.since >= SLOW_CHECK_SECONDS
            if not (self.live or slow or now - self.last_shown >= HEARTBEAT_SECONDS):
                return
            part = self.progress[running.check.part]
            self.show(running_line(self.lang, running.check.part, part, now, running))
            if not self.live:
                running.named, self.last_shown = True, now

    # -- writing --------------------------------------------------------------------------------

    def show(self, line: str, end: bool = False) -> None:
        """`line` on a terminal in place of the one there (ended by a newline if `end`); elsewhere
        printed whole. Called under `lock`."""
        if self.live:
            self.write(f"\r{fitted(line, terminal_columns(self.stream))}{CLEAR_TO_END}")
            self.line_open = not end
            if end:
                self.write("\n")
        else:
            self.write(f"{line}\n")

    def write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
