"""The zygote: a process in a sandbox of its own that has done a worker's imports once, and forks
a fresh worker, in namespaces of its own, for each start the grader asks for (`zygotes.py`).

A worker costs a second of CPU to start, most of it importing torch; a fork of a process that
has imported it costs a fiftieth of that. The zygote runs in a sandbox like a worker's
(`isolation.command`, with `zygote=True`), started as `python -S -s -P zygote.py CONFIG_JSON`;
it keeps the one capability that makes namespaces (CAP_SYS_ADMIN, and as root the two that
change a uid) and runs nothing of any candidate's. It imports torch as it starts (nearly every
worker does, first thing; Triton it leaves to the workers that use it, so that every worker
starts with the same address space). A worker's files are written into its own folder under
`/sandbox/workers/` after the zygote started, and only the forked worker imports them. It holds
no answer key: a grading's answer key has a zygote of its own (`zygotes.py`).

Each start is three processes, as bubblewrap makes them for a worker started afresh:

- the **keeper**, forked by the zygote: it takes the worker's fresh mount, PID, network, IPC and
  UTS namespaces, a fresh tmpfs at `/tmp`, its own `/dev/pts`, its own folder's package at
  `/sandbox/package`, read-only, where a worker started afresh has it, and an empty
  `/sandbox/workers`; then, holding no capability, it waits on its **lifeline** (a
  socket whose other end the grader holds) and on the init below. When the grader shuts its
  end, the keeper kills the init; when the init ends, the keeper sends its exit status on the
  lifeline (a signal N as 128 + N, as bubblewrap reports it), and ends once the grader closes
  it (so that its pid, whose process tree the grader reads the CPU time of, stays its own);
- the **init**, PID 1 of the new PID namespace, with a read-only `/proc` of its own: it forks
  the worker, gives up every capability, reaps, and ends with the worker's status; when it
  ends, the kernel kills every process of its namespace;
- the **worker**, PID 2: its own session, its descriptors only, its memory and file limits, no
  capability, its user (`NOBODY` where the grader runs as root), then `worker.serve`, which
  puts on the seccomp filter by which it starts no process and signals no process but itself.

So a worker sees neither the zygote nor a sibling (no PID, no socket, no file, no IPC object of
theirs), and its CPU time, read by the grader from the kernel, is its own.

It answers requests on a Unix socket (`control`, a descriptor it inherits), one datagram each:

    {"id": its id, "folder": its folder, "config": {...}, "env": {...},
     "limits": {"memory", "memory_kind", "file"}}
        with the worker's stdin, stdout, log, lifeline and kit-link descriptors attached
                                            -> {"id": its id, "pid": the keeper's pid}

Like `worker.py`, this file imports nothing from the kit by name. The grading process never
imports it.
"""

import contextlib
import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
from typing import Any

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
NAMESPACES = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 1 << 14, 1 << 18
WORKERS = "/sandbox/workers"  # the workers' folders, each written before its worker is forked
PACKAGE = "/sandbox/package"  # where a worker sees its folder's package, as one started afresh
PROBE_FOLDER = f"{WORKERS}/probe"  # the probe's (`probe`), its package empty
CAPSET = {"x86_64": 126, "aarch64": 91}  # the capset system call's number
LINUX_CAPABILITY_VERSION_3 = 0x20080522
MAX_FDS = 8  # a worker's descriptors: stdin, stdout, its log, its lifeline, two to the kit's
MESSAGE_BYTES = 1 << 16
LIMITS = {"AS": resource.RLIMIT_AS, "DATA": resource.RLIMIT_DATA}
libc = ctypes.CDLL(None, use_errno=True)


def checked(result: int, what: str) -> None:
    """Raise `OSError` for a libc call that failed."""
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def mount(source: str | None, target: str, kind: str | None, flags: int, data: str = "") -> None:
    checked(
        libc.mount(source and source.encode(), target.encode(), kind and kind.encode(), flags,
                   data.encode() or None),
        f"mount {target}",
    )  # fmt: skip


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
    """Import torch from `site`, once, for every worker forked after: nearly every worker
    imports it first thing."""
    sys.path += site
    import torch  # noqa: F401

    gc.freeze()  # its collections then leave the zygote's objects, and pages, shared


def keep_only(fds: list[int]) -> None:
    """Close every descriptor but `fds`, whatever its number."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in fds:
            with contextlib.suppress(OSError):  # the listing's own, closed already
                os.close(int(name))


def drop_capabilities() -> None:
    """No capability left, permitted, effective or inheritable; nothing it runs can gain one."""
    checked(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    checked(libc.syscall(CAPSET[os.uname().machine], header, data), "capset")


def new_namespaces(tmpfs_bytes: int, folder: str) -> None:
    """In the keeper: fresh namespaces for the worker, a fresh tmpfs at `/tmp`, pseudo-terminals
    of its own at `/dev/pts`, its own `folder`'s package at `PACKAGE`, read-only, where a worker
    started afresh has it (so that what a traceback says is the same either way), and `WORKERS`
    empty (the zygote's mounts stay as they are; the worker's PID namespace is its children's)."""
    checked(libc.unshare(NAMESPACES), "unshare")
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmpfs_bytes},mode=1777")
    mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666")
    hidden = MS_NOSUID | MS_NODEV | MS_NOEXEC
    mount(f"{folder}/package", PACKAGE, None, MS_BIND)
    mount(None, PACKAGE, None, MS_REMOUNT | MS_BIND | MS_RDONLY | hidden)
    mount("tmpfs", WORKERS, "tmpfs", hidden | MS_RDONLY, "size=4k,mode=755")


def exit_code(status: int) -> int:
    """A wait status as bubblewrap reports it: the exit code, or 128 + N for signal N."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def run_init(worker: Any, message: dict, fds: list[int], config: dict) -> None:
    """PID 1 of the worker's namespace: fork the worker, then reap until it ends, and end with
    its status. Never returns."""
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
        child = os.fork()
        if child == 0:
            run_worker(worker, message, fds, config)
        keep_only([2])
        drop_capabilities()
        while True:
            pid, status = os.wait()
            if pid == child:
                os._exit(exit_code(status))
    except BaseException as error:
        print(f"the worker's init stopped: {error!r}", file=sys.stderr, flush=True)
    os._exit(70)


def run_worker(worker: Any, message: dict, fds: list[int], config: dict) -> None:
    """The worker: become what `message` describes, on `fds`, and serve. Never returns."""
    try:
        os.setsid()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        stdin, stdout, log, *kit_link = fds
        for fd, target in ((stdin, 0), (stdout, 1), (log, 2)):
            os.dup2(fd, target)
        keep_only([0, 1, 2, *kit_link])
        limits = message["limits"]
        for kind in {LIMITS[limits["memory_kind"]], resource.RLIMIT_DATA}:
            resource.setrlimit(kind, (limits["memory"], limits["memory"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file"], limits["file"]))
        os.chdir(message["env"]["HOME"])  # the fresh tmpfs, not the zygote's /tmp
        if config["user"] is not None:
            worker.become(config["user"])
        drop_capabilities()
        libc.prctl(PR_SET_DUMPABLE, 1)  # as a process started afresh is
        os.environ.clear()
        os.environ.update(message["env"])
        sys.argv = [worker.__file__]
        sys.modules["__main__"] = worker  # as where the worker starts as its own process
        worker.serve(message["config"] | {"kit_link": kit_link})
    except BaseException as error:  # the grader sees a worker that closed its channel
        print(f"the forked worker stopped: {error!r}", file=sys.stderr, flush=True)
        os._exit(70)
    sys.stderr.flush()
    os._exit(0)


def run_keeper(worker: Any, message: dict, fds: list[int], config: dict) -> None:
    """The keeper, in the zygote's forked child: make the worker's namespaces, start its init,
    and keep it until the lifeline or the init ends; send the init's status. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it: this one waits
        stdin, stdout, log, lifeline, *kit_link = fds
        worker_fds = [stdin, stdout, log, *kit_link]
        keep_only([2, *worker_fds, lifeline])  # 2: the zygote's log, for what goes wrong here
        new_namespaces(config["tmpfs_bytes"], message["folder"])
        init = os.fork()
        if init == 0:
            os.close(lifeline)
            run_init(worker, message, worker_fds, config)
        for fd in worker_fds:
            os.close(fd)
        drop_capabilities()
        init_fd = os.pidfd_open(init)
        ready = select.select([lifeline, init_fd], [], [])[0]
        if init_fd not in ready:  # the grader let go: the worker goes
            os.kill(init, signal.SIGKILL)
        _, status = os.waitpid(init, 0)
        with contextlib.suppress(OSError):
            os.write(lifeline, str(exit_code(status)).encode())
            while os.read(lifeline, 64):  # until the grader closes it
                pass
    except BaseException as error:
        print(f"the worker's keeper stopped: {error!r}", file=sys.stderr, flush=True)
    os._exit(0)


class Zygote:
    """The forking loop: one request, one keeper, one reply."""

    def __init__(self, worker: Any, control: socket.socket, config: dict) -> None:
        self.worker = worker
        self.control = control
        self.config = config

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.control, MESSAGE_BYTES, MAX_FDS)
            except OSError:
                return
            if not data:
                return  # the grader closed its end
            number = None
            try:
                message = json.loads(data)
                number = message["id"]
                reply = {"id": number, "pid": self.fork(message, fds)}
            except Exception as error:  # the grader starts that worker afresh
                reply = {"id": number, "error": repr(error)}
            finally:
                for fd in fds:
                    os.close(fd)
            try:
                self.control.send(json.dumps(reply).encode())
            except OSError:
                return  # the grader is gone

    def fork(self, message: dict, fds: list[int]) -> int:
        """Fork a keeper for the worker `message` describes, on `fds`; its pid."""
        if len(fds) < 4:
            raise ValueError(f"a worker needs 4 descriptors or more, not {len(fds)}")
        pid = os.fork()
        if pid == 0:
            run_keeper(self.worker, message, fds, self.config)
        return pid


def probe(worker: Any, config: dict) -> None:
    """Start a worker that serves nothing, the whole way (namespaces, mounts, user,
    capabilities), and raise if it did not end well: where it cannot, the grader starts every
    worker afresh."""
    ends = [os.pipe() for _ in range(2)]
    lifeline, theirs = socket.socketpair()
    fds = [ends[0][0], ends[1][1], os.open(os.devnull, os.O_WRONLY), theirs.fileno()]
    message = {"env": {"HOME": "/tmp"}, "config": {}, "folder": PROBE_FOLDER,
               "limits": {"memory": resource.RLIM_INFINITY, "memory_kind": "AS",
                          "file": resource.RLIM_INFINITY}}  # fmt: skip
    keeper = os.fork()
    if keeper == 0:
        run_keeper(_Probe(worker), message, fds, config)
    theirs.close()
    for fd in (*ends[0], *ends[1], fds[2]):
        os.close(fd)
    with lifeline:
        status = lifeline.recv(16)
    os.waitpid(keeper, 0)
    if status != b"0":
        raise OSError(f"a probe worker ended with {status!r}")


class _Probe:
    """A worker module that checks what a worker forked here is, and serves nothing."""

    __file__ = "probe"

    def __init__(self, worker: Any) -> None:
        self.become = worker.become

    @staticmethod
    def serve(config: dict) -> None:
        with open("/proc/self/status") as status_file:
            status = status_file.read()
        capabilities = [line.split()[1] for line in status.splitlines()
                        if line.startswith("CapEff:")]  # fmt: skip
        alone = os.getpid() == 2 and os.listdir("/proc") and not os.listdir("/tmp")
        if capabilities != ["0000000000000000"] or not alone or os.listdir(WORKERS):
            os._exit(71)


def main() -> None:
    config = json.loads(sys.argv[1])
    worker = load_worker()
    libc.prctl(PR_SET_DUMPABLE, 0)  # no process of its user may read its memory
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # whatever it inherited: the probe waits
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    try:
        probe(worker, config)
    except Exception as error:
        print(json.dumps({"ready": False, "why": repr(error)}), flush=True)
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # its keepers are reaped as they end
    preload(config["site"])
    print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
    Zygote(worker, socket.socket(fileno=config["control"]), config).serve()


if __name__ == "__main__":
    main()
