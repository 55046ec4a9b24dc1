"""Worker processes: start one for a part, send it requests, and survive whatever it does.

A `Sandbox` owns at most one live worker (`worker.py`) at a time. The worker gets its own copy of
the submission's files, a temp working directory, an environment stripped to what torch and
triton need, a memory limit (`memory_rlimit`), and its own process group so that a kill takes
every child.
Every request has a deadline: the earlier of the per-call limit and the part's wall-clock budget.

Failures of the worker itself (a crash, a timeout) raise `SubmissionFailure`, a `BaseException`:
it ends the check at once (hypothesis does not shrink through it) and the check fails with its
message. The failure repeats for the rest of the check; the next check starts a fresh worker.
"""

import contextlib
import ctypes
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import worker

WORKER_SCRIPT = Path(worker.__file__)
KERNELS_DIR = Path(__file__).resolve().parent.parent / "kernels"
# The kit's standalone helpers (torch only, no kit imports) that checks may run in the worker
# (`Submission.tool`): each is copied into the worker's folder, never imported from the kit.
TOOLS = {"gpu_timing": KERNELS_DIR / "gpu_timing.py", "engine": KERNELS_DIR / "engine.py"}
LOG_TAIL_CHARS = 3000


@dataclass(frozen=True)
class Limits:
    """What a worker may use. Seconds are wall-clock; memory bounds the address space, or the
    data size of a worker that may use CUDA (`memory_rlimit`)."""

    memory_bytes: int = 8 << 30
    call_seconds: float = 30.0
    import_seconds: float = 120.0
    part_seconds: float = 600.0
    file_bytes: int = 256 << 20


class SubmissionFailure(BaseException):
    """The submission made the check impossible to finish: not submitted, crashed, timed out..."""

    label = "failed"


class NotSubmitted(SubmissionFailure):
    label = "not submitted"


class NotImplementedInSubmission(SubmissionFailure):
    label = "not implemented"


class ImportFailed(SubmissionFailure):
    label = "import failed"


class WorkerCrashed(SubmissionFailure):
    label = "crashed"


class CallTimedOut(SubmissionFailure):
    label = "timed out"


def worker_environment(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """A minimal environment: no PYTHONPATH, no CI, no tokens; one thread; a fixed hash seed."""
    env = {
        "PATH": os.defpath,
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TRITON_CACHE_DIR": str(home / ".triton"),
    }
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env | extra


def die_with_the_grader() -> None:
    """In the worker, before it runs anything: be killed when the grading process dies
    (Linux's parent-death signal), so that a grader stopped by Ctrl-C leaves no worker spinning."""
    if sys.platform == "linux":
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


NO_CUDA = {"CUDA_VISIBLE_DEVICES": ""}  # a worker's environment without the GPU


def memory_rlimit(extra_env: dict[str, str]) -> int:
    """The limit that bounds a worker's memory: its whole address space, unless the worker may
    use CUDA (neither hidden from it nor interpreting Triton); then its private writable memory,
    because CUDA reserves far more address space than it uses, in mappings that are not writable
    and so not counted by RLIMIT_DATA (shared mappings escape that limit: the scan flags mmap)."""
    hidden = extra_env.get("CUDA_VISIBLE_DEVICES") == ""
    uses_cuda = not hidden and extra_env.get("TRITON_INTERPRET") != "1"
    return resource.RLIMIT_DATA if uses_cuda else resource.RLIMIT_AS


def site_packages() -> list[str]:
    """Where this interpreter's third-party packages (torch, triton) live, without `.pth` files."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


class Sandbox:
    """The worker of one part: lazily started, restarted after a crash, stopped by `close()`."""

    def __init__(
        self, files: dict[str, bytes], limits: Limits, extra_env: dict[str, str], deadline: float
    ) -> None:
        self.files = files
        self.limits = limits
        self.extra_env = extra_env
        self.part_deadline = deadline
        self.events: list[str] = []
        self.failure: SubmissionFailure | None = None
        self.process: subprocess.Popen | None = None
        self.home: Path | None = None
        self.pending_release: list[int] = []
        self.buffer = b""

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="grader-worker-"))
        package = self.home / "package" / worker.PACKAGE
        package.mkdir(parents=True)
        (package / "__init__.py").write_bytes(b"")
        for name, content in self.files.items():
            (package / name).write_bytes(content)
        cwd = self.home / "cwd"
        cwd.mkdir()
        tools = self.home / "tools"
        tools.mkdir()
        copies = {}
        for name, path in TOOLS.items():
            if path.is_file():  # the candidate bundle may leave one out
                copies[name] = str(shutil.copyfile(path, tools / path.name))
        config = {"site": site_packages(), "package_parent": str(package.parent), "tools": copies}
        limits = self.limits

        def apply_limits() -> None:
            die_with_the_grader()
            memory = memory_rlimit(self.extra_env)
            resource.setrlimit(memory, (limits.memory_bytes, limits.memory_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))

        self.log = open(self.home / "worker.log", "wb")  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            [sys.executable, "-S", "-s", "-P", str(WORKER_SCRIPT), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=cwd,
            env=worker_environment(cwd, self.extra_env),
            preexec_fn=apply_limits,
            start_new_session=True,
        )
        self.buffer = b""
        self.pending_release = []

    def close(self) -> None:
        """Kill the worker's whole process group and delete its files."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                stream.close()
            self.log.close()
            self.process = None
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def next_check(self) -> None:
        """Forget the previous check's crash or timeout: the next call starts a fresh worker."""
        if self.failure is not None:
            self.failure = None
            self.close()

    # -- requests --------------------------------------------------------------------------------

    def request(self, message: dict, seconds: float | None = None) -> Any:
        """Send one request; its reply: `{"ok": value}` or `{"error": exception info}`."""
        if self.failure is not None:
            raise self.failure
        if self.budget_spent():
            self.failure = CallTimedOut(self.timeout_message())
            raise self.failure
        if self.process is None:
            self.start()
        if self.pending_release:
            message = message | {"release": self.pending_release}
            self.pending_release = []
        deadline = min(time.monotonic() + (seconds or self.limits.call_seconds), self.part_deadline)
        try:
            self.send(json.dumps(message).encode() + b"\n", deadline)
            reply = json.loads(self.receive(deadline))
        except SubmissionFailure as failure:
            self.failure = failure
            self.close()
            raise
        self.events.extend(str(event) for event in reply.pop("events", ()))
        return reply

    def send(self, data: bytes, deadline: float) -> None:
        fd = self.process.stdin.fileno()
        while data:
            if not select.select([], [fd], [], max(0.0, deadline - time.monotonic()))[1]:
                raise CallTimedOut(self.timeout_message())
            try:
                data = data[os.write(fd, data[: 1 << 16]) :]
            except BrokenPipeError:
                raise self.crash() from None

    def receive(self, deadline: float) -> bytes:
        fd = self.process.stdout.fileno()
        while b"\n" not in self.buffer:
            if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                raise CallTimedOut(self.timeout_message())
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise self.crash()
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def release(self, handle: int) -> None:
        """Let the worker drop an object the grader no longer holds (sent with the next call)."""
        self.pending_release.append(handle)

    # -- what went wrong -------------------------------------------------------------------------

    def budget_spent(self) -> bool:
        return time.monotonic() >= self.part_deadline

    def timeout_message(self) -> str:
        if self.budget_spent():
            return f"the part's time budget ({self.limits.part_seconds:.0f} s) is spent"
        return "the call did not return in time (an infinite loop?)"

    def crash(self) -> WorkerCrashed:
        status = self.process.wait()
        if status < 0:
            how = f"was killed by signal {signal.Signals(-status).name}"
            if -status == signal.SIGKILL:
                how += " (out of memory?)"
        else:
            how = f"exited with status {status}"
        return WorkerCrashed(f"the worker process {how}{self.log_tail()}")

    def log_tail(self) -> str:
        self.log.flush()
        text = (self.home / "worker.log").read_bytes()[-LOG_TAIL_CHARS:].decode(errors="replace")
        return f"; its last output:\n{text.strip()}" if text.strip() else ""
