"""How a worker is launched, whether it starts as a process of its own (`process.py`) or is
forked from a zygote (`zygotes.py`): the kit's files it runs, its environment, where its
third-party packages live, who may read its folder, and its parent-death signal."""

import ctypes
import os
import shutil
import signal
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER_FILES = tuple(  # copied beside it
    HERE / f"{name}.py"
    for name in ("worker", "wire", "seccomp", "kit_server", "watchers", "interpreter", "workloads")
)
# The kit's modules a part runs a candidate's code on, as the candidate's worker gets them:
# stand-ins whose objects the kit's worker serves (`kit_server.py`).
STAND_INS = HERE / "stand_ins"
# The kit's standalone helpers (no kit imports) that checks may run in the worker
# (`Submission.tool`): each is copied into the worker's folder, never imported from the kit.
TOOLS = {
    name: HERE / "tools" / f"{name}.py"
    for name in ("gpu_probe", "gpu_timing", "engine", "prefix_engine")
}  # prefix_engine loads engine, its model, from beside it


def worker_environment(home: str, extra: dict[str, str]) -> dict[str, str]:
    """A worker's whole environment: a minimal one (no PYTHONPATH, no CI, no tokens; one thread;
    a fixed hash seed), with `extra` on top (the part's device, `grade.device_environment`)."""
    env = {
        "PATH": os.defpath,
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TRITON_CACHE_DIR": f"{home}/.triton",
    }
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env | extra


# Resolved here, once: `preexec_fn` runs between fork and exec, where loading a library can
# deadlock in a threaded parent (torch's).
PRCTL = ctypes.CDLL(None).prctl if sys.platform == "linux" else None
PR_SET_PDEATHSIG = 1


def die_with_the_grader() -> None:
    """In the worker, before it runs anything: be killed when the grading process dies
    (Linux's parent-death signal), so that a grader stopped by Ctrl-C leaves no worker spinning."""
    if PRCTL is not None:
        PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


def site_packages() -> list[str]:
    """Where this interpreter's third-party packages (torch, triton) live, without `.pth` files."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def open_to(home: Path) -> None:
    """Let a worker that is not its owner (`isolation.worker_user`) read `home`: any user may
    enter it (not list it) and read what is in it, whatever the grader's umask."""
    for path in home.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    home.chmod(0o711)


def copy_kit(home: Path, *extra: Path) -> None:
    """The kit's files a worker runs, into `home`: the worker's (`WORKER_FILES`, and `extra`) in
    `kit/`, the tools (`TOOLS`) in `tools/`."""
    for folder, paths in (("kit", (*WORKER_FILES, *extra)), ("tools", TOOLS.values())):
        (home / folder).mkdir()
        for path in paths:
            if path.is_file():  # the candidate bundle may leave a tool out
                shutil.copyfile(path, home / folder / path.name)


def tool_paths(home: Path, root: str) -> dict[str, str]:
    """Each tool `copy_kit` copied into `home`, by name, at its path as the worker sees `home`
    (`root`)."""
    return {name: f"{root}/tools/{path.name}" for name, path in TOOLS.items()
            if (home / "tools" / path.name).is_file()}  # fmt: skip
