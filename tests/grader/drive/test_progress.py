"""grade-all's progress (`grader/drive/progress.py`): a line per finished grading, and between
them a running count (done, under way, elapsed, an estimate of the time left) rewritten in place
on a terminal and printed as plain lines elsewhere, in the drive's language."""

import io
import re
import threading

import pytest

from grader.drive import progress as drive_progress
from grader.drive.progress import DriveProgress, clock, finished_line, status_line, time_left
from grader.drive.resume import KEPT
from grader.report.leaderboard import Outcome
from grader.said import said

WAIT = 60.0  # seconds a test waits for the ticker's redraws: far more than it needs


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds


def graded(name: str, seconds: float) -> Outcome:
    return Outcome(name, f"subs/{name}.zip", {"score": 15.0, "max_score": 15.0}, "", [], seconds)


def refused(name: str, tail: tuple[str, ...] = ("not a zip",)) -> Outcome:
    failure = said("exit status {status}", status=2)  # as grade-all records it (`local.py`)
    return Outcome(name, f"subs/{name}.zip", None, failure, list(tail), 0.4)


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0:00"), (59.6, "1:00"), (65, "1:05"), (3725, "1:02:05")]
)
def test_clock_is_minutes_and_seconds_then_hours(seconds: float, shown: str) -> None:
    assert clock(seconds) == shown


def test_time_left_is_the_mean_times_those_left_over_the_parallelism() -> None:
    assert time_left([30.0, 50.0], left=6, at_once=2) == 120.0  # 3 rounds of 40 s
    assert time_left([40.0], left=1, at_once=4) == 40.0  # one left: one at a time


def test_the_count_says_estimating_before_a_first_estimate_then_the_time_left() -> None:
    assert status_line("en", 0, 4, 2, 5, None) == (
        "0 of 4 done, 2 under way, 0:05 elapsed, estimating the time left..."
    )
    assert (
        status_line("en", 1, 4, 2, 65, 80)
        == "1 of 4 done, 2 under way, 1:05 elapsed, about 1:20 left"
    )
    assert "taking longer than estimated" in status_line("en", 1, 4, 2, 65, -3)
    zh = "已完成 1/4，进行中 2，已用 1:05，约剩 1:20"  # noqa: RUF001
    assert status_line("zh", 1, 4, 2, 65, 80) == zh


def test_a_finished_line_says_the_score_or_why_there_is_none() -> None:
    assert finished_line("en", 1, 2, graded("alice", 12.3)) == "[1/2] alice: 15 / 15 (12 s)"
    assert finished_line("en", 2, 2, refused("bob")) == (
        "[2/2] bob: NOT GRADED (exit status 2): not a zip (0 s)"
    )
    zh = "[2/2] bob：未评分（退出状态码 2）：not a zip（0 秒）"  # noqa: RUF001
    assert finished_line("zh", 2, 2, refused("bob")) == zh


def test_a_finished_line_says_all_it_says_in_the_drives_language() -> None:
    """What the drive says of an outcome, its failure, its remarks, a grading with no output,
    is in the drive's language; the grader's last words are as it wrote them."""
    kept = Outcome("alice", "subs/alice", {"score": 15.0, "max_score": 15.0}, "", [], 9.0, (KEPT,))
    assert finished_line("en", 1, 2, kept) == (
        "[1/2] alice: 15 / 15 (9 s); kept from an earlier run with the same settings"
    )
    zh = "[1/2] alice：15 / 15（9 秒）；沿用之前以相同设置评分的结果"  # noqa: RUF001
    assert finished_line("zh", 1, 2, kept) == zh
    zh = "[2/2] bob：未评分（退出状态码 2）：没有输出（0 秒）"  # noqa: RUF001
    assert finished_line("zh", 2, 2, refused("bob", tail=())) == zh


def test_in_a_log_the_count_follows_each_finish_with_the_estimate() -> None:
    """Four gradings, two at a time: after the first (40 s), three left take 1.5 rounds."""
    stream, now = io.StringIO(), Clock()
    with DriveProgress(5, "en", stream, now) as progress:
        progress.kept(graded("kept", 7.0))  # from an earlier run: counted done, not timed
        progress.begin(4, at_once=2)
        now.seconds += 40
        progress.done(graded("a", 40.0))
        now.seconds += 10
        assert progress.status() == "2 of 5 done, 2 under way, 0:50 elapsed, about 0:50 left"
        progress.done(refused("b"))
    lines = stream.getvalue().splitlines()
    assert lines == [
        "[1/5] kept: 15 / 15 (7 s)",
        "1 of 5 done, 2 under way, 0:00 elapsed, estimating the time left...",
        "[2/5] a: 15 / 15 (40 s)",
        "2 of 5 done, 2 under way, 0:40 elapsed, about 1:00 left",
        "[3/5] b: NOT GRADED (exit status 2): not a zip (0 s)",
        "3 of 5 done, 2 under way, 0:50 elapsed, about 0:20 left",  # mean 20.2 s, 2 at once
    ]
    assert "\x1b" not in stream.getvalue()


def test_on_a_terminal_the_count_is_one_line_redrawn_while_gradings_run(monkeypatch) -> None:
    """No grading finishes, yet the count is redrawn in place, its elapsed time moving; once the
    drive ends, the line is taken off."""
    monkeypatch.setattr(drive_progress, "LIVE_EVERY", 0.01)
    stream, now = Terminal(), Clock()
    redrawn = threading.Event()

    def ticking() -> float:
        now.seconds += 1
        if stream.getvalue().count("under way") >= 3:
            redrawn.set()
        return now.seconds

    with DriveProgress(2, "en", stream, ticking) as progress:
        progress.begin(2, at_once=2)
        assert redrawn.wait(WAIT), stream.getvalue()
    shown = stream.getvalue()
    assert "\n" not in shown  # one line, rewritten
    draws = shown.split(drive_progress.ERASE)
    assert draws[-1] == ""  # taken off at the end
    elapsed = [re.search(r"(\d+:\d\d) elapsed", draw)[1] for draw in draws if "elapsed" in draw]
    assert len(set(elapsed)) >= 3, shown


def test_the_terminal_is_redrawn_every_few_seconds_and_a_log_line_comes_at_least_each_minute():
    assert drive_progress.LIVE_EVERY <= 2
    assert drive_progress.LOG_EVERY <= 60


def test_on_a_terminal_a_finished_line_replaces_the_count_which_is_drawn_again_below() -> None:
    stream, now = Terminal(), Clock()
    with DriveProgress(2, "en", stream, now) as progress:
        progress.begin(2, at_once=1)
        now.seconds += 30
        progress.done(graded("a", 30.0))
        assert stream.getvalue().endswith(
            "\r\x1b[K[1/2] a: 15 / 15 (30 s)\n\r\x1b[K1 of 2 done, 1 under way, 0:30 elapsed, "
            "about 0:30 left"
        )
