"""Grading a drive's submissions on this machine: each in a process (group) of its own,
`python -m grader ENTRY --out OUT/<name> ...`, with a timeout, up to `jobs` at once; a submission
that breaks or hangs the grader costs only its own outcome. Each grading is forked from one warm
process where it can be (`forking.py`), else started afresh. Where each grading would start the
same zygotes, the drive starts them once and lends them to every grading (`lent_zygotes`). On
Ctrl-C the gradings under way are stopped within a second or two and none starts after it.
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from grader import KIT_ROOT, interrupt
from grader.cli import parser as grading_parser
from grader.drive import resume
from grader.drive.forking import Forker, ServerGone
from grader.parts import PARTS
from grader.report.compare import ReportError, load
from grader.report.leaderboard import Outcome
from grader.said import said
from grader.sandbox import isolation
from grader.sandbox.launch import die_with_the_grader
from grader.sandbox.process import surely_started_zygotes
from grader.sandbox.zygotes import Zygotes

LOG_LINES = 4  # of a failed grading's output, shown in its row
RUNNING: set[subprocess.Popen] = set()  # the gradings under way, stopped on Ctrl-C
LAUNCHING = threading.Lock()  # held while a grading starts, and while Ctrl-C stops them all
STOPPING = threading.Event()  # set on Ctrl-C: no grading starts after it
WAKE_EVERY = 1.0  # seconds between the main thread's looks for Ctrl-C while gradings run: a
# SIGINT taken by a library's thread (the grader's own threads block it) wakes no lock


def command(argv: list[str]) -> list[str]:
    """The command line of a grading started afresh: `python -m grader ARGV`."""
    return [sys.executable, "-m", "grader", *argv]


def grader_argv(entry: Path, report_dir: Path, args: argparse.Namespace) -> list[str]:
    """`python -m grader`'s arguments for one submission, with the batch's options."""
    line = [str(entry.resolve()), "--out", str(report_dir)]
    line += ["--profile", args.profile, "--lang", args.lang, "--isolation", args.isolation]
    if args.seed is not None:
        line += ["--seed", str(args.seed)]
    if args.parts:
        line += ["--parts", ",".join(args.parts)]
    if args.rubric is not None:
        line += ["--rubric", str(args.rubric.resolve())]
    if args.seal_key is not None:
        line += ["--seal-key", str(args.seal_key.resolve())]
    return line + args.grader_options


# What a grading started here inherits of the drive's zygotes: its environment's variables and
# the descriptors it keeps (`Zygotes.handed_down`); none where the drive lends none.
Lent = tuple[dict[str, str], tuple[int, ...]]
NOTHING_LENT: Lent = ({}, ())


def grade_one(
    name: str,
    entry: Path,
    args: argparse.Namespace,
    lent: Lent = NOTHING_LENT,
    forker: Forker | None = None,
) -> Outcome:
    """Grade `entry` in a process (group) of its own, forked by `forker` where there is one,
    with the zygotes `lent`; its report, or why there is none."""
    report_dir = (args.out / name).resolve()
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a name too long for the file system, say
        return Outcome(
            name, str(entry), None, said("no report folder: {error}", error=error), [], 0.0
        )
    resume.clear(report_dir)
    started = time.monotonic()
    argv = grader_argv(entry, report_dir, args)
    try:
        if forker is None:
            failure, output = afresh(argv, report_dir, args, lent)
        else:
            failure, output = forked(argv, report_dir, args, lent, forker)
    except Interrupted:
        return Outcome(name, str(entry), None, said("interrupted"), [], 0.0)
    seconds = time.monotonic() - started
    report = None
    if not failure:
        try:
            report = load(report_dir).report
        except ReportError as error:
            failure = said("exit status 0 but {problem}", problem=error)
    tail = [line for line in output.splitlines() if line.strip()][-LOG_LINES:]
    return Outcome(name, str(entry), report, failure, tail, seconds)


class Interrupted(Exception):
    """Ctrl-C came before the grading started: it does not start."""


# Why a grading gave no report ("" where it ended with status 0), and its output.
Ran = tuple[str, str]


def failure_of(status: int | None, args: argparse.Namespace) -> str:
    """What an exit `status` says of a grading ("" for 0); None: it timed out and was killed."""
    if status is None:
        return said("timed out after {seconds} s", seconds=f"{args.timeout:g}")
    return said("exit status {status}", status=status) if status else ""


def afresh(argv: list[str], report_dir: Path, args: argparse.Namespace, lent: Lent) -> Ran:
    """`python -m grader ARGV` started afresh, its output also written to its `grade.log`."""
    with LAUNCHING:  # Ctrl-C stops every grading started, and none starts after it
        if STOPPING.is_set():
            raise Interrupted
        process = subprocess.Popen(
            command(argv),
            cwd=KIT_ROOT,
            stdin=subprocess.DEVNULL,  # the drive's input stays the drive's
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # a group of its own, to kill whole on a timeout
            preexec_fn=start_grading,
            env=os.environ | lent[0],
            pass_fds=lent[1],
        )
        RUNNING.add(process)
    try:
        output, _ = process.communicate(timeout=args.timeout)
        status = process.returncode
    except subprocess.TimeoutExpired:
        stop(process)
        output, _ = process.communicate()
        status = None
    finally:
        RUNNING.discard(process)
    (report_dir / "grade.log").write_text(output, encoding="utf-8")
    return failure_of(status, args), output


def forked(
    argv: list[str], report_dir: Path, args: argparse.Namespace, lent: Lent, forker: Forker
) -> Ran:
    """`python -m grader ARGV` forked by `forker`'s server, its output also written to its
    `grade.log` once it ends (the report folder holds nothing else while it grades); started
    afresh where the server has died, before or during the grading (a fault of the machine,
    never of the submission)."""
    with tempfile.TemporaryDirectory(prefix="grade-all-log-") as folder:
        log = Path(folder) / "grade.log"
        try:
            with LAUNCHING:  # as `afresh`: Ctrl-C's `forker.kill_all` reaches it once begun
                if STOPPING.is_set():
                    raise Interrupted
                grading = forker.begin(argv, os.environ | lent[0], lent[1], log)
            failure = failure_of(forker.wait(grading, args.timeout), args)
        except ServerGone:
            resume.clear(report_dir)  # what the grading had written before the server died
            return afresh(argv, report_dir, args, lent)
        output = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    (report_dir / "grade.log").write_text(output, encoding="utf-8")
    return failure, output


def start_grading() -> None:
    """A grading's `preexec_fn`: it dies with grade-all (or its Ray worker), and it has SIGINT
    unblocked, which the thread that starts it blocks (`interrupt.leave_to_the_main_thread`)."""
    die_with_the_grader()
    interrupt.unblock_ctrl_c()


def stop(process: subprocess.Popen) -> None:
    """Kill a grading's process group; its sandbox workers die with it (PDEATHSIG, or their
    keeper's lifeline where they were forked from a zygote)."""
    with contextlib.suppress(ProcessLookupError):  # it had just ended
        os.killpg(process.pid, signal.SIGKILL)


def grade_locally(
    entries: dict[str, Path],
    args: argparse.Namespace,
    jobs: int,
    done: Callable[[Outcome], None],
    begin: Callable[[], None],
) -> None:
    """Grade `entries` on this machine, `jobs` at a time, calling `begin` as the first starts
    and `done` with each outcome as it comes; on Ctrl-C, stop the gradings under way and raise
    KeyboardInterrupt."""
    pool = ThreadPoolExecutor(jobs, initializer=interrupt.leave_to_the_main_thread)
    zygotes = forker = None
    try:
        zygotes = lent_zygotes(args, len(entries))
        lent = zygotes.handed_down() if zygotes is not None else NOTHING_LENT
        forker = Forker.start()  # while this process has one thread: before `begin`'s
        begin()
        pending = {pool.submit(grade_one, name, entry, args, lent, forker)
                   for name, entry in entries.items()}  # fmt: skip
        while pending:
            finished, pending = wait(pending, timeout=WAKE_EVERY, return_when=FIRST_COMPLETED)
            for future in finished:
                done(future.result())
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        with LAUNCHING:
            STOPPING.set()
            started = list(RUNNING)
        for process in started:
            stop(process)  # each grading runs in a session of its own: Ctrl-C did not reach it
        if forker is not None:
            forker.kill_all()
        raise
    finally:
        pool.shutdown()
        if forker is not None:
            forker.close()
        if zygotes is not None:
            zygotes.close()


def lent_zygotes(args: argparse.Namespace, gradings: int) -> Zygotes | None:
    """The zygotes every one of the drive's `gradings` borrows instead of starting its own,
    started once, here: where there are several, sandboxed, and each would start the same ones
    as it begins (`surely_started_zygotes`), with the time to start that the gradings' own
    options give; else None."""
    wanted = surely_started_zygotes(args.parts or PARTS) if args.isolation == "bwrap" else []
    if not wanted or gradings < 2:
        return None
    seconds = grading_parser().parse_args(["SUBMISSION", *args.grader_options]).import_timeout
    zygotes = Zygotes(isolation.probe("bwrap"), seconds)
    zygotes.start(wanted)
    return zygotes
