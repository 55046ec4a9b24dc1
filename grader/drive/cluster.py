"""`grade-all --ray ADDRESS`: each submission graded by a Ray task, on the cluster at ADDRESS.

The driver (this process) sends each submission's files to a task as bytes (`tarball`); the task
runs the same isolated grading as a local grade-all, `local.grade_one` (`python -m grader` in a
process group of its own, with the timeout), in a temporary folder on its node, and returns the
outcome and the report folder as bytes, which the driver writes under OUT. The hiring team's seal
key goes with each task as an argument, never as a file of the kit (`grade_task`). The kit reaches
the nodes through Ray's runtime environment: its working directory is the kit's root
(`runtime_env`), uploaded once per drive; each node needs only the kit's dependencies, in the Python
`ray start` ran there (`pip install '.[cluster]'`), and bubblewrap.

A task asks for one CPU. When the cluster has GPUs and the kernel part is graded it asks for one
GPU too, so that no two kernel timings share a GPU: a submission is one task, not a CPU task
and a GPU task, because the grader scores, rescores on the kit's allocator and runs the engine
check across parts in one process, and its report is one whole (see the README's "Grading at
scale"). A task whose worker or node dies, or that raises, is run once more by Ray
(`MAX_RETRIES`, `retry_exceptions`); `Attempts` counts the starts, so that the row of a retried
submission says so, and one that fails twice gets a row that says why.
"""

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from grader import KIT_ROOT
from grader.drive.local import LOG_LINES, grade_one
from grader.drive.resume import clear
from grader.parts import PARTS
from grader.report.i18n import profile_name, tr
from grader.report.leaderboard import Outcome
from grader.said import said
from grader.tarball import pack, unpack

MAX_RETRIES = 1  # so a submission's task runs at most twice
EXCLUDES = ["/tests", "/docs", "/reports", "/dist", "/build", "/submissions"]


@ray.remote(num_cpus=0)
class Attempts:
    """How many times each submission's task has started: Ray retries without telling."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def start(self, name: str) -> int:
        self.counts[name] = self.counts.get(name, 0) + 1
        return self.counts[name]


@ray.remote(max_retries=MAX_RETRIES, retry_exceptions=True)
def grade_task(
    name: str,
    entry: str,
    submission: bytes,
    args: argparse.Namespace,
    key: bytes | None,
    attempts: ray.ObjectRef,
) -> tuple[int, Outcome, bytes]:
    """On a node: the attempt's number, the grading's outcome and its report folder, `pack`ed.
    The seal `key` is handed to the grading as a file of the task's own (mode 0600), gone with
    its temporary folder."""
    attempt = ray.get(attempts.start.remote(name))
    with tempfile.TemporaryDirectory(prefix="grade-all-") as temporary:
        root = Path(temporary)
        unpack(submission, root / "submission")
        on_node = argparse.Namespace(**{**vars(args), "out": root / "reports", "seal_key": None})
        if key is not None:
            on_node.seal_key = root / "seal.key"
            on_node.seal_key.touch(mode=0o600)
            on_node.seal_key.write_bytes(key)
        outcome = grade_one(name, root / "submission" / entry, on_node)
        return attempt, outcome, pack(on_node.out / name)


def runtime_env(args: argparse.Namespace) -> dict:
    """The kit's root as every task's working directory, without what no task needs (the tests,
    and the drive's own folders where they lie inside; Ray leaves out .git, .venv and whatever
    .gitignore names)."""
    excludes = list(EXCLUDES)
    for folder in (args.folder, args.out):
        if folder.resolve().is_relative_to(KIT_ROOT):
            excludes.append(f"/{folder.resolve().relative_to(KIT_ROOT).as_posix()}")
    return {"working_dir": str(KIT_ROOT), "excludes": excludes}


def resources(args: argparse.Namespace) -> dict:
    """What one task asks for: a CPU, and a GPU of its own where the kernel is timed on one."""
    gpus = ray.cluster_resources().get("GPU", 0)
    timed = gpus > 0 and "kernel" in (args.parts or PARTS)
    return {"num_cpus": 1, "num_gpus": 1 if timed else 0}


def at_once(asks: dict) -> int:
    """How many tasks asking for `asks` the cluster runs at once, by its CPUs and GPUs (one at
    least: a cluster may grow)."""
    have = ray.cluster_resources()
    kinds = {"CPU": asks["num_cpus"], "GPU": asks["num_gpus"]}
    return max(int(min(have.get(kind, 0) // ask for kind, ask in kinds.items() if ask)), 1)


def grade(
    entries: dict[str, Path],
    args: argparse.Namespace,
    key: bytes | None,
    done: Callable[[Outcome], None],
    begin: Callable[[int], None],
) -> None:
    """Grade `entries` on the cluster at `args.ray`, each task sealing with `key`, writing each
    report folder under `args.out`, calling `begin` with how many tasks run at once when they are
    submitted, and `done` with each outcome as it comes; on Ctrl-C, cancel the tasks (their
    workers killed, the gradings with them) and raise KeyboardInterrupt. The driver is connected
    already (`connect`)."""
    try:
        asks = resources(args)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
        attempts = Attempts.options(scheduling_strategy=here).remote()
        print(tr(args.lang, "drive_grading_ray", count=len(entries), address=args.ray,
                 cpus=asks["num_cpus"], gpus=asks["num_gpus"],
                 profile=profile_name(args.lang, args.profile)),
              file=sys.stderr, flush=True)  # fmt: skip
        pending = {
            grade_task.options(**asks).remote(name, entry.name, pack(entry), args, key, attempts): (
                name,
                entry,
            )
            for name, entry in entries.items()
        }
        begin(at_once(asks))
        try:
            while pending:
                (ready,), _ = ray.wait(list(pending), num_returns=1)
                name, entry = pending.pop(ready)
                done(collect(ready, name, entry, args.out))
        except KeyboardInterrupt:
            for task in pending:
                ray.cancel(task, force=True)
            raise
    finally:
        ray.shutdown()


class NoCluster(RuntimeError):
    """No Ray cluster answers at the address given; the message says how to start one."""


def connect(args: argparse.Namespace) -> None:
    """Connect this process, the driver, to the cluster at `args.ray`, or raise `NoCluster`."""
    try:
        ray.init(address=args.ray, runtime_env=runtime_env(args), log_to_driver=False)
    except (ConnectionError, ValueError):  # none at that address; an address Ray cannot read
        raise NoCluster(
            said(
                "--ray {address}: no Ray cluster was found there. Start one on this machine with "
                "`ray start --head --node-ip-address=127.0.0.1` (then --ray auto), or give the "
                "address of a running one (host:6379)",
                address=args.ray,
            )
        ) from None


def collect(task: ray.ObjectRef, name: str, entry: Path, out: Path) -> Outcome:
    """A finished task's outcome, its report folder written to `out`/`name`; or, where both
    attempts failed, a row that says why."""
    try:
        attempt, outcome, folder = ray.get(task)
    except ray.exceptions.RayError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        failure = said(
            "failed {count} times on Ray: {error}",
            count=MAX_RETRIES + 1,
            error=type(error).__name__,
        )
        (out / name).mkdir(parents=True, exist_ok=True)
        clear(out / name)
        (out / name / "grade.log").write_text(str(error), encoding="utf-8", errors="replace")
        return Outcome(name, str(entry), None, failure, lines[-LOG_LINES:], 0.0)
    clear(out / name)
    unpack(folder, out)
    retried = (
        (
            said(
                "retried on Ray (attempt {attempt} of {attempts})",
                attempt=attempt,
                attempts=MAX_RETRIES + 1,
            ),
        )
        if attempt > 1
        else ()
    )
    return replace(outcome, entry=str(entry), remarks=retried)
