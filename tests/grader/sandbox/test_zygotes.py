"""Workers forked from a zygote (`zygotes.py`, `zygote.py`): each as alone as a worker started as
its own process. It reaches neither the zygote nor a sibling, its CPU time is its own, a crash
or a hang of one leaves the zygote forking the next, and the answer key's workers come from a
zygote of their own that a candidate's worker cannot see."""

import signal
import time
from collections.abc import Iterator

import pytest

from grader.sandbox import isolation, seccomp
from grader.sandbox.process import CallTimedOut, Limits, Sandbox, WorkerCrashed
from grader.sandbox.proxy import Submission
from grader.sandbox.zygotes import ForkedWorker, Zygotes

CPU_PART = {"TRITON_INTERPRET": "1"}  # a CPU part's worker: it may start no process
MARKER = "answer-key-marker-7f3a"  # in the answer key's file only

PROBE = b"""
import ctypes, os, signal, time

def pids():
    return os.getpid(), os.getppid()

def signal_process(pid, number=0):
    try:
        os.kill(pid, number)
    except OSError as error:
        return type(error).__name__
    return "reached"

def read_memory(pid):
    try:
        with open(f"/proc/{pid}/mem", "rb") as memory:
            memory.seek(4096)
            memory.read(1)
    except OSError as error:
        return type(error).__name__
    return "read"

def attach(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    return "refused" if libc.ptrace(16, pid, 0, 0) == -1 else "attached"  # PTRACE_ATTACH

def spin(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return "spun"

def crash():
    os._exit(3)

def hang():
    while True:
        pass

def own_folder():
    return os.path.dirname(os.path.abspath(__file__))

def read(path):
    try:
        with open(path) as file:
            return file.read()
    except OSError as error:
        return type(error).__name__
"""


@pytest.fixture
def zygotes() -> Iterator[Zygotes]:
    if not seccomp.supported():
        pytest.skip("workers are forked only where the seccomp filter runs (Linux, x86-64/arm64)")
    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"this test needs a sandbox: {found.reason} (make test installs bubblewrap)")
    made = Zygotes(found, 600.0)
    yield made
    made.close()


def worker(zygotes: Zygotes, call_seconds: float = 600.0, **files: bytes) -> Sandbox:
    limits = Limits(memory_bytes=4 << 30, call_seconds=call_seconds, import_seconds=600.0)
    sandbox = Sandbox(files or {"probe.py": PROBE}, limits, CPU_PART, time.monotonic() + 1200,
                      isolation.probe("auto"), zygotes=zygotes)  # fmt: skip
    return sandbox


def probe(sandbox: Sandbox):
    module = Submission(sandbox, "candidate").module("probe")
    module.pids()  # started
    assert isinstance(sandbox.process, ForkedWorker), "the worker was not forked"
    return module


def test_a_forked_worker_reaches_neither_the_zygote_nor_a_sibling(zygotes):
    first, second = worker(zygotes), worker(zygotes)
    try:
        one, other = probe(first), probe(second)
        (own, zygote), (sibling, same_zygote) = one.pids(), other.pids()
        assert zygote == same_zygote
        assert len({own, sibling, zygote}) == 3
        for target in (sibling, zygote):
            assert one.signal_process(target) == "PermissionError", target
            assert one.signal_process(target, int(signal.SIGKILL)) == "PermissionError", target
            assert one.read_memory(target) == "PermissionError", target
            assert one.attach(target) == "refused", target
        assert one.signal_process(-1, int(signal.SIGKILL)) == "PermissionError"  # everyone it may
        assert one.signal_process(own) == "reached"  # itself
        assert other.pids() == (sibling, zygote)  # the sibling lives on
        third = worker(zygotes)
        try:
            assert probe(third).pids()[1] == zygote  # and so does the zygote
        finally:
            third.close()
    finally:
        first.close()
        second.close()


def test_a_forked_workers_cpu_time_is_its_own(zygotes):
    busy, idle = worker(zygotes), worker(zygotes)
    try:
        probe(busy), probe(idle)
        before = idle.cpu_seconds()
        assert Submission(busy, "candidate").module("probe").spin(1.0) == "spun"
        assert busy.cpu_seconds() >= 1.0
        assert idle.cpu_seconds() - before < 0.5  # a sibling's second is not counted here
    finally:
        busy.close()
        idle.close()


def test_a_crash_or_a_hang_leaves_the_zygote_forking_the_next(zygotes):
    crashing, hanging = worker(zygotes), worker(zygotes, call_seconds=2.0)
    try:
        zygote = probe(crashing).pids()[1]
        with pytest.raises(WorkerCrashed, match="exited with status 3"):
            Submission(crashing, "candidate").module("probe").crash()
        probe(hanging)
        with pytest.raises(CallTimedOut):
            Submission(hanging, "candidate").module("probe").hang()
        crashing.next_check()
        assert probe(crashing).pids()[1] == zygote
    finally:
        crashing.close()
        hanging.close()


def test_the_answer_keys_workers_come_from_a_zygote_a_candidates_worker_cannot_see(zygotes):
    candidate = worker(zygotes)
    key_files = {"probe.py": PROBE, "key.py": f"SECRET = {MARKER!r}\n".encode()}
    limits = Limits(memory_bytes=4 << 30, call_seconds=600.0, import_seconds=600.0)
    answer_key = Sandbox(key_files, limits, CPU_PART, time.monotonic() + 1200,
                         isolation.probe("auto"), zygotes=zygotes, answer_key=True)  # fmt: skip
    try:
        key = probe(answer_key)
        module = probe(candidate)
        assert answer_key.process.zygote is not candidate.process.zygote
        key_file = f"{key.own_folder()}/key.py"  # the same path in either sandbox
        assert MARKER in key.read(key_file)
        assert module.read(key_file) == "FileNotFoundError"
        assert module.read(f"{module.own_folder()}/key.py") == "FileNotFoundError"
    finally:
        candidate.close()
        answer_key.close()
