"""Zygotes: a grading's workers forked from a process that did their imports once (`zygote.py`).

A worker of a CPU part would spend about a second of CPU importing torch and Triton; forked from
a zygote that imported them, it starts in a hundredth of that. `Zygotes` holds a grading's
zygotes, started on first use and stopped by `close()`, one per side of the trust boundary and
environment: the candidate's workers come from one zygote, the answer key's (the reference
worker and the kit's worker that serves stand-ins, `kit_server.py`) from another, each in a
sandbox of its own (`isolation.py`), so that no candidate's worker shares a process tree, a
folder or a `/tmp` with the answer key.

Only workers that may start no process are forked (`process.may_not_fork`: the seccomp filter
by which a worker also signals no process but itself, so it cannot reach the zygote or a
sibling); a worker that may use CUDA starts as its own process, as does any worker where the
zygote is gone or never came up (`Sandbox.start` falls back to that whenever `fork` fails).

A zygote imports torch and Triton once a worker that will use them is forked (`uses_torch`:
its first request's modules import them, or it runs a kit tool); a grading whose workers never
do (part 1 alone) does not pay for them.

This process talks to a zygote on a Unix socket: a request is a JSON datagram, with the new
worker's descriptors attached to a `fork`; the reply is the worker's pid in the zygote's PID
namespace. Nothing the zygote says is evidence: the worker's pid on this machine is found here,
among the zygote's own children (`/proc`), and its CPU time is read from the kernel.
"""

import ast
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from grader.sandbox import isolation
from grader.sandbox.isolation import Isolation
from grader.sandbox.launch import (
    TOOLS,
    WORKER_FILES,
    die_with_the_grader,
    open_to,
    site_packages,
    worker_environment,
)

WAIT_SECONDS = 10.0  # for a killed worker's status
PRELOADED = ("torch", "triton")  # what a zygote imports before a worker that uses them
ANSWER_KEY, CANDIDATE = "answer key", "candidate"  # the two sides, each with its own zygotes


def uses_torch(files: dict[str, bytes], modules: Iterable[str]) -> bool:
    """Whether importing `modules` (of `files`, by name without `.py`) imports torch or Triton,
    itself or through the relative imports among `files` (a file that does not parse, not)."""
    pending, seen = list(modules), set()
    while pending:
        name = pending.pop()
        if name in seen or f"{name}.py" not in files:
            continue
        seen.add(name)
        try:
            tree = ast.parse(files[f"{name}.py"])
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                if any(alias.name.split(".")[0] in PRELOADED for alias in node.names):
                    return True
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                if (node.module or "").split(".")[0] in PRELOADED:
                    return True
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                pending += [node.module] if node.module else [alias.name for alias in node.names]
    return False


class ZygoteGone(Exception):
    """The zygote did not answer: the worker starts as its own process instead."""


class ForkedWorker:
    """A worker forked by a zygote, with what `Sandbox` uses of a `subprocess.Popen`: its pipes
    (None where they are not this process's), its `pid` on this machine, `wait` and `kill`
    (through a pidfd, so that a pid the kernel has given to another process is never hit)."""

    def __init__(
        self, zygote: "Zygote", inner_pid: int, pid: int, stdin: BinaryIO | None,
        stdout: BinaryIO | None,
    ) -> None:  # fmt: skip
        self.zygote = zygote
        self.inner_pid = inner_pid  # in the zygote's PID namespace
        self.pid = pid
        self.stdin, self.stdout = stdin, stdout
        self.returncode: int | None = None
        self.pidfd: int | None = None
        with contextlib.suppress(OSError):  # it ended already: nothing to kill
            self.pidfd = os.pidfd_open(pid)

    def kill(self) -> None:
        if self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code as `Popen.wait` gives one (-N: killed by signal N)."""
        if self.returncode is not None:
            return self.returncode
        try:
            status = self.zygote.wait(self.inner_pid, WAIT_SECONDS if timeout is None else timeout)
        except ZygoteGone:  # and every worker it forked with it (their parent-death signal)
            self.returncode = -signal.SIGKILL
            return self.returncode
        if status is None:
            raise subprocess.TimeoutExpired("worker", timeout)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


class Zygote:
    """One zygote in a sandbox of its own; `fork` a worker from it, `close` it. Its folder
    (`home`, at `isolation.HOME` inside) holds the kit's worker files, the tools, and a folder
    per worker under `workers/`, written before that worker is forked."""

    def __init__(self, isolated: Isolation, extra_env: dict[str, str], seconds: float) -> None:
        self.isolation, self.extra_env = isolated, extra_env
        self.lock = threading.Lock()  # one request at a time: the engine checks run in threads
        self.count = 0
        self.home = Path(tempfile.mkdtemp(prefix="grader-zygote-"))
        for folder, paths in (("kit", (*WORKER_FILES, Path(__file__).with_name("zygote.py"))),
                              ("tools", TOOLS.values())):  # fmt: skip
            (self.home / folder).mkdir()
            for path in paths:
                if path.is_file():  # the candidate bundle may leave a tool out
                    shutil.copyfile(path, self.home / folder / path.name)
        (self.home / "workers").mkdir()
        self.user = isolation.worker_user() if isolated.isolated else None
        if self.user is not None:
            open_to(self.home)
        site = site_packages()
        self.root = isolation.HOME if isolated.isolated else str(self.home)
        self.site = site
        if isolated.isolated:
            self.site = [f"{isolation.SITE}/{number}" for number in range(len(site))]
        self.tools = {name: f"{self.root}/tools/{path.name}" for name, path in TOOLS.items()
                      if (self.home / "tools" / path.name).is_file()}  # fmt: skip
        self.socket, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"site": self.site, "user": self.user, "control": inside.fileno()}
        python = isolation.runtime() if isolated.isolated else sys.executable
        argv = [python, "-S", "-s", "-P", f"{self.root}/kit/zygote.py", json.dumps(config)]
        if isolated.isolated:
            argv = isolation.command(isolated, self.home, site, argv)
            cwd = isolation.TMP
        else:
            cwd = str(self.home / "cwd")
            os.mkdir(cwd)
        self.log = tempfile.TemporaryFile(prefix="grader-zygote-log-")  # noqa: SIM115 (close())
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self.log,
                cwd=self.home if isolated.isolated else cwd,
                env=worker_environment(cwd, extra_env),
                preexec_fn=die_with_the_grader,
                start_new_session=True,
                pass_fds=(inside.fileno(),),
            )
        finally:
            inside.close()
        self.socket.settimeout(seconds)
        ready = select.select([self.process.stdout], [], [], seconds)[0]
        if not ready or not self.process.stdout.readline().startswith(b'{"ready"'):
            self.close()
            raise ZygoteGone("the zygote did not start")

    def new_folder(self) -> tuple[Path, str]:
        """A fresh folder for a worker's files: here, and as the worker sees it."""
        with self.lock:
            self.count += 1
            number = self.count
        folder = self.home / "workers" / str(number)
        folder.mkdir()
        return folder, f"{self.root}/workers/{number}"

    def start(
        self, message: dict, fds: list[int], stdin: BinaryIO | None, stdout: BinaryIO | None
    ) -> ForkedWorker:
        """Fork a worker as `message` says, on `fds` (its stdin, stdout, log and kit-link ends;
        this process keeps `stdin` and `stdout`, the other ends of the first two)."""
        reply = self.ask(message, fds)
        inner = reply.get("pid")
        if type(inner) is not int:
            raise ZygoteGone(f"the zygote answered {reply!r:.80}")
        pid = self.host_pid(inner)
        if pid is None:
            raise ZygoteGone("the forked worker ended at once")
        return ForkedWorker(self, inner, pid, stdin, stdout)

    def wait(self, inner_pid: int, seconds: float) -> int | None:
        status = self.ask({"op": "wait", "pid": inner_pid, "seconds": seconds}).get("status")
        return status if type(status) is int else None

    def ask(self, message: dict, fds: list[int] = ()) -> dict:
        with self.lock:
            if self.process is None:
                raise ZygoteGone("the zygote is closed")
            try:
                socket.send_fds(self.socket, [json.dumps(message).encode()], list(fds))
                reply = self.socket.recv(1 << 16)
            except OSError as error:  # a timeout too
                raise ZygoteGone(f"the zygote did not answer: {error}") from error
        if not reply:
            raise ZygoteGone("the zygote closed its socket")
        return json.loads(reply)

    def host_pid(self, inner_pid: int) -> int | None:
        """The pid on this machine of the zygote's child `inner_pid`: the process under the
        zygote's sandbox whose innermost pid is `inner_pid` (None if it has ended)."""
        pending = [self.process.pid]
        while pending:
            pid = pending.pop()
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                children = [
                    int(child)
                    for task in Path(f"/proc/{pid}/task").iterdir()
                    for child in (task / "children").read_text().split()
                ]
            except (OSError, ValueError):
                continue
            inner = [line.split()[-1] for line in status.splitlines() if line.startswith("NSpid:")]
            if pid != self.process.pid and inner == [str(inner_pid)]:
                return pid
            pending += children
        return None

    def close(self) -> None:
        """Stop the zygote (its workers die with it) and delete its folder."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process.stdout.close()
            self.process = None
        self.socket.close()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)


class Zygotes:
    """A grading's zygotes, by side (`CANDIDATE` or `ANSWER_KEY`) and environment, each started
    when a worker first asks for it; one that fails to start is not tried again."""

    def __init__(self, isolated: Isolation, seconds: float) -> None:
        self.isolation, self.seconds = isolated, seconds
        self.zygotes: dict[tuple, Zygote | None] = {}
        self.lock = threading.Lock()

    def get(self, side: str, extra_env: dict[str, str]) -> Zygote | None:
        key = (side, tuple(sorted(extra_env.items())))
        with self.lock:
            if key not in self.zygotes:
                try:
                    self.zygotes[key] = Zygote(self.isolation, extra_env, self.seconds)
                except (ZygoteGone, OSError):
                    self.zygotes[key] = None
            return self.zygotes[key]

    def close(self) -> None:
        with self.lock:
            for zygote in self.zygotes.values():
                if zygote is not None:
                    zygote.close()
            self.zygotes.clear()
