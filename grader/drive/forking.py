"""A drive's gradings forked from one warm process instead of each started afresh.

`python -m grader ENTRY ...` spends about 1.6 s of CPU before it grades: the interpreter
starts and imports torch, pytest and hypothesis. A drive pays that once. `Forker.start`, called
while the drive has one thread, forks a server that does once what each grading would do first
(`prepare_gradings`: the grader's imports, its templates compiled) and then, for each grading
(`Forker.begin`), forks a child that runs `python -m grader ARGV` as that command would
(`runpy`, `__main__` included): in the kit's root, with exactly the environment and the
descriptors a fresh one would get (`env`; `keep`, the lent zygotes'), stdin empty, stdout and
stderr into its log file, in a process group of its own (killed whole on a timeout),
dying with the server, which dies with the drive.

The server forks from its one Python thread; requests and replies are JSON lines on two pipes
(`{"id", "argv", "env", "keep", "log"}`; `{"id", "pid"}`, then `{"id", "status"}`, a signal's
death as a negative status). A grading the server could not fork gets status 1 and the reason in
its log, and the server goes on; where the server itself dies, the drive grades afresh.

Not where a GPU may be (`surely_no_gpu`): a process that has asked CUDA anything cannot hand
CUDA on to a forked child, and the grading asks; there, and in a drive that already runs other
threads, the drive starts `python -m grader` afresh (`local.py`).
"""

import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import signal
import sys
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from grader import KIT_ROOT, file_rule
from grader.report import render
from grader.sandbox.launch import die_with_the_grader
from grader.sandbox.process import surely_no_gpu
from grader.scan import KERNEL_FILE

# What `python -m grader` imports before it grades: imported once, by the server.
GRADING_IMPORTS = ("grader.__main__", "grader.grade", "grader.report.summary",
                   "grader.report.writers")  # fmt: skip


def prepare_gradings() -> None:
    """Do once, before forking, what each grading would do first: its imports
    (`GRADING_IMPORTS`), those of the modules a submission may import, whose names the file rule
    reads (`file_rule.loaded`; Triton among them), and its pages' templates
    (`render.compile_templates`). Run in the kit's root, as the gradings are: the working folder
    comes first on `sys.path`."""
    for name in GRADING_IMPORTS:
        importlib.import_module(name)
    for name in sorted(file_rule.allowed_modules(KERNEL_FILE)):  # the widest list: the kernel's
        file_rule.loaded(name)
    render.compile_templates()


class ServerGone(Exception):
    """The server died: the gradings it ran have no status, and none starts."""


@dataclass
class Grading:
    """One forked grading, as the drive sees it: its pid once the server says it, its exit
    status once it ends (None: the server died first)."""

    pid: int | None = None
    status: int | None = None
    killed: bool = False
    ended: threading.Event = field(default_factory=threading.Event)


class Forker:
    """The drive's side: `begin` asks the server for a grading, `wait` waits for its end."""

    def __init__(self, pid: int, requests: int, replies: int) -> None:
        self.pid = pid
        self.requests = os.fdopen(requests, "w", buffering=1)
        self.lock = threading.Lock()  # over `gradings`, `requests`, `gone` and `ids`
        self.gradings: dict[int, Grading] = {}
        self.ids = 0
        self.gone = False
        self.reader = threading.Thread(target=self.read, args=(replies,), daemon=True)
        self.reader.start()

    @classmethod
    def start(cls) -> "Forker | None":
        """Fork the server; None where gradings cannot be forked: a GPU may be here, this is
        not Linux, or this process runs more than one Python thread (a lock another thread
        holds stays held in a forked child)."""
        if sys.platform != "linux" or not surely_no_gpu() or threading.active_count() > 1:
            return None
        sys.stdout.flush()  # nothing printed before is printed again by a child
        sys.stderr.flush()
        from_drive, to_server = os.pipe()
        from_server, to_drive = os.pipe()
        drive = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(to_server)
            os.close(from_server)
            serve(from_drive, to_drive, drive)  # never returns
        os.close(from_drive)
        os.close(to_drive)
        return cls(pid, to_server, from_server)

    def begin(self, argv: list[str], env: dict[str, str], keep: tuple[int, ...],
              log: Path) -> Grading:  # fmt: skip
        """Ask the server for `python -m grader ARGV`, its output in `log`; ServerGone where
        the server has died."""
        request = {"argv": argv, "env": env, "keep": list(keep), "log": str(log)}
        with self.lock:
            if self.gone:
                raise ServerGone("the drive's grading server has died")
            self.ids += 1
            self.gradings[self.ids] = grading = Grading()
            try:
                self.requests.write(json.dumps({"id": self.ids, **request}) + "\n")
            except OSError as error:  # it died, and the reader has not seen it yet
                self.gone = True
                del self.gradings[self.ids]
                raise ServerGone(f"the drive's grading server has died ({error})") from None
        return grading

    def wait(self, grading: Grading, timeout: float) -> int | None:
        """`grading`'s exit status, or None where it ran past `timeout` and was killed;
        ServerGone where the server died first."""
        if not grading.ended.wait(timeout):
            self.kill(grading)
            grading.ended.wait()
            return None
        if grading.status is None:
            raise ServerGone("the drive's grading server died during the grading")
        return grading.status

    def kill(self, grading: Grading) -> None:
        """Kill `grading`'s process group: now where its pid is known, else as it arrives."""
        with self.lock:
            grading.killed = True
            pid = grading.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def kill_all(self) -> None:
        """Kill every grading under way (Ctrl-C)."""
        with self.lock:
            running = [grading for grading in self.gradings.values() if not grading.ended.is_set()]
        for grading in running:
            self.kill(grading)

    def read(self, replies: int) -> None:
        """The reader thread: each reply to its grading; at the server's end, or at a reply it
        cannot read, every grading still waiting ends without a status."""
        try:
            with os.fdopen(replies) as stream:
                for line in stream:
                    self.take(json.loads(line))
        finally:
            with self.lock:
                self.gone = True
                waiting, self.gradings = list(self.gradings.values()), {}
            for grading in waiting:
                grading.ended.set()

    def take(self, reply: dict) -> None:
        """A reply: its grading's pid (killed now if it was killed before), or its status."""
        with self.lock:
            grading = self.gradings[reply["id"]]
            if "status" in reply:
                grading.status = reply["status"]
                del self.gradings[reply["id"]]
                grading.ended.set()
                return
            grading.pid = reply["pid"]
            killed = grading.killed
        if killed:  # before its pid came
            self.kill(grading)

    def close(self) -> None:
        """Stop the server (the gradings it still runs die with it) and wait for it."""
        with contextlib.suppress(OSError):
            self.requests.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        self.reader.join()


# -- the server (a child of the drive) -----------------------------------------------------------


def serve(requests: int, replies: int, drive: int) -> None:
    """Fork a grading for each request until the drive closes `requests` or dies; never
    returns."""
    try:
        die_with_the_grader()  # with the drive
        if os.getppid() != drive:
            os._exit(1)
        os.setsid()  # Ctrl-C at the drive's terminal reaches the drive alone, which stops all
        os.chdir(KIT_ROOT)  # nothing of the drive's working folder is imported (a `torch.py`)
        sys.path[0] = str(KIT_ROOT)
        prepare_gradings()
        if threading.active_count() != 1:  # a fork copies only its own thread: grade afresh
            os._exit(1)
        del sys.modules["grader.__main__"]  # imported for its imports: each grading runs it anew
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop, through the pipe
        gc.freeze()  # the imports' objects: never scanned again, so never copied by a child
        server = os.getpid()
        ids: dict[int, int] = {}  # pid of each grading under way, its request's id
        pending = b""
        while True:
            readable, _, _ = select.select([requests, wake_read], [], [])
            if wake_read in readable:
                os.read(wake_read, 4096)
                reap(ids, replies)
            if requests in readable:
                chunk = os.read(requests, 1 << 16)
                if not chunk:
                    os._exit(0)  # the drive is done: gradings still under way die with this
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    request = json.loads(line)
                    try:
                        pid = os.fork()
                    except OSError as error:  # this grading fails, the server goes on
                        Path(request["log"]).write_text(f"the drive could not fork it: {error}")
                        answer(replies, {"id": request["id"], "status": 1})
                        continue
                    if pid == 0:
                        grade(request, server, (requests, replies, wake_read, wake_write))
                    with contextlib.suppress(OSError):  # it may have ended already
                        os.setpgid(pid, pid)
                    ids[pid] = request["id"]
                    answer(replies, {"id": request["id"], "pid": pid})
                reap(ids, replies)
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(1)


def reap(ids: dict[int, int], replies: int) -> None:
    """Answer the exit status of each grading that ended."""
    while ids:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        answer(replies, {"id": ids.pop(pid), "status": os.waitstatus_to_exitcode(status)})


def answer(replies: int, reply: dict) -> None:
    data = json.dumps(reply).encode() + b"\n"
    while data:
        data = data[os.write(replies, data) :]


def grade(request: dict, server: int, own: tuple[int, ...]) -> None:
    """In the forked child: `python -m grader ARGV` as the request says; exit with its status
    (Python's exit steps skipped, as the grader registers none). Never returns."""
    status = 1
    try:
        os.setpgid(0, 0)
        die_with_the_grader()  # with the server
        if os.getppid() != server:
            return
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the grader waits for its workers
        for fd in own:
            os.close(fd)
        with open(os.devnull) as stdin, open(request["log"], "w") as log:
            os.dup2(stdin.fileno(), 0)
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        close_all_but({0, 1, 2, *request["keep"]})
        for fd in request["keep"]:
            os.set_inheritable(fd, True)  # as `subprocess`'s `pass_fds` leaves them
        sys.stdout = sys.__stdout__ = os.fdopen(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = sys.__stderr__ = os.fdopen(
            2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False
        )
        os.chdir(KIT_ROOT)
        sys.path[0] = str(KIT_ROOT)  # as `-m` puts the working folder first
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv[:] = ["grader", *request["argv"]]
        try:
            runpy.run_module("grader", run_name="__main__", alter_sys=True)
            status = 0
        except SystemExit as stop:
            status = exit_status(stop)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def close_all_but(keep: set[int]) -> None:
    """Close every descriptor of this process but `keep`, as a fresh process gets only those."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(name))


def exit_status(stop: SystemExit) -> int:
    """The exit status Python gives for `stop` uncaught (a message is printed, and gives 1)."""
    if stop.code is None or isinstance(stop.code, int):
        return int(stop.code or 0) & 0xFF
    print(stop.code, file=sys.stderr)
    return 1
