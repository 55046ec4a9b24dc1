"""Parts graded beside: some of a grading's parts run in a second grading process, forked from
this one before it starts a thread, so that a grading keeps two cores busy (`grade.run_checks`).

    beside = Beside.fork(run, parts)          # run(stream) in the child: its parts' checks
    ...                                       # this process grades the other parts meanwhile
    beside.relay(show)                        # the child's progress lines, as they come
    outcome = beside.outcome(deadline, show)  # what its checks concluded, once it has ended

The child runs the kit's own checks, with the grading's options, on the grading's files, its
workers forked from the grading's zygotes (`Zygotes.lent`): it is the grading process in two, and
runs no candidate code itself any more than this one does. It writes lines on a pipe: its
progress lines (`P` and the line), then its outcome (`R` and a pickle, base64), a dict of the
plain data and messages its checks left; a child that fails writes `E` and its traceback. This
process unpickles only what its own fork wrote: a worker's replies were parsed and checked in
the child as they are here, and never reach this pipe as they came.

The child dies with this process (`launch.die_with_the_grader`), and `stop` ends it; Ctrl-C
reaches both (one process group), and each stops as a grading does (`interrupt.py`): the child
takes it only once it serves, never in the code it shares with this process.
"""

import base64
import contextlib
import os
import pickle
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from grader.sandbox.launch import die_with_the_grader

GRACE_SECONDS = 60.0  # past the grading's deadline, for the child to end before it is killed
EXIT_SECONDS = 10.0  # for a child that has sent its outcome, or took Ctrl-C, to end by itself


class LineStream:
    """The child's progress stream (what `ProgressLines` writes to): each line a `P` line on the
    pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> None:
        for line in text.splitlines():
            send(self.fd, b"P " + line.encode())

    def flush(self) -> None:
        pass


def send(fd: int, line: bytes) -> None:
    """`line` and a newline, written whole on `fd`."""
    data = memoryview(line + b"\n")
    while data:
        data = data[os.write(fd, data) :]


@dataclass
class Beside:
    """The child grading process, from this side: its pid, the read end of its pipe, the parts
    it grades."""

    pid: int
    fd: int
    parts: tuple[str, ...]
    pending: bytearray = field(default_factory=bytearray)  # read, not yet a whole line
    result: bytes | None = None  # its `R` or `E` line
    ended: bool = False  # its pipe is at its end
    lines: list[str] = field(default_factory=list)  # progress lines read, not yet shown
    status: int | None = None  # its exit status, once reaped

    @classmethod
    def fork(cls, run: Callable[[LineStream], dict], parts: tuple[str, ...]) -> "Beside":
        """Fork the child, which calls `run` with its progress stream and sends what it returns:
        the outcome of grading `parts`. Call it while this process has no thread: the child
        has only the one that forks."""
        for stream in (sys.stdout, sys.stderr):  # what is yet to print is not printed twice
            with contextlib.suppress(Exception):
                stream.flush()
        read, write = os.pipe()
        parent = os.getpid()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # until each is ready
        try:
            pid = os.fork()
        except OSError:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(read)
            os.close(write)
            raise
        if pid == 0:
            try:
                os.close(read)
                serve(run, write, parent, mask)
            finally:
                os._exit(1)
        os.close(write)
        beside = cls(pid, read, parts)
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C that came meanwhile
        except BaseException:
            beside.stop()
            raise
        return beside

    def read(self, seconds: float) -> None:
        """Read what the child wrote, waiting up to `seconds` for its first bytes and taking
        all that is there: its progress lines into `lines`, its outcome into `result`."""
        poll = select.poll()
        poll.register(self.fd, select.POLLIN)
        timeout = max(0.0, seconds) * 1000
        while not self.ended and poll.poll(timeout):
            timeout = 0
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.ended = True
            start = len(self.pending)
            self.pending += chunk
            while (end := self.pending.find(b"\n", start)) >= 0:
                line = bytes(self.pending[:end])
                del self.pending[: end + 1]
                start = 0
                if line.startswith(b"P "):
                    self.lines.append(line[2:].decode(errors="replace"))
                else:
                    self.result = line

    def relay(self, show: Callable[[str], None], seconds: float = 0.0) -> None:
        """Show each progress line the child wrote within `seconds`."""
        self.read(seconds)
        lines, self.lines = self.lines, []
        for line in lines:
            show(line)

    def outcome(self, deadline: float, show: Callable[[str], None]) -> dict:
        """What the child's checks concluded, once it has ended, showing its progress lines
        meanwhile; raises `RuntimeError` where it failed, or had not ended `GRACE_SECONDS` after
        `deadline` (monotonic; it is then killed)."""
        while not self.ended and self.result is None:
            if time.monotonic() > deadline + GRACE_SECONDS:
                self.stop()
                raise RuntimeError("the grading process beside did not end in time")
            self.relay(show, seconds=1.0)
        self.relay(show)
        status = self.stop(EXIT_SECONDS)
        if self.result is None or not self.result.startswith((b"R ", b"E ")):
            raise RuntimeError(f"the grading process beside ended with status {status}")
        data = base64.b64decode(self.result[2:])
        if self.result.startswith(b"E "):
            raise RuntimeError(f"the grading process beside failed:\n{data.decode()}")
        return pickle.loads(data)  # this process's own fork wrote it

    def stop(self, seconds: float = 0.0) -> int:
        """Let the child end by itself within `seconds` (on Ctrl-C it tears its workers down),
        else kill it; reap it and close the pipe (once). Its exit status (-9: killed)."""
        if self.status is None:
            self.status = reaped(self.pid, seconds)
            os.close(self.fd)
            self.ended = True
        return self.status


def reaped(pid: int, seconds: float) -> int:
    """The exit status of the child `pid` once it has ended, killed if it has not within
    `seconds`; -1 where it was reaped already (SIGCHLD ignored), its status lost."""
    deadline = time.monotonic() + seconds
    try:
        while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() >= deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                ended = os.waitpid(pid, 0)
                break
            time.sleep(0.05)
    except ChildProcessError:
        return -1
    return os.waitstatus_to_exitcode(ended[1])


def serve(run: Callable[[LineStream], dict], fd: int, parent: int, mask: set) -> None:
    """In the child, its signal `mask` that of its parent before the fork: `run`, its outcome
    sent on `fd`. Never returns; a Ctrl-C ends it with no outcome, as it ends the grading; so
    does the end of `parent` (its pid)."""
    status = 1
    try:
        die_with_the_grader()
        if os.getppid() != parent:  # it ended before the death signal was asked for
            return
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        outcome = run(LineStream(fd))
        send(fd, b"R " + base64.b64encode(pickle.dumps(outcome)))
        status = 0
    except KeyboardInterrupt:
        status = 130
    except BaseException:
        with contextlib.suppress(OSError):
            send(fd, b"E " + base64.b64encode(traceback.format_exc().encode()))
    finally:
        os._exit(status)
