"""Hostile submissions that reach outside their worker: each must gain nothing and harm no one.

Every grading here runs with `--isolation bwrap` (each worker in namespaces of its own), and the
same attacks with `--isolation none` show that an unisolated grade says so everywhere a person
reads it. The attacks import what the file rule refuses (`os`, `runpy`...), so they are graded with
the rule off (`guarded=False`, `tests/unguarded.py`): what is tested is the sandbox. The attacks:

- read the answer key from disk (three folders above the interpreter, every process's cwd);
- a daemon that outlives its worker and, for a minute, SIGKILLs every process it can see whose
  command line names the test's folder (the grader, `grade-all`, the reference's and the other
  candidates' workers), appends a bug to the other submissions' files and rewrites reports;
- terminal escapes, a lone surrogate and a 128 MiB string from `num_free`.

Confinement: an attack only ever touches processes whose command line holds its test's own temp
folder (the grader's workers get a temp folder there too: `TMPDIR`), and files under it; its
daemon stops by itself after `DAEMON_SECONDS`. So when isolation fails, the harm stays inside
the failing test. (Unisolated, the daemon kills its own test's `grade-all`, and
that test fails: it runs isolated only. That a worker sees and signals no process but its own,
the reference's included, is `tests/grader/sandbox/test_isolation.py`'s to show.)
"""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.grading import (
    CLI_TIMEOUT,
    EXERCISES,
    KIT_ROOT,
    SOLUTIONS,
    Edit,
    build_submission,
    grade,
)

DAEMON_SECONDS = 60
ALLOCATOR_IMPORTS = "from operator import index\n"
POP_ITEMS = "        block_ids = [self._free.popitem()[0] for _ in range(n)]\n"
NUM_FREE = "        return len(self._free)\n"
FAKE_REPORT = '{"score": 15.0, "max_score": 15.0}'
ESCAPES = "\\x1b[2J\\x1b[H allocator 15.00 / 15.00 \\udcff"

READ_THE_KEY = f'''
import os as _os
import runpy as _runpy
import sys as _sys

_KIT = {str(KIT_ROOT)!r}  # it looks everywhere, but runs only this kit's key


def _answer_key():
    """The kit's solutions/block_allocator.py, wherever it can be seen from here."""
    roots = [_os.path.realpath(_sys.executable)]
    for _ in range(3):
        roots.append(_os.path.dirname(roots[-1]))
    for pid in (entry for entry in _os.listdir("/proc") if entry.isdigit()):
        try:
            roots.append(_os.readlink(f"/proc/{{pid}}/cwd"))
        except OSError:
            pass
    for root in roots:
        path = _os.path.join(root, "solutions", "block_allocator.py")
        if _os.path.realpath(root) == _KIT and _os.path.isfile(path):
            return _runpy.run_path(path)["BlockAllocator"]
    return None


BlockAllocator = _answer_key() or BlockAllocator
'''

DAEMON = '''
import os as _os
import pathlib as _pathlib
import signal as _signal
import time as _time

_MARKER = {marker!r}


def _others():
    """Processes whose command line names this test's folder: only those are ever touched."""
    for entry in _os.listdir("/proc"):
        if entry.isdigit() and int(entry) != _os.getpid():
            try:
                with open(f"/proc/{{entry}}/cmdline", "rb") as cmdline:
                    if _MARKER.encode() in cmdline.read():
                        yield int(entry)
            except OSError:
                pass


def _kill_all():
    for pid in _others():
        try:
            _os.kill(pid, _signal.SIGKILL)
        except OSError:
            pass


def _vandalize():
    folder = _pathlib.Path(_MARKER)
    for path in folder.glob("submissions/*/block_allocator.py"):
        if "lambda self: -1" not in path.read_text():
            with open(path, "a") as file:
                file.write("\\nBlockAllocator.num_free = property(lambda self: -1)\\n")
    for junit in folder.glob("out/*/junit.xml"):
        junit.with_name("report.json").write_text({fake!r})


def _daemon():
    try:
        if _os.fork():
            return
    except OSError:  # refused where the worker may start no process (a CPU part's)
        return
    _os.setsid()
    if _os.fork():
        _os._exit(0)
    end = _time.monotonic() + {seconds}
    while _time.monotonic() < end:
        try:
            _kill_all()
            _vandalize()
        except Exception:
            pass
        _time.sleep(0.05)
    _os._exit(0)


_daemon()
'''


def hostile_allocator(folder: Path, code: str, *edits: Edit) -> Path:
    """The answer key with `code` run when block_allocator.py is imported."""
    anchor = Edit("block_allocator.py", ALLOCATOR_IMPORTS, f"{ALLOCATOR_IMPORTS}\n{code}\n")
    if "BlockAllocator = " in code:  # code that needs the class: at the end of the file
        text = (SOLUTIONS / "block_allocator.py").read_text() + code
        return build_submission(folder, files={"block_allocator.py": text}, edits=edits)
    return build_submission(folder, edits=(anchor, *edits))


def daemon(marker: Path) -> str:
    return DAEMON.format(marker=str(marker), fake=FAKE_REPORT, seconds=DAEMON_SECONDS)


def confined(tmp_path: Path) -> dict[str, str]:
    """The grader's environment: its workers' temp folders under the test's own folder, and a
    config folder of its own (an unisolated grading is refused beside a seal key)."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {"TMPDIR": str(tmp_path / "tmp"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def digest(folder: Path) -> str:
    files = sorted(folder.rglob("*.py"))
    return hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()


def substantial_lines(folder: Path) -> set[str]:
    """The lines over 30 characters of the modules in `folder`, stripped."""
    lines = (line.strip() for path in folder.glob("*.py") for line in path.read_text().splitlines())
    return {line for line in lines if len(line) > 30}


def answer_key_lines(text: str, submitted: str = "") -> int:
    """How many of the answer key's substantial lines `text` carries, but those the stubs give
    every candidate (`Request`, `OutOfBlocks`) and those of the candidate's own files
    (`submitted`, their text: the report shows the lines they raised at)."""
    lines = substantial_lines(SOLUTIONS) - substantial_lines(EXERCISES)
    return sum(1 for line in lines if line in text and line not in submitted)


def report_files(out: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in sorted(out.iterdir()))


def test_the_answer_key_on_disk_is_out_of_sight(tmp_path):
    folder = tmp_path / "reader"
    stub = {"block_allocator.py": (EXERCISES / "block_allocator.py").read_text() + READ_THE_KEY}
    build_submission(folder, base=EXERCISES, files=stub)
    graded = grade(
        folder,
        "--parts",
        "allocator",
        "--isolation",
        "bwrap",
        env=confined(tmp_path),
        guarded=False,
    )
    graded.assert_clean()
    assert graded.report["isolation"]["isolated"], graded.report["isolation"]
    assert graded.score("allocator") == 0, graded.describe("allocator")
    assert answer_key_lines(report_files(folder.parent / "reader-report")) <= 2


def test_unisolated_grading_says_so_everywhere(tmp_path):
    """The same reader, unisolated: it may well find the key, and every page says not to trust
    the score."""
    folder = tmp_path / "reader"
    stub = {"block_allocator.py": (EXERCISES / "block_allocator.py").read_text() + READ_THE_KEY}
    build_submission(folder, base=EXERCISES, files=stub)
    graded = grade(
        folder, "--parts", "allocator", "--isolation", "none", env=confined(tmp_path), guarded=False
    )
    marking = "not isolated: not for a hiring decision"
    assert graded.report["isolation"]["isolated"] is False
    assert graded.score("allocator") == 15, (
        "unisolated, the reader finds the key (the grader's cwd)"
    )
    assert marking in graded.stdout, graded
    assert any(marking in flag["message"] for flag in graded.report["integrity"])
    out = folder.parent / "reader-report"
    for name in ("report.html", "report.md"):
        assert marking in (out / name).read_text(), name


def test_a_part_built_on_the_kit_cannot_read_the_kits_source(tmp_path):
    """Part 5's worker runs the candidate's scheduler on the kit's manager, which lives in the
    kit's own worker: a scheduler that sends back the source of the manager's module it sees (a
    stand-in) gets no line of the answer key into a report."""
    leak = (
        "\n\nimport inspect as _inspect\n\nfrom . import kv_cache_manager as _kit\n\n"
        "try:\n    _SOURCE = _inspect.getsource(_kit)\nexcept (OSError, TypeError) as error:\n"
        "    _SOURCE = f'no source: {error}'\n\n\n"
        "def _leak(*args, **kwargs):\n    raise ValueError(_SOURCE)\n\n\n"
        "Scheduler.step = _leak\n"
    )
    scheduler = (SOLUTIONS / "scheduler.py").read_text() + leak
    folder = build_submission(tmp_path / "leaker", files={"scheduler.py": scheduler})
    graded = grade(
        folder,
        "--parts",
        "scheduler",
        "--isolation",
        "bwrap",
        env=confined(tmp_path),
        guarded=False,
    )
    graded.assert_clean()
    assert graded.score("scheduler") < graded.max_score("scheduler")
    assert answer_key_lines(report_files(tmp_path / "leaker-report"), scheduler) <= 2


def test_a_daemon_harms_no_other_submission_in_a_drive(tmp_path):
    """A drive of the saboteur and three copies of the answer key: the copies keep full marks,
    their folders and reports stay as they were, and `grade-all` finishes its leaderboard."""
    submissions = tmp_path / "submissions"
    hostile_allocator(submissions / "a_saboteur", daemon(tmp_path))
    for name in ("b_key", "c_key", "d_key"):
        build_submission(submissions / name)
    before = {name: digest(submissions / name) for name in ("b_key", "c_key", "d_key")}
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tests.unguarded", "grade-all", str(submissions), "--out", str(out),
         "--parts", "allocator", "--isolation", "bwrap"],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=4 * CLI_TIMEOUT,
        env=os.environ | confined(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "leaderboard.csv").exists()
    for name, sha in before.items():
        assert digest(submissions / name) == sha, f"{name}'s files were changed"
    scores = {}
    for report in out.rglob("report.json"):
        scores[report.parent.name] = json.loads(report.read_text())["score"]
    assert set(scores) >= {"a_saboteur", "b_key", "c_key", "d_key"}, scores
    assert all(score == 15.0 for score in scores.values()), scores


def test_hostile_text_reaches_no_one(tmp_path):
    """Escapes and a lone surrogate in an exception, a 128 MiB string from `num_free`: the
    summary prints on a strict UTF-8 stream with no escape, and every report file stays small."""
    edits = (
        Edit("block_allocator.py", POP_ITEMS, f"        raise ValueError('{ESCAPES}')\n"),
        Edit("block_allocator.py", NUM_FREE, "        return 'x' * (128 << 20)\n"),
    )
    folder = build_submission(tmp_path / "noisy", edits=edits)
    env = confined(tmp_path) | {"PYTHONIOENCODING": "utf-8:strict"}
    graded = grade(folder, "--parts", "allocator", "--isolation", "bwrap", env=env)
    graded.assert_clean()
    assert graded.score("allocator") == 0, graded.describe("allocator")
    assert "\x1b" not in graded.stdout + graded.stderr
    for path in (tmp_path / "noisy-report").iterdir():
        assert path.stat().st_size < 4 << 20, f"{path.name}: {path.stat().st_size} bytes"
        assert b"\x1b" not in path.read_bytes(), path.name


@pytest.fixture(autouse=True)
def needs_bubblewrap():
    from grader.sandbox import isolation

    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"these tests need a sandbox: {found.reason} (make test installs bubblewrap)")
