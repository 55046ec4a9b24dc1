"""Worker processes: start one, send it requests, and survive whatever it does.

A `Sandbox` owns at most one live worker (`worker.py`) at a time. The worker runs in namespaces
of its own (`isolation.py`) where the system allows it, with its own copy of the submission's
files, an environment stripped to what torch and triton need, a memory limit (`memory_rlimit`),
and its own process group; in its sandbox, every process it starts dies with it.
Every request has a deadline: the earliest of the per-call limit, the part's wall-clock budget
and the submission's (`submission_deadline`), checked on every read. A reply is bounded in size;
a worker that closes its channel, sends garbage or floods it fails the check as the submission's
fault, and is replaced. Its log (its stderr) is a file this process opened itself and reads
through its own descriptor, bounded.

Failures of the worker itself (a crash, a timeout) raise `SubmissionFailure`, a `BaseException`:
it ends the check at once (hypothesis does not shrink through it) and the check fails with its
message. The failure repeats for the rest of the check; the next check starts a fresh worker.
"""

import contextlib
import glob
import json
import math
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.parts import PARTS
from grader.said import Said, from_record, message_of, said
from grader.sandbox import isolation, seccomp
from grader.sandbox.isolation import Isolation, probe
from grader.sandbox.launch import (
    copy_kit,
    die_with_the_grader,
    open_to,
    site_packages,
    tool_paths,
    worker_environment,
)
from grader.sandbox.zygotes import (
    ANSWER_KEY,
    CANDIDATE,
    ForkedWorker,
    Zygote,
    ZygoteGone,
    Zygotes,
    children,
    grading_sides,
    uses_torch,
)
from grader.text import clean

LOG_TAIL_BYTES = 3000
REPLY_BYTES = 64 << 20  # the largest reply a worker may send
# The most values a reply may hold, counted in its bytes before it is decoded (an honest one of
# the kit's checks holds up to 200,000 ids, or a thousand lists): no reply the grading process
# decodes takes it past a few hundred MiB.
REPLY_VALUES, REPLY_CONTAINERS = 2_000_000, 100_000
# A read of the worker's pipe: a Linux pipe's default capacity (a read returns no more). Each read
# allocates this much first: 1 MiB cost about 30 us a round trip, a third of a call's own cost.
READ_BYTES = 1 << 16
EVENTS_PER_REPLY, EVENT_CHARS = 20, 300  # integrity events a reply may add, and their length
EVENTS_SHOWN = 10  # distinct integrity events a part's report lists; the others are counted
# In each message of a call that hung (`HANG`, `HUNG`, `PART_HUNG`): `grade.hung_parts` looks for
# it, and tests/grader/sandbox/test_process.py checks that each holds it.
DID_NOT_RETURN = "did not return in time"
HANG = said("the call did not return in time (an infinite loop?)")
HUNG = said("not called again: a call of it did not return in time earlier in this grading")
# Calls of a part that may hang (each a different request) before its other calls fail at once.
HANGS_PER_PART = 2
READS = ("getattr", "getattrs", "len")  # batch requests that read an attribute, calling nothing
PART_HUNG = said(
    "not called: {count} calls in this part did not return in time already", count=HANGS_PER_PART
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# Whether a worker's CPU time can be read from outside it (`Sandbox.cpu_seconds`): Linux.
CPU_TIME_READABLE = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


@dataclass(frozen=True)
class Limits:
    """What a worker may use. Seconds are wall-clock; memory bounds the address space, or the
    data size of a worker that may use CUDA (`memory_rlimit`)."""

    memory_bytes: int = 8 << 30
    call_seconds: float = 30.0
    import_seconds: float = 120.0
    part_seconds: float = 600.0
    file_bytes: int = 256 << 20
    submission_seconds: float | None = None  # the whole grading's; None: its profile's


@dataclass
class Events:
    """Integrity events the workers sent, bounded however many they send: the first
    `EVENTS_SHOWN` distinct ones, and how many came after them (each, repeats included; a
    repeat of a shown one is not counted)."""

    shown: list[str] = field(default_factory=list)
    others: int = 0

    def add(self, event: str) -> None:
        if event in self.shown:
            return
        if len(self.shown) < EVENTS_SHOWN:
            self.shown.append(event)
        else:
            self.others += 1

    def merge(self, other: "Events") -> None:
        for event in other.shown:
            self.add(event)
        self.others += other.others


class Stoppable:
    """Workers that another thread may stop at once (`stop`), one added later included."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sandboxes: list[Sandbox] = []
        self.stopped = False

    def add(self, sandbox: "Sandbox") -> None:
        with self.lock:
            self.sandboxes.append(sandbox)
            if self.stopped:
                sandbox.cancel()

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            for sandbox in self.sandboxes:
                sandbox.cancel()


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


class NotCalled(CallTimedOut):
    """The request was never sent: a call of its kind, or too many of its part's, timed out."""


class BadReply(SubmissionFailure):
    """The worker's channel carried what no worker of the kit sends: garbage, or a flood."""

    label = "broke the channel"


def heard(data: object, limit: int) -> str:
    """What a worker said, as data (`data`: text, or a message's record, `said.record`): its
    text cleaned and cut to `limit`; a message where its record is one and fits whole."""
    message = from_record(data, limit)
    if message is not None and clean(message, None) == message:
        return message
    return clean(str(data), limit)


def described(failure: SubmissionFailure) -> Said:
    """What a check says of `failure`: its label, then its message."""
    message = message_of(failure)
    match failure:
        case NotSubmitted():
            return said("not submitted: {failure}", failure=message)
        case NotImplementedInSubmission():
            return said("not implemented: {failure}", failure=message)
        case ImportFailed():
            return said("import failed: {failure}", failure=message)
        case WorkerCrashed():
            return said("crashed: {failure}", failure=message)
        case CallTimedOut():
            return said("timed out: {failure}", failure=message)
        case BadReply():
            return said("broke the channel: {failure}", failure=message)
    return said("failed: {failure}", failure=message)


NO_CUDA = {"CUDA_VISIBLE_DEVICES": ""}  # a worker's environment without the GPU
INTERPRETED = {"TRITON_INTERPRET": "1"}  # every worker's where there is none: Triton's interpreter
# The device files a GPU's driver makes (NVIDIA's, ROCm's, and WSL's), torch's way to the GPU.
GPU_DEVICE_FILES = ("/dev/nvidia*", "/dev/kfd", "/dev/dxg")


def surely_no_gpu() -> bool:
    """Whether torch can find no GPU here, known without importing torch: no device file of a
    GPU's driver. (Where there is one, only `torch.cuda.is_available()` says.)"""
    return not any(glob.glob(pattern) for pattern in GPU_DEVICE_FILES)


def uses_cuda(extra_env: dict[str, str]) -> bool:
    """Whether a worker may use CUDA: the GPU is not hidden from it and it runs Triton natively."""
    hidden = extra_env.get("CUDA_VISIBLE_DEVICES") == ""
    return not hidden and extra_env.get("TRITON_INTERPRET") != "1"


def may_not_fork(extra_env: dict[str, str]) -> bool:
    """Whether a worker may start no process (`seccomp.py`): unless it may use CUDA, where Triton
    runs a compiler; on Linux on x86-64 and arm64 (elsewhere the filter cannot run)."""
    return not uses_cuda(extra_env) and seccomp.supported()


def surely_started_zygotes(parts: Iterable[str]) -> list[tuple[str, dict[str, str]]]:
    """The zygotes, by side and workers' environment, that a grading of `parts` surely starts:
    where every part is chosen, there is no GPU (its workers run under Triton's interpreter) and
    workers may be forked; else none (the grading starts those it needs, when it needs them)."""
    if set(parts) == set(PARTS) and surely_no_gpu() and may_not_fork(INTERPRETED):
        return [(side, INTERPRETED) for side in grading_sides()]
    return []


def memory_rlimit(extra_env: dict[str, str]) -> int:
    """The limit that bounds a worker's memory: its whole address space, unless the worker may
    use CUDA; then its private writable memory, because CUDA reserves far more address space than
    it uses, in mappings that are not writable and so not counted by RLIMIT_DATA (shared mappings
    escape that limit: the scan flags mmap)."""
    return resource.RLIMIT_DATA if uses_cuda(extra_env) else resource.RLIMIT_AS


def hang_key(message: dict) -> tuple:
    """What a request asks for, whatever its arguments: its operation, the type of the object it
    reaches (sent beside the handle: the worker ignores it), and the names it reaches (a batch:
    each of its requests')."""
    if message["op"] == "batch":
        return ("batch", *map(hang_key, message["requests"]))
    named = ("type", "module", "tool", "name")
    listed = tuple(tuple(message.get(field, ())) for field in ("names", "modules"))
    return (message["op"], *(message.get(field) for field in named), *listed)


def hung_keys(message: dict) -> list[tuple]:
    """The kinds a request that did not return in time leaves hung: its own `hang_key`; a batch
    whose one method call comes with reads of attributes only leaves that call's too (the call is
    taken for what hung), so that the method, asked again alone or in a batch, is refused."""
    requests = batched(message)
    ops = [request["op"] for request in requests]
    if ops.count("call") == 1 and all(op in READS for op in ops if op != "call"):
        return [hang_key(message), hang_key(requests[ops.index("call")])]
    return [hang_key(message)]


def asks_for_hung(message: dict, hung: set[tuple]) -> bool:
    """Whether `message`, or any request of a batch, is of a kind that did not return in time."""
    return any(hang_key(each) in hung for each in (message, *batched(message)))


def batched(message: dict) -> list[dict]:
    """The requests of a batch; none of any other request."""
    return message["requests"] if message["op"] == "batch" else []


class Sandbox:
    """A worker: lazily started, restarted after a crash, stopped by `close()`; its `part_deadline`
    is the budget of the part it now serves. A request that did not return in time is not waited
    for again: later requests of its kind (`hung_keys`, `hang_key`; a batch that holds one is
    refused too) to this worker fail at once, and once `HANGS_PER_PART` requests of a part did not
    return in time, all its others do (unless `remembers_hangs` is off: the answer key's). Where
    its files hold stand-ins of the kit's modules, the kit's worker that serves them (`kit`)
    starts and stops with it."""

    def __init__(
        self,
        files: dict[str, bytes],
        limits: Limits,
        extra_env: dict[str, str],
        deadline: float,
        isolation: Isolation | None = None,
        remembers_hangs: bool = True,
        kit_files: dict[str, bytes] | None = None,
        serves_kit: bool = False,
        zygotes: Zygotes | None = None,
        answer_key: bool = False,
        runs_tool: bool = False,
    ) -> None:
        self.files = files
        self.limits = limits
        self.extra_env = extra_env
        self.part_deadline = deadline
        self.submission_deadline = math.inf  # when the whole grading's budget is spent
        self.hung: set[tuple] = set()  # `hang_key`s of the requests that timed out
        self.remembers_hangs = remembers_hangs  # not the answer key's: its calls are always tried
        # The current part's requests that timed out, in all of its workers (`WorkerFixtures`).
        self.part_hangs: list[tuple] = []
        self.isolation = isolation or probe()  # "auto" unless the grader chose
        self.events = Events()  # of the current check
        self.failure: SubmissionFailure | None = None
        self.process: subprocess.Popen | None = None
        self.home: Path | None = None
        self.pending_release: list[int] = []
        self.generation = 0  # which worker this is, counting each start: a handle is its own
        self.chunks: list[bytes] = []
        self.cpu_mark: float | None = None  # `cpu_seconds` at the end of the last timed call
        # The kit's worker that serves the stand-ins among `files` (`kit_server.py`): the answer
        # key's `kit_files`, started and stopped with this one.
        self.zygotes = zygotes  # the grading's, to fork from (`zygote`)
        self.answer_key = answer_key  # whether its files are the answer key's
        self.kit = (
            Sandbox(kit_files, limits, extra_env, deadline, isolation, serves_kit=True,
                    zygotes=zygotes)
            if kit_files
            else None
        )  # fmt: skip
        self.serves_kit = serves_kit  # whether this is such a worker
        self.runs_tool = runs_tool  # whether it is started to run a kit tool (`zygote`)
        self.cancelled = False  # by `cancel`: no request is sent again

    def cancel(self) -> None:
        """From another thread: stop the worker now, whatever it is doing; the request it serves
        fails as a crash and no other is sent (a worker that `start` makes meanwhile stops
        itself)."""
        self.cancelled = True
        self.kill()

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, channel: tuple[int, int] | None = None, first: dict | None = None) -> None:
        """Start the worker, talking on pipes to this process or, for the kit's worker, on
        `channel` (its stdin and stdout: pipes to the candidate's worker): forked from its
        side's zygote where it may be (`zygote`), else as a process of its own. `first`: the
        request it starts for."""
        zygote = self.zygote(first)
        if zygote is not None:
            try:
                self.fork_from(zygote, channel)
            except ZygoteGone:
                self.close()
            else:
                return self.started()
        self.home = Path(tempfile.mkdtemp(prefix="grader-worker-"))
        self.write_package()
        copy_kit(self.home)
        if not self.isolation.isolated:
            (self.home / "cwd").mkdir()
        elif isolation.worker_user() is not None:
            open_to(self.home)
        self.log = tempfile.TemporaryFile(prefix="grader-worker-log-")  # noqa: SIM115 (close())
        kit_link = self.start_kit() if self.kit is not None else ()
        try:
            self.process = subprocess.Popen(
                self.command(kit_link),
                stdin=channel[0] if channel else subprocess.PIPE,
                stdout=channel[1] if channel else subprocess.PIPE,
                stderr=self.log,
                cwd=self.home if self.isolation.isolated else self.home / "cwd",
                env=worker_environment(self.cwd, self.extra_env),
                preexec_fn=self.apply_limits,
                start_new_session=True,
                pass_fds=kit_link,
            )
        except BaseException:  # no worker: nothing of it left behind, the kit's worker included
            self.log.close()
            self.close()
            raise
        finally:
            for fd in kit_link:
                os.close(fd)
        return self.started()

    def started(self) -> None:
        if self.process.stdin is not None:  # `send` never waits past a deadline
            os.set_blocking(self.process.stdin.fileno(), False)
        if self.cancelled:  # `cancel` ran while it started
            self.kill()
        self.chunks = []
        self.pending_release = []
        self.generation += 1

    def write_package(self) -> None:
        """The worker's copy of its files, as the package its worker imports them from."""
        package = self.home / "package" / "submission"
        package.mkdir(parents=True)
        (package / "__init__.py").write_bytes(b"")
        for name, content in self.files.items():
            (package / name).write_bytes(content)

    def zygote(self, first: dict | None) -> Zygote | None:
        """The zygote this worker is forked from: its side's (the answer key's for the reference
        and the kit's worker), where the grading keeps zygotes, the worker may start no process
        (`may_not_fork`) and it uses torch: a file of its imports it (`zygotes.uses_torch`), or
        it starts for a kit tool (`runs_tool`, or its `first` request) or a kernel's launch."""
        if self.zygotes is None or not may_not_fork(self.extra_env):
            return None
        requests = first.get("requests", [first]) if first else []
        launches = self.runs_tool or any(
            request.get("op") in ("tool", "launch") for request in requests
        )
        if not launches and not uses_torch(self.files):
            return None
        side = ANSWER_KEY if self.answer_key or self.serves_kit else CANDIDATE
        return self.zygotes.get(side, self.extra_env)

    def fork_from(self, zygote: Zygote, channel: tuple[int, int] | None) -> None:
        """The worker, forked by `zygote` in its sandbox, its files in a folder of its own
        there; raises `ZygoteGone` where the zygote does not fork it."""
        self.home, inside = zygote.new_folder()
        self.write_package()
        if zygote.user is not None:
            open_to(self.home)
        self.log = tempfile.TemporaryFile(prefix="grader-worker-log-")  # noqa: SIM115 (close())
        kit_link = self.start_kit() if self.kit is not None else ()
        pipes = () if channel else (os.pipe(), os.pipe())
        ends = channel or (pipes[0][0], pipes[1][1])
        memory = "AS" if memory_rlimit(self.extra_env) == resource.RLIMIT_AS else "DATA"
        message = {
            "folder": inside,
            "config": self.config(f"{isolation.HOME}/package", zygote.site, zygote.tools, None, ()),
            "env": worker_environment(self.cwd, self.extra_env),
            "limits": {"memory": self.limits.memory_bytes, "memory_kind": memory,
                       "file": self.limits.file_bytes},
        }  # fmt: skip
        streams = (None, None)
        try:
            if pipes:
                streams = (os.fdopen(pipes[0][1], "wb", 0), os.fdopen(pipes[1][0], "rb", 0))
            self.process = zygote.start(message, [*ends, self.log.fileno(), *kit_link], *streams)
        except BaseException:
            for stream in streams:
                if stream is not None:
                    stream.close()
            self.log.close()
            raise
        finally:
            for fd in (*kit_link, *([] if channel else ends)):
                os.close(fd)

    def start_kit(self) -> tuple[int, int]:
        """Start the kit's worker on two new pipes; the ends this worker gets (read, write)."""
        to_kit, from_kit = os.pipe(), os.pipe()
        try:
            self.kit.start(channel=(to_kit[0], from_kit[1]))
        except BaseException:
            os.close(from_kit[0])
            os.close(to_kit[1])
            raise
        finally:
            os.close(to_kit[0])
            os.close(from_kit[1])
        return from_kit[0], to_kit[1]

    @property
    def cwd(self) -> str:
        """The worker's working folder and HOME: the sandbox's tmpfs, or a folder of its own."""
        return isolation.TMP if self.isolation.isolated else str(self.home / "cwd")

    def command(self, kit_link: tuple[int, ...] = ()) -> list[str]:
        """The worker's command line: in bubblewrap, with the paths it sees inside; or plain.
        `kit_link`: its ends of the pipes to the kit's worker, if it has one."""
        if self.isolation.isolated:
            root, site = isolation.HOME, site_packages()
            inside_site = [f"{isolation.SITE}/{number}" for number in range(len(site))]
        else:
            root, inside_site = str(self.home), site_packages()
        tools = tool_paths(self.home, root)
        user = isolation.worker_user() if self.isolation.isolated else None
        config = self.config(f"{root}/package", inside_site, tools, user, kit_link)
        python = isolation.runtime() if self.isolation.isolated else sys.executable
        argv = [python, "-S", "-s", "-P", f"{root}/kit/worker.py", json.dumps(config)]
        if not self.isolation.isolated:
            return argv
        gpu = uses_cuda(self.extra_env)
        return isolation.command(self.isolation, self.home, site, argv, gpu=gpu)

    def config(
        self,
        package_parent: str,
        site: list[str],
        tools: dict[str, str],
        user: int | None,
        kit_link: tuple[int, ...],
    ) -> dict:
        """What the worker is told (`worker.py`), with the paths it sees."""
        return {
            "site": site,
            "package_parent": package_parent,
            "tools": tools,
            "user": user,
            "no_children": may_not_fork(self.extra_env),
            "kit_link": list(kit_link),
            "kit_modules": [Path(name).stem for name in self.files] if self.serves_kit else [],
        }

    def apply_limits(self) -> None:
        """In the child, before it runs the worker (or bubblewrap, which passes them on). Its data
        size is its own too, not the grading process's (`__main__.limit_own_memory`)."""
        die_with_the_grader()
        limits = self.limits
        for memory in {memory_rlimit(self.extra_env), resource.RLIMIT_DATA}:
            resource.setrlimit(memory, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))

    def close(self) -> None:
        """Kill the worker's whole process group and delete its files."""
        if self.process is not None:
            self.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:  # None: the kit's worker's channel
                    stream.close()
            self.log.close()
            self.process = None
        if self.kit is not None:
            self.kit.close()
        if self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None

    def kill(self) -> None:
        """Kill the worker's process group, if it has a worker (read once: `cancel` may run in
        another thread while the one it serves closes it)."""
        process = self.process
        if isinstance(process, ForkedWorker):
            process.kill()
        elif process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

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
        if self.cancelled:
            raise WorkerCrashed(said("the worker was stopped: its result is no longer needed"))
        if self.budget_spent():
            self.failure = CallTimedOut(self.timeout_message())
            raise self.failure
        if self.hung and asks_for_hung(message, self.hung):  # ends the check; the worker,
            raise NotCalled(HUNG)  # idle, serves the next one
        if self.remembers_hangs and len(self.part_hangs) >= HANGS_PER_PART:
            raise NotCalled(PART_HUNG)
        if self.process is None:
            self.start(first=message)
        if self.pending_release:
            message = message | {"release": self.pending_release}
            self.pending_release = []
        deadline = min(time.monotonic() + (seconds or self.limits.call_seconds), self.budget_end())
        try:
            self.send(json.dumps(message).encode() + b"\n", deadline)
            reply = self.parse(self.receive(deadline))
        except SubmissionFailure as failure:
            hung = isinstance(failure, CallTimedOut) and not self.budget_spent()
            if hung and self.remembers_hangs:
                keys = hung_keys(message)
                self.hung.update(keys)
                self.part_hangs.append(keys[0])
            self.fail(failure)
        for event in reply.pop("events", ())[:EVENTS_PER_REPLY]:  # the worker's word: bounded
            self.events.add(heard(event, EVENT_CHARS))
        return reply

    def calls_freely(self) -> bool:
        """Whether a request now is sent whatever it asks: no failure or stop, budget left, and no
        call that did not return in time remembered (`scheduler_trace.judged` judges a kept run in
        place of a live one only then)."""
        return self.failure is None and not (self.cancelled or self.budget_spent() or self.hung)

    def fail(self, failure: SubmissionFailure) -> None:
        """End the check with `failure`; the worker is gone, the next check gets a fresh one."""
        self.failure = failure
        self.close()
        raise failure

    def parse(self, line: bytes) -> dict:
        """A reply as the worker sends it: a JSON object with "ok" or with an "error" dict, of
        at most `REPLY_VALUES` values and `REPLY_CONTAINERS` lists and objects."""
        if (
            line.count(b",") >= REPLY_VALUES
            or line.count(b"[") + line.count(b"{") > REPLY_CONTAINERS
        ):
            raise BadReply(
                said(
                    "the worker sent more than {values} values or {lists} lists in one reply",
                    values=f"{REPLY_VALUES:,}",
                    lists=f"{REPLY_CONTAINERS:,}",
                )
            )
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            reply = None
        valid = (
            isinstance(reply, dict)
            and ("ok" in reply) != ("error" in reply)
            and isinstance(reply.get("error", {}), dict)
            and isinstance(reply.get("events", []), list)
        )
        if not valid:
            raise BadReply(
                said(
                    "the worker's reply is not one the kit's worker sends: {line}",
                    line=f"{line[:80]!r}",
                )
            )
        return reply

    def send(self, data: bytes, deadline: float) -> None:
        """Write `data` to the worker's stdin (non-blocking), waiting for room only where the
        pipe is full."""
        fd = self.process.stdin.fileno()
        while data:
            try:
                data = data[os.write(fd, data[: 1 << 16]) :]
            except BlockingIOError:  # the pipe is full: wait for room, within the deadline
                if not select.select([], [fd], [], self.remaining(deadline))[1]:
                    raise CallTimedOut(self.timeout_message()) from None
            except BrokenPipeError:
                raise self.crash() from None

    def receive(self, deadline: float) -> bytes:
        """One line from the worker, read by chunks: within `deadline` (checked on every read),
        at most `REPLY_BYTES`."""
        fd, size = self.process.stdout.fileno(), sum(map(len, self.chunks))
        while not self.chunks or b"\n" not in self.chunks[-1]:
            if not select.select([fd], [], [], self.remaining(deadline))[0]:
                raise CallTimedOut(self.timeout_message())
            chunk = os.read(fd, READ_BYTES)
            if not chunk:
                raise self.crash()
            self.chunks.append(chunk)
            size += len(chunk)
            if size > REPLY_BYTES and b"\n" not in chunk:
                raise BadReply(
                    said(
                        "the worker sent more than {size} MiB in one reply", size=REPLY_BYTES >> 20
                    )
                )
            if time.monotonic() > deadline and b"\n" not in chunk:
                raise CallTimedOut(self.timeout_message())
        line, _, rest = b"".join(self.chunks).partition(b"\n")
        if len(line) > REPLY_BYTES:
            raise BadReply(
                said("the worker sent more than {size} MiB in one reply", size=REPLY_BYTES >> 20)
            )
        self.chunks = [rest] if rest else []
        return line

    def cpu_seconds(self) -> float:
        """The CPU time the worker's whole process tree has used so far, bubblewrap and all, read
        by this process from the kernel: each process's CPU clock (all its threads, ended ones
        included) plus the children it has waited for. The worker cannot forge it, and a busy
        machine does not stretch it the way it stretches wall-clock time. Needs Linux's /proc
        (`CPU_TIME_READABLE`)."""
        total, pending = 0.0, [self.process.pid]
        while pending:
            pid = pending.pop()
            try:
                total += time.clock_gettime(((~pid) << 3) | 2)  # the process's CPU-time clock
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += (int(stat[13]) + int(stat[14])) / CLOCK_TICKS  # its waited-for children
                pending += children(pid)
            except (OSError, ValueError, IndexError):
                if pid == self.process.pid:
                    raise
                continue  # it ended meanwhile
        return total

    def release(self, handle: int, generation: int) -> None:
        """Let the worker drop an object the grader no longer holds (sent with the next call),
        where `generation` is this worker's: a handle of a worker stopped since (one collected
        after its check ended) names nothing here, or another object of the same number."""
        if generation == self.generation:
            self.pending_release.append(handle)

    # -- what went wrong -------------------------------------------------------------------------

    def remaining(self, deadline: float) -> float:
        return max(0.0, deadline - time.monotonic())

    def budget_end(self) -> float:
        return min(self.part_deadline, self.submission_deadline)

    def budget_spent(self) -> bool:
        return time.monotonic() >= self.budget_end()

    def timeout_message(self) -> str:
        if time.monotonic() >= self.submission_deadline:
            return said(
                "the submission's time budget ({seconds} s) is spent",
                seconds=f"{self.limits.submission_seconds:.0f}",
            )
        if self.budget_spent():
            return said(
                "the part's time budget ({seconds} s) is spent",
                seconds=f"{self.limits.part_seconds:.0f}",
            )
        return HANG

    def crash(self) -> WorkerCrashed:
        """The worker closed its channel: its exit status (it is killed if it lingers)."""
        try:
            status = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill()
            return WorkerCrashed(
                said("the worker closed its reply channel{tail}", tail=self.log_tail())
            )
        if self.isolation.isolated and 128 < status < 128 + signal.NSIG:
            status = -(status - 128)  # bubblewrap exits 128 + N when the worker dies of signal N
        if status < 0:
            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = str(-status)
            how = (
                said("was killed by signal {signal} (out of memory?)", signal=name)
                if -status == signal.SIGKILL
                else said("was killed by signal {signal}", signal=name)
            )
        else:
            how = said("exited with status {status}", status=status)
        return WorkerCrashed(said("the worker process {how}{tail}", how=how, tail=self.log_tail()))

    def log_tail(self) -> str:
        """The end of the worker's log, read through this process's own descriptor."""
        fd = self.log.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, LOG_TAIL_BYTES, max(0, size - LOG_TAIL_BYTES))
        text = clean(data.decode(errors="replace").strip(), LOG_TAIL_BYTES)
        return said("; its last output:\n{output}", output=text) if text else ""
