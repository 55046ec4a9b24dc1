"""Zygotes: a grading's workers forked from a process that did their imports once (`zygote.py`).

A worker of a CPU part would spend about a second of CPU importing torch; forked from a zygote
that imported it, it starts in a fiftieth of that. `Zygotes` holds a grading's zygotes,
started on first use (or borrowed, below) and stopped by `close()`, one per side of the trust
boundary and environment: the candidate's workers come from one zygote, the answer key's (the
reference worker and the kit's worker that serves stand-ins, `kit_server.py`) from another, each
in a sandbox of its own (`isolation.py`), so that no candidate's worker shares a process tree or
a folder with the answer key. Each forked worker has namespaces of its own besides (`zygote.py`).

Only sandboxed workers that may start no process are forked (`process.may_not_fork`): a worker
that may use CUDA starts as its own process, as does every worker of an unisolated grading and
any worker where the zygote is gone or never came up (`Sandbox.start` falls back to that
whenever a fork fails).

A zygote imports torch as it starts, and only workers that use torch are forked from it
(`uses_torch`: a file of theirs imports torch or Triton, or they run a kit tool or a kernel):
one that does not starts afresh, cheaply, so that its address space never holds torch and a
grading of such workers alone (part 7's) starts no zygote. A zygote that does not answer in
time is used no more by the grading that saw it (its workers run on); a worker whose fork fails
for any reason starts afresh.

A process that forks gradings (the kit's tests' grader server) may start zygotes before it
forks them (`WARM`): each grading forked from it borrows those that fit it instead of starting
its own, and leaves them running. A drive lends its zygotes to the gradings it starts as
processes of their own the same way (`Zygotes.handed_down`: their descriptors and the
`HANDED_DOWN` variable, which `inherit` makes `WARM` there). Its candidate's workers then come
from a zygote that forked other submissions' workers before; none of those can reach it or a
sibling (`zygote.py`).

This process talks to a zygote on a Unix socket: a request is a JSON datagram with the new
worker's descriptors attached, the reply the pid of its keeper in the zygote's PID namespace.
Nothing the zygote says is evidence: the keeper's pid on this machine is found here, among the
zygote's own children (`/proc`), and the worker's CPU time is read from the kernel.
"""

import contextlib
import fcntl
import itertools
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import BinaryIO

from grader import ANSWER_KEY as ANSWER_KEY_FILES
from grader.sandbox import isolation
from grader.sandbox.isolation import Isolation
from grader.sandbox.launch import (
    copy_kit,
    die_with_the_grader,
    open_to,
    site_packages,
    tool_paths,
    worker_environment,
)

WAIT_SECONDS = 10.0  # for a killed worker's status
ANSWER_KEY, CANDIDATE = "answer key", "candidate"  # the two sides, each with its own zygotes
SIDES = (CANDIDATE, ANSWER_KEY)
MESSAGE_BYTES = 1 << 16
HANDED_DOWN = "GRADER_ZYGOTES"  # the variable that describes the zygotes a drive lends
LOCK_POLL_SECONDS, MAX_LOCK_POLL_SECONDS = 0.001, 0.05  # between tries of a held lock


def grading_sides() -> tuple[str, ...]:
    """The sides a grading forks workers for: the answer key's too where the kit ships it (its
    reference worker, and its kit's worker), else the candidate's alone."""
    return SIDES if ANSWER_KEY_FILES.is_dir() else (CANDIDATE,)


# A line that imports torch or Triton (or, now and then, a string that looks like one: then the
# worker is forked though it does not need to be, which changes nothing it can see but time).
TORCH_IMPORT = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(?:torch|triton)\b", re.MULTILINE)


def uses_torch(files: dict[str, bytes]) -> bool:
    """Whether a file of `files` has a line that imports torch or Triton, read as text: in time
    linear in the files, whatever they hold (a parse can take minutes on a file made for it)."""
    return any(TORCH_IMPORT.search(text) for text in files.values())


def environment_key(extra_env: dict[str, str]) -> tuple:
    """A zygote's whole environment (`extra_env` over the workers' own) as a key: a zygote
    forks only workers of the environment it started in."""
    return tuple(sorted(worker_environment(isolation.TMP, extra_env).items()))


class ZygoteGone(Exception):
    """The zygote did not fork the worker: it starts as its own process instead."""


def children(pid: int) -> list[int]:
    """The processes `pid` started that still run (or wait to be reaped)."""
    return [
        int(child)
        for task in Path(f"/proc/{pid}/task").iterdir()
        for child in (task / "children").read_text().split()
    ]


def innermost_pid(pid: int) -> int | None:
    """`pid`'s pid in its own PID namespace (None where it has ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[-1]) for line in status.splitlines()
                 if line.startswith("NSpid:")), None)  # fmt: skip


def with_inner_pid(pids: Iterable[int], inner: object) -> int | None:
    """The first of `pids` whose pid in its own PID namespace is `inner` (None: none is)."""
    if type(inner) is not int:
        return None
    return next((pid for pid in pids if innermost_pid(pid) == inner), None)


def descendants(pid: int) -> Iterator[int]:
    """`pid`'s processes, its children's, and so on, breadth first."""
    pending = [pid]
    while pending:
        parent = pending.pop(0)
        with contextlib.suppress(OSError, ValueError):
            found = children(parent)
            yield from found
            pending += found


class ForkedWorker:
    """A worker forked by a zygote, with what `Sandbox` uses of a `subprocess.Popen`: its pipes
    (None where they are not this process's), the `pid` on this machine of its keeper (whose
    process tree is the worker's, for `Sandbox.cpu_seconds`), and `kill` and `wait`, both through
    its lifeline, so that no pid is ever signalled that the kernel may have given to another
    process."""

    def __init__(
        self, pid: int, lifeline: socket.socket, stdin: BinaryIO | None, stdout: BinaryIO | None
    ) -> None:
        self.pid = pid
        self.lifeline = lifeline
        self.stdin, self.stdout = stdin, stdout
        self.returncode: int | None = None
        self.lock = threading.Lock()  # `kill` may come from another thread while `wait` closes

    def kill(self) -> None:
        """Let go of the lifeline: the keeper kills the worker (from any thread)."""
        with self.lock, contextlib.suppress(OSError):
            self.lifeline.shutdown(socket.SHUT_WR)

    def wait(self, timeout: float | None = None) -> int:
        """The worker's exit status as bubblewrap gives it (128 + N: killed by signal N), once it
        ended; `timeout` None waits `WAIT_SECONDS`, then counts a worker whose keeper said nothing
        as killed."""
        if self.returncode is not None:
            return self.returncode
        seconds = WAIT_SECONDS if timeout is None else timeout
        if not select.select([self.lifeline], [], [], seconds)[0] and timeout is not None:
            raise subprocess.TimeoutExpired("worker", timeout)
        status = b""
        with self.lock:
            with contextlib.suppress(OSError):
                self.lifeline.setblocking(False)
                status = self.lifeline.recv(16)
            self.lifeline.close()  # the keeper, which waits for this, ends
        self.returncode = int(status) if status.isdigit() else 128 + signal.SIGKILL
        return self.returncode


@contextlib.contextmanager
def locked(file: BinaryIO, deadline: float) -> Iterator[None]:
    """`file` locked (`flock`, on a description of its own: it excludes this process's other
    threads and every other process) until the block ends; raises `ZygoteGone` where another
    still holds it at `deadline`."""
    try:
        lock = open(f"/proc/self/fd/{file.fileno()}", "rb")  # noqa: SIM115 (closed below)
    except (OSError, ValueError) as error:  # ValueError: `file` is closed (the zygote too)
        raise ZygoteGone(f"the zygote's lock is gone: {error}") from error
    with lock:
        pause = LOCK_POLL_SECONDS
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ZygoteGone("the zygote is busy past its time") from None
                time.sleep(pause)
                pause = min(2 * pause, MAX_LOCK_POLL_SECONDS)
        try:
            yield
        finally:  # now, not when the last copy of the description closes (a child may hold one)
            fcntl.flock(lock, fcntl.LOCK_UN)


class Zygote:
    """One zygote in a sandbox of its own; `start` a worker from it, `close` it. Its folder
    (`home`, at `isolation.HOME` inside) holds the kit's worker files, the tools, and a folder
    per worker under `workers/`, written before that worker is forked.

    Processes forked after it started (the gradings a warm process forks, `Zygotes.borrowing`)
    or started by its process with its descriptors (a drive's gradings, `inherited`) may use it
    too: each request is sent and answered under a lock on a file that has no name (no worker can
    open it), and each worker's folder and request id is drawn at random."""

    def __init__(self, isolated: Isolation, extra_env: dict[str, str], seconds: float) -> None:
        """Start the zygote; the caller waits until it is `ready`, whose pid it keeps."""
        self.lock = threading.Lock()  # one request at a time: the engine checks run in threads
        # One request at a time across the processes that use it (`locked`).
        self.lock_file = tempfile.TemporaryFile(prefix="grader-zygote-lock-")  # noqa: SIM115
        self.ids = (secrets.token_hex(8) for _ in itertools.count())  # no process draws another's
        self.broken = False  # it did not answer in time: this process forks no worker from it
        self.seconds = seconds
        self.process: subprocess.Popen | None = None
        self.owned = True  # this process started it: `close` stops it (not one `inherited`)
        self.home = Path(tempfile.mkdtemp(prefix="grader-zygote-"))
        copy_kit(self.home, Path(__file__).with_name("zygote.py"))
        (self.home / "workers" / "probe" / "package").mkdir(parents=True)  # its start's probe
        (self.home / "package").mkdir()  # where each worker sees its own package (`zygote.py`)
        self.user = isolation.worker_user()
        if self.user is not None:
            open_to(self.home)
        site = site_packages()
        self.site = [f"{isolation.SITE}/{number}" for number in range(len(site))]
        self.tools = tool_paths(self.home, isolation.HOME)
        self.socket, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"site": self.site, "user": self.user, "control": inside.fileno(),
                  "tmpfs_bytes": isolation.TMPFS_BYTES}  # fmt: skip
        argv = [isolation.runtime(), "-S", "-s", "-P", f"{isolation.HOME}/kit/zygote.py",
                json.dumps(config)]  # fmt: skip
        self.log = tempfile.TemporaryFile(prefix="grader-zygote-log-")  # noqa: SIM115 (close())
        try:
            self.process = subprocess.Popen(
                isolation.command(isolated, self.home, site, argv, zygote=True),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self.log,
                cwd=self.home,
                env=worker_environment(isolation.TMP, extra_env),
                preexec_fn=die_with_the_grader,
                start_new_session=True,
                pass_fds=(inside.fileno(),),
            )
        except OSError as error:
            self.close()
            raise ZygoteGone(f"the zygote did not start: {error}") from error
        finally:
            inside.close()
        self.pid = 0  # until `ready` says (`Zygotes.await_launched`)

    def ready(self) -> int:
        """The zygote's pid on this machine, once it says it is ready (else `ZygoteGone`)."""
        line = b""
        if select.select([self.process.stdout], [], [], self.seconds)[0]:
            line = self.process.stdout.readline()
        try:
            ready = json.loads(line)
            inner = ready["pid"] if ready["ready"] else None
        except (ValueError, TypeError, KeyError):
            inner = None
        zygote = with_inner_pid(descendants(self.process.pid), inner)
        if zygote is None:
            self.close()
            raise ZygoteGone(f"the zygote did not start: {line[:200]!r}")
        return zygote

    def new_folder(self) -> tuple[Path, str]:
        """A fresh folder for a worker's files, of a random name: here, and as the worker sees
        it; `ZygoteGone` where none can be made."""
        try:
            folder = Path(tempfile.mkdtemp(prefix="", dir=self.home / "workers"))
        except OSError as error:
            raise ZygoteGone(f"no folder for a worker: {error}") from error
        return folder, f"{isolation.HOME}/workers/{folder.name}"

    def start(
        self, message: dict, fds: list[int], stdin: BinaryIO | None, stdout: BinaryIO | None
    ) -> ForkedWorker:
        """Fork a worker as `message` says, on `fds` (its stdin, stdout and log, then its
        kit-link ends; this process keeps `stdin` and `stdout`, the other ends of the first
        two)."""
        lifeline, theirs = socket.socketpair()
        try:
            with theirs:
                reply = self.ask(message, [*fds[:3], theirs.fileno(), *fds[3:]])
            try:
                keeper = with_inner_pid(children(self.pid), reply.get("pid"))
            except OSError:  # the zygote ended meanwhile
                keeper = None
            if keeper is None:
                raise ZygoteGone(f"no worker forked: the zygote answered {reply!r:.200}")
        except BaseException:
            lifeline.close()  # a keeper that was forked after all kills its worker
            raise
        return ForkedWorker(keeper, lifeline, stdin, stdout)

    def ask(self, message: dict, fds: list[int]) -> dict:
        """The zygote's reply to `message` (a stale reply, to an earlier request of any process
        that timed out, is skipped), within the zygote's time from when this process's turn
        came; else `ZygoteGone`. A zygote busy with other processes' requests past that time is
        not broken."""
        with self.lock, locked(self.lock_file, time.monotonic() + self.seconds):
            if self.socket.fileno() < 0:
                raise ZygoteGone("the zygote is closed")
            number = next(self.ids)
            deadline = time.monotonic() + self.seconds
            try:
                socket.send_fds(self.socket, [json.dumps(message | {"id": number}).encode()], fds)
                while True:
                    self.socket.settimeout(max(0.0, deadline - time.monotonic()))
                    data = self.socket.recv(MESSAGE_BYTES)
                    if not data:
                        raise ZygoteGone("the zygote closed its socket")
                    reply = json.loads(data)
                    if type(reply) is dict and reply.get("id") == number:
                        return reply
            except (OSError, ValueError) as error:  # a timeout too
                self.broken = True
                raise ZygoteGone(f"the zygote did not answer: {error}") from error

    def close(self) -> None:
        """Stop the zygote (its workers die with it) and delete its folder; of one `inherited`,
        only let go of the descriptors (the process that lent it stops it)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process.stdout.close()
            self.process = None
        self.socket.close()
        self.lock_file.close()
        if self.owned:
            self.log.close()
            shutil.rmtree(self.home, ignore_errors=True)

    def handed_down(self) -> dict:
        """What a process this one starts needs to fork workers from this zygote (`inherited`):
        the descriptors of its socket and its lock, which that process must inherit, and the
        zygote's places and time."""
        return {"socket": self.socket.fileno(), "lock": self.lock_file.fileno(),
                "home": str(self.home), "pid": self.pid, "user": self.user, "site": self.site,
                "tools": self.tools, "seconds": self.seconds}  # fmt: skip

    @classmethod
    def inherited(cls, found: dict) -> "Zygote":
        """The zygote that `found` (`handed_down`) describes, in a process started with its
        descriptors: it forks workers as its lender does, and `close` leaves it running."""
        zygote = cls.__new__(cls)
        zygote.lock = threading.Lock()
        zygote.ids = (secrets.token_hex(8) for _ in itertools.count())
        zygote.broken, zygote.owned, zygote.process = False, False, None
        zygote.seconds, zygote.pid, zygote.user = found["seconds"], found["pid"], found["user"]
        zygote.home, zygote.site, zygote.tools = Path(found["home"]), found["site"], found["tools"]
        for fd in (found["socket"], found["lock"]):
            os.set_inheritable(fd, False)  # as its lender's: nothing this process starts gets it
        zygote.socket = socket.socket(fileno=found["socket"])
        zygote.lock_file = open(found["lock"], "rb")  # noqa: SIM115 (closed by `close`)
        return zygote


class Zygotes:
    """A grading's zygotes, by side (`CANDIDATE` or `ANSWER_KEY`) and environment, each started
    when a worker first asks for it, or before (`launch`, `start`); one that fails to start is
    not tried again. Those of `WARM` that fit the grading are borrowed (`borrowing`), not
    started, and left running."""

    def __init__(self, isolated: Isolation, seconds: float) -> None:
        self.isolation, self.seconds = isolated, seconds
        self.zygotes: dict[tuple, Zygote | None] = {}  # ready, or failed (None)
        self.launched: dict[tuple, Zygote] = {}  # started, not yet seen ready (`launch`)
        self.borrowed: set[tuple] = set()  # keys of `WARM`'s zygotes: its process closes them
        self.locks: dict[tuple, threading.Lock] = {}  # one a key: a start waits for its own side
        self.lock = threading.Lock()  # over `locks`
        self.closed = False

    @classmethod
    def borrowing(
        cls, isolated: Isolation, seconds: float, lender: "Zygotes | None" = None
    ) -> "Zygotes":
        """A grading's zygotes, with those of `lender` (`WARM` where none is given) that run
        under the same isolation and time."""
        zygotes = cls(isolated, seconds)
        source = lender or WARM
        if source is not None and (source.isolation, source.seconds) == (isolated, seconds):
            usable = {key: None if zygote is None or zygote.broken else zygote
                      for key, zygote in source.zygotes.items()}  # fmt: skip
            if lender is None:  # from `WARM`: a grading tries again what failed before it
                usable = {key: zygote for key, zygote in usable.items() if zygote is not None}
            zygotes.zygotes, zygotes.borrowed = usable, set(usable)
        return zygotes

    def lent(self) -> "Zygotes":
        """These zygotes, for a grading process forked from this one (`grader/beside.py`): all
        borrowed there (a launched one once it is ready), none closed by it; one that failed is
        not tried again there either."""
        self.await_all_launched()
        return self.borrowing(self.isolation, self.seconds, lender=self)

    def handed_down(self) -> tuple[dict[str, str], tuple[int, ...]]:
        """These zygotes, for the grading processes this one starts (a drive's,
        `drive/local.py`): the `HANDED_DOWN` variable of their environment, and the descriptors
        they must inherit (`inherit`)."""
        self.await_all_launched()
        zygotes = [[key, zygote.handed_down()]
                   for key, zygote in self.zygotes.items() if zygote is not None]  # fmt: skip
        described = {"isolation": asdict(self.isolation), "seconds": self.seconds,
                     "zygotes": zygotes}  # fmt: skip
        fds = tuple(found[fd] for _, found in zygotes for fd in ("socket", "lock"))
        return {HANDED_DOWN: json.dumps(described)}, fds

    def launch(self, wanted: Iterable[tuple[str, dict[str, str]]]) -> None:
        """Start, side by side, the zygotes of `wanted` (a side and a part's environment) not
        started yet, without waiting for them: `start`, `lent` or a worker's first `get` waits.
        Each under its key's lock, so that no two start for one key."""
        if not self.isolation.isolated:
            return
        for side, extra_env in wanted:
            key = (side, environment_key(extra_env))
            with self.lock_of(key):
                with self.lock:
                    if key in self.zygotes or key in self.launched or self.closed:
                        continue
                try:
                    zygote = Zygote(self.isolation, extra_env, self.seconds)
                except Exception:
                    zygote = None
                with self.lock:
                    if self.closed and zygote is not None:
                        zygote.close()
                    elif zygote is None:
                        self.zygotes[key] = None
                    else:
                        self.launched[key] = zygote

    def start(self, wanted: Iterable[tuple[str, dict[str, str]]]) -> None:
        """Start now, side by side, the zygotes of `wanted` not started yet, and wait until each
        launched one is ready; one that fails to start is not tried again, as in `get`."""
        try:
            self.launch(wanted)
            self.await_all_launched()
        except BaseException:  # Ctrl-C, say: none left running
            self.close()
            raise

    def await_all_launched(self) -> None:
        """Each launched zygote among the ready or the failed ones (`await_launched`)."""
        for key in list(self.launched):
            with self.lock_of(key):
                self.await_launched(key)

    def lock_of(self, key: tuple) -> threading.Lock:
        """The lock held while the zygote of `key` is launched, started or waited for: a second
        start waits for it."""
        with self.lock:
            return self.locks.setdefault(key, threading.Lock())

    def await_launched(self, key: tuple) -> None:
        """The launched zygote of `key` (if any), among the ready ones once it says it is, else
        among the failed. The caller holds `lock_of(key)`."""
        with self.lock:
            zygote = self.launched.pop(key, None)
        if zygote is None:
            return
        try:
            zygote.pid = zygote.ready()
        except BaseException as error:
            zygote.close()
            zygote = None
            if not isinstance(error, Exception):
                raise
        with self.lock:
            if self.closed and zygote is not None:
                zygote.close()
                zygote = None
            self.zygotes[key] = zygote

    def get(self, side: str, extra_env: dict[str, str]) -> Zygote | None:
        """The zygote of `side` for workers of `extra_env`, started on first use; None where
        the grading is not isolated, or that zygote failed to start or to answer."""
        if not self.isolation.isolated:
            return None
        key = (side, environment_key(extra_env))
        self.launch([(side, extra_env)])  # unless it was launched or tried before
        with self.lock_of(key):
            self.await_launched(key)
            zygote = self.zygotes.get(key)  # none once closed
        return None if zygote is None or zygote.broken else zygote

    def close(self) -> None:
        """Stop the zygotes this object started (not those it borrowed)."""
        with self.lock:
            self.closed = True
            zygotes = [zygote for key, zygote in self.zygotes.items() if key not in self.borrowed]
            zygotes += self.launched.values()
            self.zygotes, self.launched = {}, {}
        for zygote in zygotes:
            if zygote is not None:
                zygote.close()


# Zygotes started by a process that forks gradings (the kit's tests' grader server), before it
# forks them: every grading forked from it borrows those that fit it (`Zygotes.borrowing`), so
# torch is imported once per side for all of them, not twice per grading.
WARM: Zygotes | None = None


def inherit() -> None:
    """Borrow, as `WARM`, the zygotes that this process's starter lent it (`HANDED_DOWN`; the
    variable is taken out of the environment), if it did and they can be found, and no `WARM`
    is there already."""
    global WARM
    described = os.environ.pop(HANDED_DOWN, None)
    if described is None or WARM is not None:
        return
    try:
        found = json.loads(described)
        zygotes = Zygotes(Isolation(**found["isolation"]), found["seconds"])
        zygotes.zygotes = {
            (side, tuple(map(tuple, env))): Zygote.inherited(zygote)
            for (side, env), zygote in found["zygotes"]
        }
    except (ValueError, TypeError, KeyError, OSError):  # the grading starts its own
        return
    zygotes.borrowed = set(zygotes.zygotes)
    WARM = zygotes
