"""Gradings forked from a warm grader: the tests' `python -m grader ARGS`, each run in a child
forked from one process that has imported the grader (torch, pytest, hypothesis) once, which
saves about 1.6 s of CPU a grading, and started the zygotes the gradings fork their workers from
(`zygotes.WARM`), about 1.5 s of CPU for each of the two a grading would start. `GraderServer`
starts and asks it (`tests/grading.py`, for
the gradings that leave the environment as it is); `serve` is the server,
`python -m tests.grader_server NAME` from the kit's root, as `python -m grader` runs.

The server listens on the abstract Unix socket NAME, and serves only the process that started it
(the peer's pid, from the kernel). A client sends one JSON line `{"argv", "env", "guarded",
"stdout", "stderr"}`; the child forked for it answers its pid in a line, runs the grader's
command line (`grader.__main__.main`; with the file rule off where not `guarded`) in the kit's
root with exactly `env` as its environment, stdin empty and stdout and stderr written to the
files named, and answers its exit status in a last line: the one `python -m grader` gives
(`exit_status`; 1 for an uncaught exception, after its traceback).
A child that dies without one (killed) gives no last line. The child skips Python's exit steps
(atexit, finalizers): the grader has none to run once its report is written.

What preparing the gradings (`prepare_gradings`) prints fails the server's start: a grading's
output must hold what a fresh `python -m grader` prints. The server forks only from its one
Python thread (torch's import starts a native one; forking after that import is what torch's
DataLoader workers do); it ends when its stdin (a pipe from the test process) closes, and its
children die with it.
"""

import contextlib
import gc
import json
import os
import secrets
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from grader.drive.forking import exit_status, prepare_gradings
from grader.scoring.profiles import PROFILES

if TYPE_CHECKING:
    from grader.sandbox.zygotes import Zygotes

PEER_CREDENTIALS = (socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))  # pid, uid, gid
# Seconds, a safety net for one grading (and for the server's start): past the quick profile's
# budget, where a grading stops itself, by as much again for its start and its report.
CLI_TIMEOUT = 2 * PROFILES["quick"].budget_seconds


class GraderServer:
    """The server of this test process, started by the first `shared()` and stopped when this
    process exits (the server sees its stdin close)."""

    _shared: "GraderServer | None" = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.name = f"grader-server-{os.getpid()}-{secrets.token_hex(4)}"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (closed by `stop`)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.grader_server", self.name],
            cwd=Path(__file__).resolve().parents[1], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, process_group=0,
        )  # fmt: skip
        ready, _, _ = select.select([self.process.stdout], [], [], CLI_TIMEOUT)
        if not ready or self.process.stdout.readline() != b"ready\n":
            errors = self.errors()
            self.stop()
            raise RuntimeError(f"the grader server did not start:\n{errors}")

    @classmethod
    def shared(cls) -> "GraderServer":
        """This process's server; fails with its output where it has died."""
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            if cls._shared.process.poll() is not None:
                raise RuntimeError(f"the grader server died:\n{cls._shared.errors()}")
            return cls._shared

    def run(self, argv: Sequence[str], guarded: bool = True) -> tuple[int, str, str]:
        """`python -m grader ARGV` from the kit's root, with this process's environment: its
        exit status (-1 where it died without one), stdout and stderr; not `guarded`, with the
        file rule off (`tests/unguarded.py`). Past `CLI_TIMEOUT`, or on any error here, the
        grading is killed; a timeout raises `subprocess.TimeoutExpired`, as `subprocess.run`
        does."""
        with (
            tempfile.TemporaryDirectory() as outputs,
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection,
        ):
            stdout, stderr = Path(outputs, "stdout"), Path(outputs, "stderr")
            stdout.touch()
            stderr.touch()
            connection.settimeout(CLI_TIMEOUT)
            connection.connect(f"\0{self.name}")
            request = {"argv": list(argv), "env": dict(os.environ), "guarded": guarded,
                       "stdout": str(stdout), "stderr": str(stderr)}  # fmt: skip
            connection.sendall(json.dumps(request).encode() + b"\n")
            pid = None
            with connection.makefile() as replies:
                try:
                    pid = int(replies.readline())
                    status = replies.readline()
                except BaseException as error:
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    if isinstance(error, TimeoutError):
                        command = ["python", "-m", "grader", *argv]
                        raise subprocess.TimeoutExpired(command, CLI_TIMEOUT) from None
                    raise
            output, errors = stdout.read_text(), stderr.read_text()
            if not status:
                return -1, output, f"{errors}\n(the grading process {pid} died without a status)"
            return int(status), output, errors

    def errors(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.log):
            stream.close()


# -- the server ---------------------------------------------------------------------------------


def grading(connection: socket.socket) -> int:
    """In the forked child: run the request's grading; its exit status."""
    from grader.__main__ import main

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the grader waits for its workers
    request = json.loads(connection.makefile().readline())
    with open(os.devnull) as stdin:
        os.dup2(stdin.fileno(), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        with open(path, "w") as stream:
            os.dup2(stream.fileno(), fd)
    os.environ.clear()
    os.environ.update(request["env"])
    if not request["guarded"]:
        from tests.unguarded import unguard

        unguard()
    try:
        return main(request["argv"])
    except SystemExit as stop:
        return exit_status(stop)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def fork_grading(connection: socket.socket, server: int) -> None:
    """In the child forked by `server`: say its pid, grade, answer the exit status, and exit
    with it (Python's exit steps skipped: the grader registers none)."""
    from grader.sandbox.launch import die_with_the_grader

    status = 1
    try:
        die_with_the_grader()  # with the server, its parent
        if os.getppid() != server:  # it died before that
            return
        connection.sendall(f"{os.getpid()}\n".encode())
        status = grading(connection) & 0xFF
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        with contextlib.suppress(OSError):
            connection.sendall(f"{status}\n".encode())
        os._exit(status)


def prepare_quietly() -> None:
    """What each grading would do first (`prepare_gradings`), done once; what it prints, or a
    Python thread it starts, fails the start."""
    with tempfile.TemporaryFile() as printed:
        saved = os.dup(1), os.dup(2)
        os.dup2(printed.fileno(), 1)
        os.dup2(printed.fileno(), 2)
        try:
            prepare_gradings()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in enumerate(saved, start=1):
                os.dup2(copy, fd)
                os.close(copy)
        printed.seek(0)
        text = printed.read().decode(errors="replace")
    if text:
        sys.exit(f"preparing the gradings prints, as every python -m grader would:\n{text}")
    if threading.active_count() != 1:
        sys.exit(f"preparing the gradings started Python threads: {threading.enumerate()}")


def warm_zygotes() -> "Zygotes":
    """The zygotes every grading of the default isolation and import time borrows: each side's,
    for each environment a part's workers are forked in (`grade.start_zygotes`)."""
    from grader.grade import start_zygotes
    from grader.parts import PARTS
    from grader.sandbox.isolation import probe
    from grader.sandbox.process import Limits
    from grader.sandbox.zygotes import Zygotes

    warm = Zygotes(probe(), Limits.import_seconds)
    start_zygotes(warm, PARTS)
    return warm


def serve(name: str) -> None:
    """Listen on the abstract socket `name` and fork a grading for each connection, until stdin
    closes."""
    prepare_quietly()
    from grader.sandbox import seccomp, zygotes

    seccomp.supported()  # asked here once, not by each grading (it tries the filter in a process)
    zygotes.WARM = warm_zygotes()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f"\0{name}")
    listener.listen()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children reap themselves
    gc.freeze()  # what the imports made is never collected: children do not copy it by scanning
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    server = os.getpid()
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable:  # the test process is gone (or done)
            zygotes.WARM.close()
            return
        connection, _ = listener.accept()
        peer, _, _ = struct.unpack("3i", connection.getsockopt(*PEER_CREDENTIALS))
        if peer == os.getppid() and os.fork() == 0:  # only the test process that started it
            listener.close()
            fork_grading(connection, server)
        connection.close()


if __name__ == "__main__":
    serve(sys.argv[1])
