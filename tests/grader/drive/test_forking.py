"""A drive's gradings forked from one warm process (`grader/drive/forking.py`): each runs as
`python -m grader ARGV` would, with exactly its environment, descriptors and an empty stdin, in a
group of its own that a timeout kills whole; a dead server fails its gradings, it never hangs
them. Where a test needs a grading that does something else, it replaces what the child runs
(`runpy.run_module`) before the server is forked, which the server inherits."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest

from grader import KIT_ROOT
from grader.drive import forking
from grader.drive.forking import GRADING_IMPORTS, Forker, ServerGone
from grader.report import render
from grader.report.i18n import LANGUAGES

WAIT = 300.0  # seconds a grading may take on a loaded machine: far more than any here needs


def start() -> Forker:
    """A forker, or the test skipped where gradings are not forked here."""
    started = Forker.start()
    if started is None:
        pytest.skip("gradings are started afresh here: a GPU may be present, or not Linux")
    return started


@pytest.fixture
def forker() -> Iterator[Forker]:
    started = start()
    yield started
    started.close()


def runs(monkeypatch: pytest.MonkeyPatch, body) -> None:
    """What every grading the next server forks runs, instead of `python -m grader`."""
    monkeypatch.setattr(forking.runpy, "run_module", lambda *args, **kwargs: body())


def gone(pid: int) -> bool:
    """Whether no process (a zombie neither) has `pid`, within `WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.mark.parametrize("argv", [["--help"], ["/no/such/submission"]])
def test_a_forked_grading_says_and_exits_as_python_m_grader(forker, tmp_path, argv):
    log = tmp_path / "grade.log"
    status = forker.wait(forker.begin(argv, dict(os.environ), (), log), WAIT)
    fresh = subprocess.run([sys.executable, "-m", "grader", *argv], cwd=KIT_ROOT,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    assert status == fresh.returncode
    assert log.read_text() == fresh.stdout + fresh.stderr
    assert log.read_text()


def test_a_forked_grading_gets_its_environment_its_descriptors_and_no_input(monkeypatch, tmp_path):
    def report() -> None:
        listed = [int(fd) for fd in os.listdir("/proc/self/fd")]
        fds = sorted(fd for fd in listed if is_open(fd))  # not the listing's own
        print(json.dumps({"env": dict(os.environ), "fds": fds, "argv": sys.argv[1:],
                          "stdin": os.readlink("/proc/self/fd/0"), "cwd": os.getcwd(),
                          "group": os.getpgid(0) == os.getpid()}))  # fmt: skip

    runs(monkeypatch, report)
    kept, dropped = os.pipe()
    os.set_inheritable(kept, True)
    started = start()
    try:
        log = tmp_path / "grade.log"
        env = {"PATH": os.defpath, "ONLY_THIS": "1"}
        assert started.wait(started.begin(["a", "--b"], env, (kept,), log), WAIT) == 0
    finally:
        started.close()
        os.close(kept)
        os.close(dropped)
    seen = json.loads(log.read_text())
    assert seen["env"] == env
    assert seen["argv"] == ["a", "--b"]
    assert seen["stdin"] == "/dev/null"
    assert seen["cwd"] == str(KIT_ROOT)
    assert seen["group"]
    assert seen["fds"] == sorted({0, 1, 2, kept})


def test_a_forked_grading_finds_its_imports_done_and_its_templates_compiled(monkeypatch, tmp_path):
    """What each grading would do first, its server did once before it forked
    (`prepare_gradings`): the grading's imports, the modules a submission may import (Triton's
    among them), and every page template compiled in every language."""

    def report() -> None:
        imported = sorted(set(sys.modules) & {*GRADING_IMPORTS, "triton"})
        compiled = []
        compile_source = jinja2.Environment.compile
        monkeypatch.setattr(jinja2.Environment, "compile",
                            lambda env, *args, **kwargs: compiled.append(args[1:2])
                            or compile_source(env, *args, **kwargs))  # fmt: skip
        for lang in LANGUAGES:
            for name in render.environment(lang).list_templates():
                render.environment(lang).get_template(name)
        print(json.dumps({"imported": imported, "compiled": compiled}))

    runs(monkeypatch, report)
    started = start()
    try:
        log = tmp_path / "grade.log"
        assert started.wait(started.begin([], dict(os.environ), (), log), WAIT) == 0
    finally:
        started.close()
    seen = json.loads(log.read_text())
    assert seen["imported"] == sorted({*GRADING_IMPORTS, "triton"} - {"grader.__main__"})
    assert seen["compiled"] == []


@pytest.mark.parametrize(
    ("stop", "status", "said"),
    [(SystemExit(3), 3, ""), (SystemExit("refused"), 1, "refused"), (ValueError("boom"), 1,
     "ValueError: boom")],
)  # fmt: skip
def test_a_forked_grading_exits_with_pythons_status(monkeypatch, tmp_path, stop, status, said):
    def body() -> None:
        raise stop

    runs(monkeypatch, body)
    started = start()
    try:
        log = tmp_path / "grade.log"
        assert started.wait(started.begin([], dict(os.environ), (), log), WAIT) == status
    finally:
        started.close()
    assert said in log.read_text()


def test_a_grading_past_its_timeout_is_killed_with_its_group(monkeypatch, tmp_path):
    def hang() -> None:
        if sys.argv[1:] == ["--quick"]:
            return
        sleeper = subprocess.Popen(["sleep", "600"])
        print(sleeper.pid, flush=True)
        signal.pause()

    runs(monkeypatch, hang)
    started = start()
    try:
        log = tmp_path / "grade.log"
        grading = started.begin([], dict(os.environ), (), log)
        deadline = time.monotonic() + WAIT
        while not (log.exists() and log.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.wait(grading, 0.5) is None
        assert gone(grading.pid)
        assert gone(int(log.read_text()))
        assert started.wait(started.begin(["--quick"], dict(os.environ), (), log), WAIT) == 0
    finally:
        started.close()


def test_a_dead_server_fails_its_gradings_and_starts_none(monkeypatch, tmp_path):
    runs(monkeypatch, signal.pause)
    started = start()
    try:
        grading = started.begin([], dict(os.environ), (), tmp_path / "grade.log")
        os.kill(started.pid, signal.SIGKILL)
        with pytest.raises(ServerGone, match="died during the grading"):
            started.wait(grading, WAIT)
        assert gone(grading.pid)  # it died with the server
        with pytest.raises(ServerGone, match="has died"):
            started.begin([], dict(os.environ), (), tmp_path / "grade.log")
    finally:
        started.close()


def test_closing_the_forker_ends_the_gradings_under_way(monkeypatch, tmp_path):
    runs(monkeypatch, signal.pause)
    started = start()
    grading = started.begin([], dict(os.environ), (), tmp_path / "grade.log")
    deadline = time.monotonic() + WAIT
    while grading.pid is None and time.monotonic() < deadline:
        time.sleep(0.05)
    started.close()
    assert gone(grading.pid)


def test_no_forking_where_a_gpu_may_be(monkeypatch):
    monkeypatch.setattr(forking, "surely_no_gpu", lambda: False)
    assert Forker.start() is None
