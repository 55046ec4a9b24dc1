"""grade-all's progress on stderr: a line per finished grading, and a running count between them.

`DriveProgress.done` is the hook grade-all's local pool and `cluster.grade` call with each outcome
as it comes; it prints the outcome's line (`finished_line`: `[N/M] name: score (seconds)`). Once
the gradings begin (`begin`), a running count (`status_line`) says how many submissions are done,
how many gradings are under way, the time since they began and an estimate of the time left
(`time_left`: the mean time of the gradings finished in this run, times those left, over how many
run at once; "estimating" before the first finishes). On a terminal the count is one line
rewritten in place every `LIVE_EVERY` seconds; elsewhere (a CI log) it is a plain line every
`LOG_EVERY` seconds and after each finished grading. Its words are the kit's (`i18n.tr`), in the
drive's language, and so are what the drive says of an outcome, its failure and its remarks
(`messages.text_in`); a submission's name and the grader's last words are `clean`ed.
"""

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from grader import interrupt
from grader.report.i18n import profile_name, tr
from grader.report.leaderboard import Outcome
from grader.report.messages import text_in
from grader.text import clean

LIVE_EVERY = 1.0  # seconds between redraws of the count on a terminal
LOG_EVERY = 30.0  # seconds between plain lines of the count elsewhere
LINE_CHARS = 500  # of a finished grading's line
ERASE = "\r\x1b[K"  # back to the line's start, and clear it


def clock(seconds: float) -> str:
    """`seconds` as `m:ss`, or `h:mm:ss` from an hour on."""
    minutes, rest = divmod(max(round(seconds), 0), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{rest:02d}" if hours else f"{minutes}:{rest:02d}"


def time_left(durations: list[float], left: int, at_once: int) -> float:
    """Seconds until `left` gradings finish, `at_once` at a time, each taking the mean of
    `durations` (those finished so far; at least one)."""
    mean = sum(durations) / len(durations)
    return mean * left / max(min(at_once, left), 1)


def grading_line(lang: str, count: int, jobs: int, profile: str) -> str:
    """The line that starts the gradings: how many, how many at a time, and the profile's name
    in `lang`."""
    return tr(lang, "drive_grading", count=count, jobs=jobs, profile=profile_name(lang, profile))


def finished_line(lang: str, done: int, total: int, outcome: Outcome) -> str:
    """One line per finished grading: its score, or why it has none; then its remarks."""
    if outcome.report is None:
        why = outcome.tail[-1] if outcome.tail else tr(lang, "drive_no_output")
        result = tr(lang, "drive_not_graded", failure=text_in(lang, outcome.failure), why=why)
    else:
        result = f"{outcome.report['score']:g} / {outcome.report['max_score']:g}"
    line = tr(lang, "drive_finished", done=done, total=total, name=outcome.name, result=result,
              seconds=f"{outcome.seconds:.0f}")  # fmt: skip
    line += "".join(
        tr(lang, "list_separator") + text_in(lang, remark) for remark in outcome.remarks
    )
    return clean(line.replace("\n", " "), LINE_CHARS)


def status_line(
    lang: str, done: int, total: int, running: int, elapsed: float, left: float | None
) -> str:
    """The running count; `left` is the estimate in seconds, None before there is one."""
    if left is None:
        estimate = tr(lang, "drive_estimating")
    elif round(left) > 0:
        estimate = tr(lang, "drive_left", time=clock(left))
    else:
        estimate = tr(lang, "drive_overdue")
    return tr(lang, "drive_status", done=done, total=total, running=running,
              elapsed=clock(elapsed), estimate=estimate)  # fmt: skip


class DriveProgress:
    """A drive's progress lines on `stream` (see the module); a context manager that stops the
    running count on exit. `now` is the clock, seconds that only go forward."""

    def __init__(
        self,
        total: int,
        lang: str,
        stream: TextIO | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        stream = sys.stderr if stream is None else stream  # the one of now, not of the import
        self.total, self.lang, self.stream, self.now = total, lang, stream, now
        self.live = stream.isatty()
        self.outcomes: list[Outcome] = []  # every submission's, as they come
        self.durations: list[float] = []  # of the gradings finished in this run
        self.gradings = 0  # to run in this run, once `begin` says so
        self.at_once = 1
        self.began: float | None = None
        self.estimated: tuple[float, float] | None = None  # (when, seconds left then)
        self.lock = threading.Lock()  # one writer at a time: the gradings' threads, the ticker
        self.stopping = threading.Event()
        self.ticker: threading.Thread | None = None

    def __enter__(self) -> "DriveProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kept(self, outcome: Outcome) -> None:
        """An earlier grading kept for this drive: its line; it is not timed."""
        with self.lock:
            self.outcomes.append(outcome)
            self.write_line(finished_line(self.lang, len(self.outcomes), self.total, outcome))

    def begin(self, gradings: int, at_once: int) -> None:
        """`gradings` start, `at_once` at a time: the running count starts."""
        with self.lock:
            self.gradings, self.at_once, self.began = gradings, max(at_once, 1), self.now()
            self.show_status()
        every = LIVE_EVERY if self.live else LOG_EVERY
        self.ticker = threading.Thread(target=self.tick, args=(every,), daemon=True)
        self.ticker.start()

    def done(self, outcome: Outcome) -> None:
        """A grading of this run finished: its line, and the count with a new estimate."""
        with self.lock:
            self.outcomes.append(outcome)
            self.durations.append(outcome.seconds)
            self.write_line(finished_line(self.lang, len(self.outcomes), self.total, outcome))
            left = self.gradings - len(self.durations)
            if left > 0:
                self.estimated = (self.now(), time_left(self.durations, left, self.at_once))
                self.show_status()
            else:
                self.stopping.set()

    def stop(self) -> None:
        """Stop the running count and take its line off a terminal."""
        self.stopping.set()
        if self.ticker is not None:
            self.ticker.join()
        with self.lock:
            if self.live and self.began is not None:
                self.stream.write(ERASE)
                self.stream.flush()

    def tick(self, every: float) -> None:
        interrupt.leave_to_the_main_thread()
        while not self.stopping.wait(every):
            with self.lock:
                if not self.stopping.is_set():
                    self.show_status()

    def status(self) -> str:
        """The running count as of now (once `begin` has run): the estimate made at the last
        finish, counted down since."""
        now, left = self.now(), None
        if self.estimated is not None:
            when, seconds = self.estimated
            left = seconds - (now - when)
        running = min(self.at_once, self.gradings - len(self.durations))
        elapsed = now - self.began
        return status_line(self.lang, len(self.outcomes), self.total, running, elapsed, left)

    def show_status(self) -> None:
        """The count: in place on a terminal (cut to its width), else as a line of its own."""
        if self.live:
            width = shutil.get_terminal_size().columns - 1
            self.stream.write(ERASE + self.status()[:width])
            self.stream.flush()
        else:
            self.write_line(self.status())

    def write_line(self, line: str) -> None:
        """`line` on a line of its own (over the count on a terminal: it is redrawn after)."""
        self.stream.write((ERASE if self.live else "") + line + "\n")
        self.stream.flush()
