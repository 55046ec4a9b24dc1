# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The progress lines: their text, and when they are written, driven through the plugin's hooks
with a fake clock; the timer thread that refreshes them; and, in a pytest run of its own, a line
written while a check runs, past pytest's capture of that check's output."""

import io
import os
import subprocess
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.scoring import progress
from grader.scoring.plugin import CheckResult
from grader.scoring.progress import (
    CLEAR_TO_END,
    HEARTBEAT_SECONDS,
    SLOW_CHECK_SECONDS,
    PartProgress,
    ProgressLines,
    Running,
    display_width,
    final_line,
    fitted,
    running_line,
    terminal_columns,
)


@dataclass
class FakeClock:
    """A monotonic clock that moves only when a test says so."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


class Written(io.StringIO):
    """A stream that records each write apart, and whether it is a terminal's."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def check(part: str, name: str) -> CheckResult:
    return CheckResult(f"{part}/{name}", part, name, "error", 0, 1, "safety")


def plugin_with(*checks: CheckResult, **fields: object) -> ProgressLines:
    """Progress lines on a `Written` stream and a `FakeClock`, every one of `checks` expected
    (node id: the check's id)."""
    lines = ProgressLines(stream=Written(), clock=FakeClock(), **fields)
    for result in checks:
        lines.expect(result.id, result)
    return lines


def run(lines: ProgressLines, result: CheckResult, status: str, seconds: float = 0.1) -> None:
    """`result`'s check through logstart and logfinish, `seconds` apart, ending as `status`."""
    lines.pytest_runtest_logstart(result.id, None)
    lines.clock.now += seconds
    result.status = status
    lines.pytest_runtest_logfinish(result.id, None)


def output(lines: ProgressLines) -> str:
    return lines.stream.getvalue()


# -- the text ----------------------------------------------------------------------------------


def test_a_finished_part_tallies_its_checks() -> None:
    part = PartProgress(total=8, tally=Counter(failed=8), started=1.0)
    assert final_line("en", "allocator", part, 1.4) == (
        "  allocator   8 checks: 0 passed, 8 failed  0.4 s"
    )


def test_a_part_of_one_check_says_check() -> None:
    part = PartProgress(total=1, tally=Counter(passed=1), started=0.0)
    line = final_line("en", "decode", part, 0.2)
    assert line == "  decode      1 check: 1 passed, 0 failed  0.2 s"


def test_skipped_checks_and_grader_errors_show_only_when_there_are_some() -> None:
    part = PartProgress(total=21, tally=Counter(passed=15, failed=1, skipped=5), started=0.0)
    assert final_line("en", "kernel", part, 1.1) == (
        "  kernel     21 checks: 15 passed, 1 failed, 5 skipped  1.1 s"
    )
    part.tally = Counter(passed=6, error=2)
    assert final_line("en", "gather", part, 1.1).endswith(
        "6 passed, 0 failed, 2 grader errors  1.1 s"
    )


def test_a_running_part_names_its_check_now_with_its_seconds() -> None:
    part = PartProgress(total=8, tally=Counter(passed=2, failed=1), started=100.0)
    now_running = Running(check("gather", "random_writes_read_back"), since=103.3)
    assert running_line("en", "gather", part, 112.3, now_running) == (
        "  gather      3/8 checks: 2 passed, 1 failed  12.3 s  "
        "running random_writes_read_back (9 s)"
    )
    assert running_line("en", "gather", part, 112.3, None) == (
        "  gather      3/8 checks: 2 passed, 1 failed  12.3 s"
    )


def test_the_lines_speak_the_gradings_language() -> None:
    part = PartProgress(total=8, tally=Counter(failed=8), started=0.0)
    assert final_line("zh", "allocator", part, 0.4) == (
        "  allocator   8 项检查：0 项通过，8 项未通过  0.4 秒"
    )
    now_running = Running(check("allocator", "free_is_atomic"), since=0.0)
    assert running_line("zh", "allocator", part, 2.0, now_running).endswith(
        "正在运行 free_is_atomic（2 秒）"
    )


def test_a_line_is_cut_to_the_terminal_counting_wide_characters_twice() -> None:
    assert display_width("ab未通过") == 8
    assert fitted("abcdef", 4) == "abc"
    assert fitted("ab未通过", 6) == "ab未"
    assert fitted("short", 80) == "short"


def test_a_terminal_of_no_size_gets_lines_of_a_usual_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress.os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))
    monkeypatch.delenv("COLUMNS", raising=False)
    assert terminal_columns(sys.stderr) == 80
    assert terminal_columns(io.StringIO()) == 80  # no file descriptor at all


# -- when lines are written: not on a terminal -------------------------------------------------


def test_a_quick_part_prints_its_final_line_alone() -> None:
    first, second = check("allocator", "one"), check("allocator", "two")
    lines = plugin_with(first, second)
    run(lines, first, "failed")
    lines.tick()
    run(lines, second, "passed")
    assert output(lines) == "  allocator   2 checks: 1 passed, 1 failed  0.2 s\n"


def test_a_slow_check_is_named_once_then_the_part_is_heard_from_every_heartbeat() -> None:
    done, slow, after = check("gather", "quick"), check("gather", "slow"), check("gather", "last")
    lines = plugin_with(done, slow, after)
    clock = lines.clock
    run(lines, done, "passed", seconds=1.0)
    lines.pytest_runtest_logstart(slow.id, None)
    clock.now += SLOW_CHECK_SECONDS - 0.5
    lines.tick()
    assert output(lines) == ""
    clock.now += 0.5
    lines.tick()
    assert output(lines).splitlines() == [
        "  gather      1/3 checks: 1 passed, 0 failed  6.0 s  running slow (5 s)"
    ]
    clock.now += HEARTBEAT_SECONDS - 1
    lines.tick()
    assert len(output(lines).splitlines()) == 1
    clock.now += 1
    lines.tick()
    assert output(lines).splitlines()[-1] == (
        "  gather      1/3 checks: 1 passed, 0 failed  21.0 s  running slow (20 s)"
    )
    slow.status = "failed"
    lines.pytest_runtest_logfinish(slow.id, None)
    run(lines, after, "passed")
    assert output(lines).splitlines()[-1] == "  gather      3 checks: 2 passed, 1 failed  21.1 s"


def test_a_part_of_many_quick_checks_is_heard_from_every_heartbeat() -> None:
    checks = [check("sharing", f"c{number}") for number in range(40)]
    lines = plugin_with(*checks)
    for result in checks:  # a second each, the timer thread ticking once in each
        lines.pytest_runtest_logstart(result.id, None)
        lines.clock.now += 1.0
        lines.tick()
        result.status = "passed"
        lines.pytest_runtest_logfinish(result.id, None)
    printed = output(lines).splitlines()
    assert printed == [
        "  sharing    14/40 checks: 14 passed, 0 failed  15.0 s  running c14 (1 s)",
        "  sharing    29/40 checks: 29 passed, 0 failed  30.0 s  running c29 (1 s)",
        "  sharing    40 checks: 40 passed, 0 failed  40.0 s",
    ]


def test_a_quiet_grading_prints_nothing_and_starts_no_thread() -> None:
    result = check("allocator", "one")
    lines = plugin_with(result, quiet=True, beside=Relaying("  caching    11 checks"))
    lines.pytest_sessionstart(None)
    lines.pytest_runtest_logstart(result.id, None)
    lines.clock.now += 100
    lines.tick()
    result.status = "passed"
    lines.pytest_runtest_logfinish(result.id, None)
    lines.pytest_sessionfinish(None, 0)
    assert lines.ticker is None
    assert output(lines) == ""


# -- when lines are written: on a terminal -----------------------------------------------------


def test_a_terminal_line_is_rewritten_in_place_at_every_hook_and_tick() -> None:
    first, second = check("decode", "first"), check("decode", "second")
    lines = plugin_with(first, second, live=True)
    lines.pytest_runtest_logstart(first.id, None)
    lines.clock.now += 1.0
    lines.tick()
    lines.clock.now += 1.0
    lines.tick()
    first.status = "failed"
    lines.pytest_runtest_logfinish(first.id, None)
    run(lines, second, "passed", seconds=0.5)
    writes = lines.stream.writes
    running = "  decode      0/2 checks: 0 passed, 0 failed  {0}.0 s  running first ({0} s)"
    assert writes[:3] == [f"\r{running.format(second)}{CLEAR_TO_END}" for second in range(3)]
    finished = "  decode      2 checks: 1 passed, 1 failed  2.5 s"
    assert writes[-2:] == [f"\r{finished}{CLEAR_TO_END}", "\n"]
    assert "\n" not in "".join(writes[:-1])


def test_a_part_cut_short_has_its_terminal_line_ended() -> None:
    first, never = check("decode", "first"), check("decode", "never")
    lines = plugin_with(first, never, live=True)
    run(lines, first, "failed")
    lines.pytest_sessionfinish(None, 1)
    assert output(lines).endswith(f"{CLEAR_TO_END}\n")


class Relaying:
    """The grading process beside, as `ProgressLines` sees it: lines to show at its next tick."""

    def __init__(self, *lines: str) -> None:
        self.pending = list(lines)

    def relay(self, show) -> None:
        lines, self.pending = self.pending, []
        for line in lines:
            show(line)


def test_the_lines_of_the_parts_graded_beside_show_between_this_process_s_own() -> None:
    """Each on a line of its own: on a terminal, in place of the running line, which the same
    tick draws again below it."""
    beside = "  caching    11 checks: 11 passed, 0 failed  7.1 s"
    for live in (False, True):
        first, second = check("decode", "first"), check("decode", "second")
        lines = plugin_with(first, second, live=live, beside=Relaying(beside))
        lines.pytest_runtest_logstart(first.id, None)
        lines.clock.now += HEARTBEAT_SECONDS
        lines.tick()
        lines.tick()  # nothing more from beside
        lines.beside.pending.append(beside)
        first.status = "passed"
        lines.pytest_runtest_logfinish(first.id, None)
        lines.tick()  # between two checks: shown all the same
        assert "".join(lines.stream.writes).endswith(f"{beside}{CLEAR_TO_END}\n" if live
                                                     else f"{beside}\n")  # fmt: skip
        writes = lines.stream.writes[:7] if live else lines.stream.writes[:2]
        running = "  decode      0/2 checks: 0 passed, 0 failed  15.0 s  running first (15 s)"
        if live:
            redrawn = f"\r{running}{CLEAR_TO_END}"
            assert writes[1:5] == [f"\r{beside}{CLEAR_TO_END}", "\n", redrawn, redrawn]
        else:
            assert writes == [f"{beside}\n", f"{running}\n"]


# -- the timer thread --------------------------------------------------------------------------


class Ticks(Written):
    """A stream that says when it has been written `count` times."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count, self.reached = count, threading.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if len(self.writes) >= self.count:
            self.reached.set()
        return written


def test_the_timer_thread_refreshes_a_running_check_and_stops_with_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "TICK_SECONDS", 0.01)
    result = check("scheduler", "long")
    lines = ProgressLines(stream=Ticks(count=4), live=True)
    lines.expect(result.id, result)
    lines.pytest_sessionstart(None)
    ticker = lines.ticker
    lines.pytest_runtest_logstart(result.id, None)  # one write; the thread makes the others
    assert lines.stream.reached.wait(60), lines.stream.writes
    result.status = "passed"
    lines.pytest_runtest_logfinish(result.id, None)
    lines.pytest_sessionfinish(None, 0)
    assert not ticker.is_alive()
    assert lines.ticker is None
    assert all("running long" in write for write in lines.stream.writes[:4])


# -- in a pytest run: past the capture of a running check's output ------------------------------

RUN_WITH_PROGRESS = """
import sys, time
import pytest
from grader.scoring import progress
from grader.scoring.plugin import CheckResult
from grader.scoring.progress import ProgressLines


class Checks(ProgressLines):
    def pytest_collection_modifyitems(self, items):
        for item in items:
            result = CheckResult(item.name, "gather", item.name, "passed", 1, 1, "safety")
            self.expect(item.nodeid, result)


class Clock:  # ten seconds a reading: the thread's first tick finds the check slow
    now = 0.0

    def __call__(self):
        self.now += 10.0
        return self.now


def test_slow():
    import __main__

    while not (__main__.PLUGIN.running and __main__.PLUGIN.running.named):  # the thread named it
        time.sleep(0.01)
    print("the check's own output, captured")


if __name__ == "__main__":
    progress.TICK_SECONDS = 0.01
    PLUGIN = Checks(clock=Clock())
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"], plugins=[PLUGIN]))
"""


def test_a_line_written_while_a_check_runs_reaches_stderr_past_pytests_capture(
    tmp_path: Path,
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the kit's settings
    script = tmp_path / "run_with_progress.py"
    script.write_text(RUN_WITH_PROGRESS)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": str(KIT_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checks: 0 passed, 0 failed" in done.stderr, done.stderr
    assert "running test_slow (" in done.stderr, done.stderr
    assert " 1 check: 1 passed, 0 failed" in done.stderr, done.stderr
