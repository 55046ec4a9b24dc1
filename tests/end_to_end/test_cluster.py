"""`grade-all --ray`: a real Ray cluster grades a drive as a local grade-all does, resumes it, and
retries a task whose worker is killed mid-grading.

The cluster (a head with 2 CPUs) and every grade-all of these tests run in one script inside
namespaces of their own (`unshare`): a network namespace with nothing but loopback, where the
head listens on 127.0.0.1 (no traffic can leave it, whatever Ray binds), and a PID namespace,
so that killing the script's process group at the end, passed or failed, ends every process
the cluster started (the script's own `ray stop` sees only this namespace's processes). The test
kills the worker of a task from outside, as a dying node would: the Ray worker whose child is
the grading of that submission, in that namespace only.
"""

import contextlib
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from grader.parts import PARTS as KIT_PARTS
from grader.sandbox.zygotes import children
from tests.grading import KIT_ROOT, SOLUTIONS, Edit, build_submission

pytest.importorskip("ray", reason="the cluster extra is not installed: pip install '.[cluster]'")

GRADED = ("allocator", "decode")
PARTS = ("--parts", ",".join(GRADED))
FULL_MARKS = f"{sum(KIT_PARTS[part].weight for part in GRADED):g}"  # as the leaderboard writes it
PORT = 6380  # the namespace's own network has no other listener
MUTANTS = {
    "negative_id_wraps": Edit(
        "block_allocator.py",
        "if not 0 <= block_id < self.num_blocks:",
        "if block_id >= self.num_blocks:",
    ),
    "tutorial_decode_rule": Edit(
        "kv_cache_manager.py",
        "if req.seq_len % self.block_size == 0:",
        "if (req.seq_len + 1) % self.block_size == 1:",
    ),
}
SCRIPT = """
set -u
ip link set lo up
ray() {{ "{python}" -m ray.scripts.scripts "$@"; }}
trap 'ray stop --force >/dev/null 2>&1' EXIT
ray start --head --node-ip-address=127.0.0.1 --port={port} --num-cpus=2 --num-gpus=0 \\
  --include-dashboard=false --disable-usage-stats --temp-dir="{temp}" > "{logs}/start.log" 2>&1 \\
  || exit 3
drive() {{
  "{python}" -m grader grade-all "$1" --out "$2" --ray 127.0.0.1:{port} {parts} \\
    > "{logs}/$3.out" 2> "{logs}/$3.err"
  echo $? > "{logs}/$3.rc"
}}
drive "{drive}" "{out}/first" first
drive "{drive}" "{out}/first" again
drive "{crashing}" "{out}/crashing" crashing
"""


def can_unshare() -> bool:
    probe = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def progress(err: str) -> list[str]:
    """grade-all's line per submission, `[done/total] name: ...` (not Ray's own logging)."""
    return [line for line in err.splitlines() if re.match(r"\[\d+/\d+\] ", line)]


def rows(board: Path) -> dict[str, dict[str, str]]:
    return {row["candidate"]: row for row in csv.DictReader((board / "leaderboard.csv").open())}


def drive_folder(folder: Path) -> Path:
    """The answer key, two mutants and a broken archive (the grader refuses it)."""
    build_submission(folder / "answer_key")
    for name, edit in MUTANTS.items():
        build_submission(folder / name, edits=[edit])
    with tarfile.open(folder / "broken.tar.gz", "w:gz") as bundle:
        bundle.add(SOLUTIONS / "block_allocator.py", "../block_allocator.py")
    return folder


def process(pid: int) -> tuple[str, int, str]:
    """A process's command line, parent and network namespace (empty if it is gone)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        status = Path(f"/proc/{pid}/status").read_text()
        parent = int(next(line for line in status.splitlines() if line.startswith("PPid:"))[5:])
        return cmdline, parent, os.readlink(f"/proc/{pid}/ns/net")
    except (OSError, StopIteration, ValueError):
        return "", 0, ""


class Killer(threading.Thread):
    """Kills the Ray worker grading `name`, `times` times (one attempt each), in `namespace`."""

    def __init__(self, namespace: str, times: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.namespace, self.times, self.killed = namespace, dict(times), []
        self.seen: set[int] = set()
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(0.05):
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and int(entry.name) not in self.seen:
                    self.consider(int(entry.name))

    def consider(self, pid: int) -> None:
        cmdline, parent, namespace = process(pid)
        if namespace != self.namespace or " -m grader " not in cmdline:
            return
        worker, _, worker_namespace = process(parent)
        if not worker.startswith("ray::") or worker_namespace != self.namespace:
            return
        for name, left in self.times.items():
            if left and f"/submission/{name} " in cmdline:
                self.seen.add(pid)
                os.kill(parent, signal.SIGKILL)
                self.times[name] -= 1
                self.killed.append(name)


@pytest.fixture(scope="module")
def cluster_drive(tmp_path_factory) -> dict[str, Path]:
    """Local grade-all of the drive; then, on the cluster: the drive, the drive again, and a
    drive whose worker is killed once for `crash_once` and twice for `crash_twice`."""
    if not shutil.which("unshare") or not can_unshare():
        pytest.skip("needs unshare (user and network namespaces) to keep Ray on loopback")
    root = tmp_path_factory.mktemp("cluster")
    drive = drive_folder(root / "drive")
    crashing = root / "crashing"
    build_submission(crashing / "crash_once")
    build_submission(crashing / "crash_twice", edits=[MUTANTS["tutorial_decode_rule"]])
    with zipfile.ZipFile(crashing / "untouched.zip", "w") as bundle:
        for path in sorted(SOLUTIONS.glob("*.py")):
            bundle.write(path, f"untouched/{path.name}")
    logs, out = root / "logs", root / "out"
    logs.mkdir()
    local = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(drive), "--out", str(out / "local"),
         "--jobs", "2", *PARTS],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert local.returncode == 1, local.stderr  # the broken archive could not be graded
    script = SCRIPT.format(
        python=sys.executable, port=PORT, temp=tmp_path_factory.mktemp("r"), logs=logs,
        drive=drive, out=out, crashing=crashing, parts=" ".join(PARTS),
    )  # fmt: skip
    namespaced = subprocess.Popen(
        ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child",
         "--mount-proc", "bash", "-c", script],
        cwd=KIT_ROOT, env={**os.environ, "PATH": f"{os.environ['PATH']}:/usr/sbin:/sbin"},
        start_new_session=True,
    )  # fmt: skip
    killer = None
    try:
        deadline = time.monotonic() + 30
        while not children(namespaced.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (inside,) = children(namespaced.pid)  # the namespace's first process
        killer = Killer(os.readlink(f"/proc/{inside}/ns/net"), {"crash_once": 1, "crash_twice": 2})
        killer.start()
        assert namespaced.wait(timeout=900) == 0, (logs / "start.log").read_text()
    finally:
        if killer is not None:
            killer.stopping.set()
        with contextlib.suppress(ProcessLookupError):  # all gone already
            os.killpg(namespaced.pid, signal.SIGKILL)  # the PID namespace ends with its first
        namespaced.wait()
    return {"local": out / "local", "first": out / "first", "crashing": out / "crashing",
            "logs": logs, "killed": killer.killed}  # fmt: skip


def exit_status(cluster_drive: dict, drive: str) -> int:
    return int((cluster_drive["logs"] / f"{drive}.rc").read_text())


def test_the_cluster_gives_the_scores_of_a_local_drive(cluster_drive) -> None:
    local, first = rows(cluster_drive["local"]), rows(cluster_drive["first"])
    err = (cluster_drive["logs"] / "first.err").read_text()
    assert exit_status(cluster_drive, "first") == 1, err  # the broken archive, as locally
    assert "0 of 4 done, 2 under way, 0:00 elapsed, estimating the time left..." in err, err
    assert set(first) == {"answer_key", *MUTANTS, "broken"}, err
    for name, row in local.items():
        assert (first[name]["status"], first[name]["score"]) == (row["status"], row["score"])
    assert first["answer_key"]["score"] == first["answer_key"]["max_score"] == FULL_MARKS
    assert all(first[name]["score"] != FULL_MARKS for name in MUTANTS)
    assert "exit status 2" in first["broken"]["note"]
    assert len(progress(err)) == 4, err
    for row in first.values():
        assert (cluster_drive["first"] / row["report"]).is_file(), row


def test_a_second_run_on_the_cluster_keeps_every_report(cluster_drive) -> None:
    err = (cluster_drive["logs"] / "again.err").read_text()
    assert exit_status(cluster_drive, "again") == 1, err
    kept = [line for line in progress(err) if "kept from an earlier run" in line]
    assert len(kept) == 3, err  # the broken one has no report: it is tried again
    again = rows(cluster_drive["first"])
    assert again["answer_key"]["score"] == FULL_MARKS
    assert "kept from an earlier run" in again["answer_key"]["note"]


def test_a_killed_worker_is_retried_and_a_second_death_is_a_row(cluster_drive) -> None:
    assert sorted(cluster_drive["killed"]) == ["crash_once", "crash_twice", "crash_twice"]
    board = rows(cluster_drive["crashing"])
    err = (cluster_drive["logs"] / "crashing.err").read_text()
    assert exit_status(cluster_drive, "crashing") == 1, err  # crash_twice has no report
    once, twice, untouched = board["crash_once"], board["crash_twice"], board["untouched"]
    assert (once["status"], once["score"]) == ("graded", FULL_MARKS), err
    assert "retried on Ray (attempt 2 of 2)" in once["note"]
    assert twice["status"] == "not graded", err
    assert "failed 2 times on Ray" in twice["note"]
    assert (untouched["score"], untouched["note"]) == (FULL_MARKS, "")


def test_no_cluster_found_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """`--ray auto` where no cluster runs: one line that says so and how to start one, exit 2,
    nothing written. In namespaces of its own (no cluster of the machine's is visible) with a
    Ray temp folder of its own (no address file from an earlier `ray start`)."""
    if not shutil.which("unshare") or not can_unshare():
        pytest.skip("needs unshare (user, network and PID namespaces) to hide other clusters")
    build_submission(tmp_path / "drive" / "answer_key")
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child",
         "--mount-proc", sys.executable, "-m", "grader", "grade-all", str(tmp_path / "drive"),
         "--out", str(tmp_path / "out"), "--ray", "auto", *PARTS],
        cwd=KIT_ROOT, env=env | {"RAY_TMPDIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert said == [
        "grade-all: --ray auto: no Ray cluster was found there. Start one on this machine with "
        "`ray start --head --node-ip-address=127.0.0.1` (then --ray auto), or give the address "
        "of a running one (host:6379)"
    ], done.stderr
    assert not (tmp_path / "out").exists()
