"""The zygote: a process in a worker's sandbox that has done a worker's imports once, and forks a
fresh worker for each start the grader asks for (`grader/sandbox/zygotes.py`).

A worker costs a second of CPU to start, most of it importing torch and Triton; a fork of a
process that has imported them costs a hundredth of that. The zygote runs in the same sandbox a
worker gets (`isolation.py`: its namespaces, its user, its read-only view), started as
`python -S -s -P zygote.py CONFIG_JSON`. It loads the kit's worker (`worker.py`), becomes that
user (`worker.become`) and makes itself undumpable (no process of its user may read its memory
through `/proc`); it imports torch and Triton before the first fork whose worker will use them
(`preload`), and nothing of any candidate's: a worker's files are written into its own folder
under `/sandbox/workers/` after the zygote started, and only the forked worker imports them. It
holds no answer key: a grading's answer key has a zygote of its own (`zygotes.py`).

It answers requests on a Unix socket (`control`, a descriptor it inherits), one datagram each:

    {"op": "fork", "config": {...}, "cwd", "env", "limits": {"memory", "memory_kind", "file"},
     "preload": bool}   with the worker's stdin, stdout, log and kit-link descriptors attached
                                                     -> {"pid": n}
    {"op": "wait", "pid": n, "seconds": s}          -> {"status": waitpid's status, or null}

A forked worker, before it reads a request: leaves the zygote's session and dies with it,
keeps only its own descriptors, takes its memory and file limits and its own folder under
`/tmp`, and (`worker.serve`) puts on the seccomp filter by which it starts no process and
signals no process but itself (`seccomp.py`). So a worker reaches neither the zygote nor a
sibling, and its CPU time, read by the grader from the kernel, is its own.

Like `worker.py`, this file imports nothing from the kit by name. The grading process never
imports it.
"""

import contextlib
import ctypes
import gc
import json
import os
import resource
import shutil
import signal
import socket
import sys
import time
from typing import Any

PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
MAX_FDS = 8  # a worker's descriptors: stdin, stdout, its log, two to the kit's worker
MESSAGE_BYTES = 1 << 16
LIMITS = {"AS": resource.RLIMIT_AS, "DATA": resource.RLIMIT_DATA}
libc = ctypes.CDLL(None, use_errno=True)


def load_worker() -> Any:
    """The kit's worker module (`worker.py`, standard library only at import), loaded by path
    from beside this file."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
    spec = importlib.util.spec_from_file_location("kit_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def preload(site: list[str]) -> None:
    """Import torch and Triton (where installed) from `site`, once, for every worker forked
    after: each that uses them would import them first thing."""
    sys.path += site
    import torch  # noqa: F401

    with contextlib.suppress(ImportError):  # without Triton, its part fails in the worker
        import triton.language  # noqa: F401


def start_worker(worker: Any, message: dict, fds: list[int], zygote: int) -> None:
    """In the forked child of the process `zygote`: become the worker `message` describes, on
    `fds`; never returns."""
    try:
        os.setsid()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != zygote:  # the zygote died before the signal was asked for
            return
        stdin, stdout, log, *kit_link = fds
        for fd, target in ((stdin, 0), (stdout, 1), (log, 2)):
            os.dup2(fd, target)
        keep = sorted({0, 1, 2, *kit_link})  # close the zygote's socket and all else
        for low, high in zip(keep, [*keep[1:], os.sysconf("SC_OPEN_MAX")], strict=True):
            os.closerange(low + 1, high)
        limits = message["limits"]
        for kind in {LIMITS[limits["memory_kind"]], resource.RLIMIT_DATA}:
            resource.setrlimit(kind, (limits["memory"], limits["memory"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file"], limits["file"]))
        os.environ.clear()
        os.environ.update(message["env"])
        os.makedirs(message["cwd"], exist_ok=True)
        os.chdir(message["cwd"])
        worker.serve(message["config"] | {"kit_link": kit_link})
    except BaseException as error:  # the grader sees a worker that closed its channel
        print(f"the forked worker stopped: {error!r}", file=sys.stderr, flush=True)
    finally:
        os._exit(70)


class Zygote:
    """The forking loop, the statuses of the workers it reaped before the grader asked, and the
    working folders of those still running (each deleted once its worker has ended)."""

    def __init__(self, worker: Any, control: socket.socket, site: list[str]) -> None:
        self.worker = worker
        self.control = control
        self.site = site
        self.preloaded = False
        self.statuses: dict[int, int] = {}
        self.folders: dict[int, str] = {}  # each running worker's working folder

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.control, MESSAGE_BYTES, MAX_FDS)
            except ConnectionError:
                return
            if not data:
                return  # the grader closed its end
            try:
                reply = self.answer(json.loads(data), fds)
            finally:
                for fd in fds:
                    os.close(fd)
            self.control.send(json.dumps(reply).encode())

    def answer(self, message: dict, fds: list[int]) -> dict:
        self.reap()
        if message["op"] == "fork":
            if message["preload"] and not self.preloaded:
                preload(self.site)
                gc.freeze()  # its collections then leave the zygote's objects, and pages, shared
                self.preloaded = True
            zygote = os.getpid()
            pid = os.fork()
            if pid == 0:
                start_worker(self.worker, message, fds, zygote)
            self.folders[pid] = message["cwd"]
            return {"pid": pid}
        if message["op"] == "wait":
            return {"status": self.wait(message["pid"], message["seconds"])}
        return {"error": f"unknown op {message['op']!r}"}

    def reap(self) -> None:
        """Keep the statuses of the workers that ended (the grader asks for some later)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.statuses[pid] = status
            shutil.rmtree(self.folders.pop(pid, ""), ignore_errors=True)  # what it left in /tmp

    def wait(self, pid: int, seconds: float) -> int | None:
        """`pid`'s status once it ended, waiting up to `seconds`; None if it runs on."""
        deadline = time.monotonic() + seconds
        while pid not in self.statuses:
            self.reap()
            if pid in self.statuses or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        return self.statuses.pop(pid, None)


def main() -> None:
    config = json.loads(sys.argv[1])
    worker = load_worker()
    if config["user"] is not None:
        worker.become(config["user"])
    libc.prctl(PR_SET_DUMPABLE, 0)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    print(json.dumps({"ready": True}), flush=True)
    Zygote(worker, socket.socket(fileno=config["control"]), config["site"]).serve()


if __name__ == "__main__":
    main()
