"""Workers forked from a zygote (`zygotes.py`, `zygote.py`): each as alone as a worker started as
its own process. It sees neither the zygote nor a sibling (no process, file, socket of theirs),
its CPU time is its own, a crash or a hang of one leaves the zygote forking the next, the grader
stops one at once through its lifeline, and the answer key's workers come from a zygote of their
own that a candidate's worker cannot see. Where a zygote cannot serve, workers start afresh."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

from grader import KIT_ROOT
from grader.sandbox import isolation, seccomp
from grader.sandbox.process import CallTimedOut, Limits, Sandbox, WorkerCrashed
from grader.sandbox.proxy import Submission
from grader.sandbox.zygotes import (
    ANSWER_KEY,
    CANDIDATE,
    ForkedWorker,
    Zygote,
    ZygoteGone,
    Zygotes,
    environment_key,
    uses_torch,
)

CPU_PART = {"TRITON_INTERPRET": "1"}  # a CPU part's worker: it may start no process
MARKER = "answer-key-marker-7f3a"  # in the answer key's file only
ABSTRACT = "\0grader-zygote-test"

PROBE = b"""
import ctypes, os, signal, socket, time
import torch

LISTENING = []

def pids():
    return os.getpid(), os.getppid()

def processes():
    return sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())

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

def listen(name):
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen()
    LISTENING.append(server)

def connect(name):
    try:
        socket.socket(socket.AF_UNIX).connect(name)
    except OSError as error:
        return type(error).__name__
    return "connected"

def write(path):
    with open(path, "w") as file:
        file.write("x")

def open_terminal():
    return os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)

def listing(path):
    return sorted(os.listdir(path))

def spin(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return "spun"

def crash():
    os._exit(3)

def exit_soon():
    import threading
    spun = spin(0.5)
    threading.Timer(0.2, os._exit, (0,)).start()
    return spun

def segfault():
    os.kill(os.getpid(), signal.SIGSEGV)

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


def new_zygotes() -> Zygotes:
    if not seccomp.supported():
        pytest.skip("workers are forked only where the seccomp filter runs (Linux, x86-64/arm64)")
    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"this test needs a sandbox: {found.reason} (make test installs bubblewrap)")
    return Zygotes(found, 600.0)


@pytest.fixture
def zygotes() -> Iterator[Zygotes]:
    """Zygotes of the test's own, none started: for a test of how they start."""
    made = new_zygotes()
    yield made
    made.close()


@pytest.fixture(scope="module")
def module_zygotes() -> Iterator[Zygotes]:
    made = new_zygotes()
    yield made
    made.close()


@pytest.fixture
def serving(module_zygotes: Zygotes) -> Zygotes:
    """Zygotes the module's tests fork their workers from, one after another, as a grading's
    parts do: each test's workers, crashed, hung or stopped, leave them serving the next."""
    broken = [zygote for zygote in module_zygotes.zygotes.values() if zygote and zygote.broken]
    assert not broken, "an earlier test of this module broke its zygote: see that test's failure"
    return module_zygotes


def worker(
    zygotes: Zygotes,
    call_seconds: float = 600.0,
    answer_key: bool = False,
    runs_tool: bool = False,
    **files: bytes,
) -> Sandbox:
    limits = Limits(memory_bytes=4 << 30, call_seconds=call_seconds, import_seconds=600.0)
    return Sandbox(files or {"probe.py": PROBE}, limits, CPU_PART, time.monotonic() + 1200,
                   isolation.probe("auto"), zygotes=zygotes, answer_key=answer_key,
                   runs_tool=runs_tool)  # fmt: skip


def probe(sandbox: Sandbox):
    module = Submission(sandbox, "candidate").module("probe")
    module.pids()  # started
    assert isinstance(sandbox.process, ForkedWorker), "the worker was not forked"
    return module


def test_a_forked_worker_sees_neither_the_zygote_nor_a_sibling(serving):
    first, second = worker(serving), worker(serving)
    try:
        one, other = probe(first), probe(second)
        assert one.pids() == other.pids() == (2, 1)  # each under an init of its own
        assert one.processes() == [1, 2]  # no zygote, no sibling
        one.listen(ABSTRACT)
        assert one.connect(ABSTRACT) == "connected"  # its own socket, by name
        assert other.connect(ABSTRACT) == "ConnectionRefusedError"  # not a sibling's
        one.write("/tmp/left-behind")
        assert one.listing("/tmp") == ["left-behind"]
        assert other.listing("/tmp") == []  # a /tmp of its own
        one.open_terminal()
        assert one.listing("/dev/pts") == ["0", "ptmx"]
        assert other.listing("/dev/pts") == ["ptmx"]  # no pseudo-terminal of a sibling's
        for module in (one, other):  # its own package, where a fresh worker has it, and no other
            assert module.own_folder() == "/sandbox/package/submission"
            assert module.listing("/sandbox/workers") == []
        assert other.signal_process(-1, int(signal.SIGKILL)) == "PermissionError"
        assert other.signal_process(1) == "PermissionError"  # not even its init
        assert other.read_memory(1) == "PermissionError"
        assert other.attach(1) == "refused"
        assert other.signal_process(2) == "reached"  # itself
        assert one.pids() == (2, 1)  # the sibling lives on
        third = worker(serving)
        try:
            probe(third)  # and the zygote forks the next
        finally:
            third.close()
    finally:
        first.close()
        second.close()


def test_a_forked_workers_cpu_time_is_its_own(serving):
    busy, idle = worker(serving), worker(serving)
    try:
        probe(busy), probe(idle)
        before = idle.cpu_seconds()
        assert Submission(busy, "candidate").module("probe").spin(1.0) == "spun"
        assert busy.cpu_seconds() >= 1.0
        assert idle.cpu_seconds() - before < 0.5  # a sibling's second is not counted here
    finally:
        busy.close()
        idle.close()


def test_a_workers_cpu_time_can_be_read_after_it_ended(serving):
    """The keeper, whose process tree the CPU time is read from, lives until the grader lets go
    of it: a worker that ends right after its reply (before the grader reads its clock) leaves
    its time there, and no pid the kernel may give to another process is read."""
    ending = worker(serving)
    try:
        module = probe(ending)
        assert module.exit_soon() == "spun"
        time.sleep(1.0)  # it has ended
        assert ending.cpu_seconds() >= 0.5
    finally:
        ending.close()


def test_a_crash_or_a_hang_leaves_the_zygote_forking_the_next(serving):
    crashing, hanging = worker(serving), worker(serving, call_seconds=2.0)
    try:
        probe(crashing)
        with pytest.raises(WorkerCrashed, match="exited with status 3"):
            Submission(crashing, "candidate").module("probe").crash()
        crashing.next_check()
        probe(crashing)
        with pytest.raises(WorkerCrashed, match="killed by signal SIGSEGV"):
            Submission(crashing, "candidate").module("probe").segfault()
        probe(hanging)
        with pytest.raises(CallTimedOut):
            Submission(hanging, "candidate").module("probe").hang()
        crashing.next_check()
        probe(crashing)
    finally:
        crashing.close()
        hanging.close()


def test_the_grader_stops_a_forked_worker_at_once_from_another_thread(serving):
    """`Sandbox.cancel` lets go of the lifeline: the keeper kills the worker, and the call it
    was in (its limit ten minutes away) fails as a crash."""
    hanging = worker(serving)
    try:
        module = probe(hanging)
        threading.Timer(1.0, hanging.cancel).start()
        with pytest.raises(WorkerCrashed):
            module.hang()
    finally:
        hanging.close()


def test_the_answer_keys_workers_come_from_a_zygote_a_candidates_worker_cannot_see(serving):
    candidate = worker(serving)
    key_files = {"probe.py": PROBE, "key.py": f"SECRET = {MARKER!r}\n".encode()}
    answer_key = worker(serving, answer_key=True, **key_files)
    try:
        key = probe(answer_key)
        module = probe(candidate)
        assert len([made for made in serving.zygotes.values() if made is not None]) == 2
        key_file = f"{key.own_folder()}/key.py"
        assert MARKER in key.read(key_file)
        elsewhere = "package/submission/key.py"
        for path in (key_file, f"{answer_key.home}/{elsewhere}",
                     f"/sandbox/workers/{answer_key.home.name}/{elsewhere}"):  # fmt: skip
            assert module.read(path) == "FileNotFoundError", path
    finally:
        candidate.close()
        answer_key.close()


def test_a_worker_starts_as_its_own_process_where_no_zygote_serves(zygotes, monkeypatch):
    def gone(*args: object) -> None:
        raise ZygoteGone("no zygote here")

    monkeypatch.setattr(Zygote, "__init__", gone)
    sandbox = worker(zygotes)
    try:
        assert Submission(sandbox, "candidate").module("probe").pids()[0] > 0
        assert not isinstance(sandbox.process, ForkedWorker)
    finally:
        sandbox.close()


HOLD_LOCK = """
import fcntl, sys
with open(sys.argv[1], "rb") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()
"""

# A warm process (as the tests' grader server is): it starts a zygote, then forks two gradings
# that fork their workers from it, at the same time, and then forks one more itself.
SHARED = """
import json, os, traceback
from grader.sandbox import zygotes
from grader.sandbox.isolation import probe as isolation
from grader.sandbox.zygotes import CANDIDATE, ForkedWorker, Zygotes
from tests.grader.sandbox.test_zygotes import CPU_PART, probe, worker

warm = zygotes.WARM = Zygotes(isolation("auto"), 600.0)
zygote = warm.get(CANDIDATE, CPU_PART)
lock = f"/proc/{os.getpid()}/fd/{zygote.lock_file.fileno()}"  # the lock, as this process opens it
go_read, go_write = os.pipe()
children = []
for _ in range(2):
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.read(go_read, 1)
            borrowed = Zygotes.borrowing(warm.isolation, warm.seconds)
            sandboxes = [worker(borrowed) for _ in range(5)]
            modules = [probe(sandbox) for sandbox in sandboxes]
            seen = {"zygote": borrowed.get(CANDIDATE, CPU_PART).pid,
                    "pids": [module.pids() for module in modules],
                    "folders": [sandbox.home.name for sandbox in sandboxes],
                    "seen": [module.listing("/sandbox/workers") for module in modules],
                    "lock": modules[0].read(lock)}
            for sandbox in sandboxes:
                sandbox.close()
            borrowed.close()
            os.write(write, json.dumps(seen).encode())
        except BaseException:
            traceback.print_exc()
        os._exit(0)
    os.close(write)
    children.append((child, read))
os.write(go_write, b"go")
seen = []
for child, read in children:
    seen.append(json.loads(os.read(read, 1 << 16)))
    os.waitpid(child, 0)
last = worker(warm)
probe(last)
last.close()
print(json.dumps({"zygote": zygote.pid, "alive": zygote.process.poll() is None, "seen": seen}))
warm.close()
"""


def test_processes_forked_after_a_zygote_started_borrow_it_and_leave_it_running(zygotes):
    """The gradings a warm process forks (`zygotes.WARM`: the tests' grader server's) fork their
    workers from its zygote, at the same time, each worker its own and alone, and leave the
    zygote to serve on; no worker sees the lock they take turns by."""
    done = subprocess.run([sys.executable, "-c", SHARED], cwd=KIT_ROOT, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    shared = json.loads(done.stdout)
    assert shared["alive"], "a grading stopped the zygote it borrowed"
    for seen in shared["seen"]:
        assert seen["zygote"] == shared["zygote"], "a grading started a zygote of its own"
        assert seen["pids"] == [[2, 1]] * 5
        assert seen["seen"] == [[]] * 5  # no worker's folder, its own included
        assert seen["lock"] == "FileNotFoundError"
    folders = [folder for seen in shared["seen"] for folder in seen["folders"]]
    assert len(set(folders)) == 10, "two workers shared a folder"


# A process started with a zygote's descriptors (as a drive starts its gradings, `drive/local.py`):
# it borrows the zygote its starter lent it (`zygotes.inherit`) and forks two workers from it.
INHERITS = """
import json, os
from grader.sandbox import zygotes
from grader.sandbox.isolation import probe as isolation
from grader.sandbox.zygotes import CANDIDATE, HANDED_DOWN, Zygotes
from tests.grader.sandbox.test_zygotes import CPU_PART, probe, worker

zygotes.inherit()
borrowed = Zygotes.borrowing(isolation("auto"), 600.0)
sandboxes = [worker(borrowed) for _ in range(2)]
modules = [probe(sandbox) for sandbox in sandboxes]
zygote = borrowed.get(CANDIDATE, CPU_PART)
lock = f"/proc/{os.getpid()}/fd/{zygote.lock_file.fileno()}"  # as this process opens it
seen = {"zygote": zygote.pid, "left": HANDED_DOWN in os.environ,
        "pids": [module.pids() for module in modules],
        "seen": [module.listing("/sandbox/workers") for module in modules],
        "lock": modules[0].read(lock)}
for sandbox in sandboxes:
    sandbox.close()
borrowed.close()
print(json.dumps(seen))
"""


def test_a_process_started_with_a_zygotes_descriptors_borrows_it_and_leaves_it_running(zygotes):
    """The gradings a drive starts (`Zygotes.handed_down`, `zygotes.inherit`) fork their workers
    from the drive's zygote, each worker its own and alone; the variable that described it is
    gone from their environment, and the zygote serves on once they end."""
    lender = zygotes.get(CANDIDATE, CPU_PART)
    variables, fds = zygotes.handed_down()
    done = subprocess.run([sys.executable, "-c", INHERITS], cwd=KIT_ROOT, capture_output=True,
                          text=True, timeout=600, check=False, env=os.environ | variables,
                          pass_fds=fds)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["zygote"] == lender.pid, "the process started a zygote of its own"
    assert not seen["left"]
    assert seen["pids"] == [[2, 1]] * 2
    assert seen["seen"] == [[]] * 2  # no worker's folder, its own included
    assert seen["lock"] == "FileNotFoundError"
    assert lender.process.poll() is None, "the process stopped the zygote it borrowed"
    last = worker(zygotes)
    probe(last)
    last.close()


def test_a_zygote_that_failed_is_not_tried_again_by_a_process_it_is_lent_to():
    """A grading process beside (`Zygotes.lent`) borrows what the grading has: a zygote that did
    not start, or did not answer, is not started again there, and nothing borrowed is closed."""
    lender = Zygotes(isolation.Isolation("/usr/bin/bwrap"), 600.0)
    broken = Zygote.__new__(Zygote)
    broken.broken = True
    keys = [(side, environment_key(CPU_PART)) for side in ("candidate", "answer key")]
    lender.zygotes = {keys[0]: None, keys[1]: broken}
    lent = lender.lent()
    assert lent.get("candidate", CPU_PART) is lent.get("answer key", CPU_PART) is None
    assert lent.zygotes == dict.fromkeys(keys)  # none started
    assert lent.borrowed == set(keys)


def test_a_zygote_forks_only_workers_of_the_environment_it_started_in(monkeypatch):
    """Its key is the workers' whole environment, not only a part's own variables: a grading
    that sees another GPU, say, starts a zygote of its own rather than borrow one."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    plain = environment_key(CPU_PART)
    assert plain != environment_key({})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert environment_key(CPU_PART) != plain


def bare_zygote(seconds: float) -> tuple[Zygote, socket.socket]:
    """A `Zygote` with no process behind it, and the other end of its control socket."""
    zygote = Zygote.__new__(Zygote)
    zygote.lock, zygote.seconds, zygote.process = threading.Lock(), seconds, object()
    zygote.lock_file = tempfile.TemporaryFile()  # noqa: SIM115 (the test closes it)
    zygote.broken = False
    zygote.ids = iter(["b1"])
    zygote.socket, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return zygote, inside


def test_a_late_reply_to_an_earlier_request_is_not_taken_for_the_next_ones():
    """Nor a reply to another process's request: each has an id of its own."""
    zygote, inside = bare_zygote(30.0)
    with inside:
        inside.send(b'{"id": "a1", "pid": 111}')  # to a request that timed out
        inside.send(b'{"id": "f9", "pid": 333}')  # to another process's
        inside.send(b'{"id": "b1", "pid": 222}')
        assert zygote.ask({}, [])["pid"] == 222
    zygote.socket.close()
    zygote.lock_file.close()


def test_a_closed_zygote_is_gone_for_a_thread_that_asks_it_afterwards():
    """A part's thread that asks after the grading closed its zygotes (Ctrl-C, the grading's
    end) gets `ZygoteGone`, which starts its worker afresh, not an error of its own."""
    zygote, inside = bare_zygote(1.0)
    inside.close()
    zygote.socket.close()
    zygote.lock_file.close()
    with pytest.raises(ZygoteGone, match="lock is gone"):
        zygote.ask({}, [])


def test_a_process_waits_its_turn_and_a_busy_zygote_is_not_broken():
    """Another process that holds the zygote's lock (a grading asking for its worker) makes
    this one wait; past the zygote's time it starts its worker afresh, and the zygote, busy but
    not broken, serves its next request."""
    zygote, inside = bare_zygote(1.0)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, f"/proc/{os.getpid()}/fd/{zygote.lock_file.fileno()}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(ZygoteGone, match="busy"):
            zygote.ask({}, [])
        assert not zygote.broken
    finally:
        holder.kill()
        holder.wait()
    with inside:
        inside.send(b'{"id": "b1", "pid": 222}')  # its first request's id: none was sent
        assert zygote.ask({}, [])["pid"] == 222
    zygote.socket.close()
    zygote.lock_file.close()


def test_only_a_worker_that_uses_torch_is_forked(zygotes):
    """A worker whose files import neither torch nor Triton starts afresh (cheaply, with no
    torch in its address space), and starts no zygote."""
    plain = worker(zygotes, **{"probe.py": PROBE.replace(b"import torch\n", b"")})
    try:
        assert Submission(plain, "candidate").module("probe").pids()[0] > 0
        assert not isinstance(plain.process, ForkedWorker)
        assert zygotes.zygotes == {}
    finally:
        plain.close()
    files = {
        "kernel.py": b"import triton.language as tl\n",
        "manager.py": b"def f():\n    from torch import nn\n",
        "allocator.py": b"import os\nimport torchvision_like\n",
        "broken.py": b"def (\n",
        "slow_to_parse.py": b"x = f'" + b"{1}" * 100_000 + b"'\n",
    }
    assert uses_torch({"kernel.py": files["kernel.py"]})
    assert uses_torch({"manager.py": files["manager.py"]})
    others = ("allocator.py", "broken.py", "slow_to_parse.py")
    assert not uses_torch({name: files[name] for name in others})


def test_a_worker_that_runs_a_kit_tool_is_forked_whatever_its_files(serving):
    """A kit tool imports torch: a worker started to run one (the engine checks') is forked
    even where its files import no torch and its first request imports one of them (as the
    prefix-caching check's does)."""
    plain = PROBE.replace(b"import torch\n", b"")
    runner = worker(serving, runs_tool=True, **{"probe.py": plain})
    try:
        probe(runner)
    finally:
        runner.close()


def test_a_launched_zygote_serves_the_first_worker_and_one_never_used_is_stopped(zygotes):
    """A zygote launched before it is needed (`Zygotes.launch`, as `python -m grader` does
    while it imports torch) is the one a worker's first start waits for and is forked from, not
    a second; one launched and never waited for is stopped with the others."""
    key = (CANDIDATE, environment_key(CPU_PART))
    zygotes.launch([(CANDIDATE, CPU_PART), (CANDIDATE, CPU_PART)])
    launched = zygotes.launched[key]
    assert list(zygotes.launched) == [key]
    sandbox = worker(zygotes)
    try:
        probe(sandbox)
        assert zygotes.zygotes == {key: launched}
        assert zygotes.launched == {}
    finally:
        sandbox.close()
    unused = Zygotes(zygotes.isolation, zygotes.seconds)
    unused.launch([(ANSWER_KEY, CPU_PART)])
    process = next(iter(unused.launched.values())).process
    unused.close()
    assert process.poll() is not None, "the zygote launched and never used still runs"
    assert unused.launched == {}


def test_a_launched_zygote_is_lent_once_ready(zygotes):
    """A process forked while a zygote is still starting (`grade.fork_beside`) borrows it: the
    lending waits for it."""
    key = (CANDIDATE, environment_key(CPU_PART))
    zygotes.launch([(CANDIDATE, CPU_PART)])
    launched = zygotes.launched[key]
    lent = zygotes.lent()
    assert lent.zygotes == {key: launched}
    assert launched.pid > 0
    lent.close()  # a borrower stops none of them
    assert launched.process is not None
