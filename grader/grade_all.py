"""`python -m grader grade-all FOLDER`: grade every submission in a folder, then a leaderboard.

Each entry of FOLDER that is a folder, a `.zip`, a `.tar.gz` or a `.tgz` is graded by a process
of its own, `python -m grader ENTRY --out OUT/<name> ...`, with a timeout: a submission that
breaks or hangs the grader costs only its own row, and the batch goes on. Up to `--jobs`
gradings run at once (the number of cores by default). On a machine with a CUDA device, when the
kernel part is graded, they run one at a time: the kernel's timing is a ratio measured on the one
GPU, and two gradings timing kernels at once would each measure the other's load. (The CPU
timings are ratios to the reference measured in the same rounds, so they bear a shared machine.)

Each report folder also gets `grade.log`, the grader's output. Then `OUT/leaderboard.csv` and
`OUT/leaderboard.html` (`leaderboard.py`), grade-all's own outputs (`OWN_OUTPUTS`). Exit status 0
when the leaderboard was written; 2 when FOLDER holds no submission or an option is wrong (OUT
may not be FOLDER itself, where report folders would land among the submissions).

A second run on the same folder and OUT resumes the drive: a submission whose report was made by
the same kit version, profile, seed, rubric and parts, from the same files, is kept, not graded
again (`resume.py`); Ctrl-C leaves such a drive. `--ray ADDRESS` grades each submission as a task
on a Ray cluster instead of a process here (`cluster.py`, Ray imported only then), and `--merge
DIR...` grades nothing: one leaderboard of report folders graded elsewhere (`merge.py`).

A submission's `<name>`, its report folder and its name on the leaderboard, is chosen so that no
two submissions share a folder and none is one of grade-all's own outputs (a submission named
`leaderboard.html.zip` must not become `OUT/leaderboard.html/`), comparing names as a case- and
normalisation-insensitive file system would (`unique_key`). Entries are taken in sorted order,
and each gets the first free name of: its name without the archive suffix (`a.zip` -> `a`); its
whole name (`a.zip`), which says which entry it was; its whole name and `-2`, `-3`, ... So `a/`,
`a.tgz` and `a.zip` are reported as `a`, `a.tgz` and `a.zip`, and `leaderboard.html.zip` as
`leaderboard.html.zip`.
"""

import argparse
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grader import KIT_ROOT, resume
from grader.parts import PARTS
from grader.report import leaderboard
from grader.report.compare import ReportError, load
from grader.report.leaderboard import Outcome
from grader.sandbox import isolation
from grader.sandbox.process import die_with_the_grader
from grader.scoring.profiles import PROFILES
from grader.scoring.rubric import parse_parts
from grader.similarity.drive import read_drive, shown, similarity_report
from grader.text import clean

SUFFIXES = (".zip", ".tar.gz", ".tgz")
# What grade-all writes in OUT beside the reports: the leaderboard, and the similar pairs' pages.
OWN_OUTPUTS = ("leaderboard.csv", "leaderboard.html", "similarity")
DEFAULT_OUT = Path("reports") / "leaderboard"
DEFAULT_TIMEOUT = 3600.0  # seconds for one grading: the grader's own part limits come far sooner
LOG_LINES = 4  # of a failed grading's output, shown in its row
RUNNING: set[subprocess.Popen] = set()  # the gradings under way, stopped on Ctrl-C
LAUNCHING = threading.Lock()  # held while a grading starts, and while Ctrl-C stops them all
STOPPING = threading.Event()  # set on Ctrl-C: no grading starts after it


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m grader grade-all",
        description="Grade every submission in FOLDER (folders, .zip, .tar.gz, .tgz), "
        "each into OUT/<name>/ (the name made unique, and never one of the leaderboard's "
        "files), then write OUT/leaderboard.html and OUT/leaderboard.csv. "
        "Any other option (--rubric, --memory-limit-gb, the timeouts) goes to every grading.",
    )
    cli.add_argument("folder", type=Path, nargs="?", help="the folder holding the submissions")
    cli.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    cli.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                     help="gradings at once (default: the number of cores)")  # fmt: skip
    cli.add_argument("--parts", type=parse_parts, help="comma-separated part ids (default all)")
    cli.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    cli.add_argument("--seed", type=int, help="a private seed, the same for every submission")
    cli.add_argument("--lang", choices=("en", "zh"), default="en")
    cli.add_argument("--isolation", choices=isolation.MODES, default="auto",
                     help="workers in bubblewrap (auto, bwrap) or not (none)")  # fmt: skip
    cli.add_argument("--allow-unisolated", action="store_true",
                     help="grade even where no sandbox can be made: every row then says "
                          "'not isolated: not for a hiring decision'")  # fmt: skip
    cli.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                     help="seconds one grading may take (default: an hour)")  # fmt: skip
    cli.add_argument("--rubric", type=Path, help="a TOML file of weights and points, for all")
    cli.add_argument("--ray", metavar="ADDRESS",
                     help="grade on the Ray cluster at ADDRESS ('auto': the local one), each "
                          "submission a task (pip install '.[cluster]')")  # fmt: skip
    cli.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                     help="no grading: one leaderboard of the report folders in each DIR "
                          "(grade-all outputs, or report folders), graded elsewhere")  # fmt: skip
    cli.add_argument("--allow-mixed", action="store_true",
                     help="with --merge: take reports of other settings, marked")  # fmt: skip
    return cli


def submissions(folder: Path, out: Path) -> dict[str, Path]:
    """`name -> entry` for each submission in `folder`, each name a report folder of its own
    (`report_name`); other entries are named on stderr and skipped."""
    found: dict[str, Path] = {}
    taken = {unique_key(own) for own in OWN_OUTPUTS}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or out.resolve().is_relative_to(entry.resolve()):
            continue  # hidden, or OUT itself (or the folder holding it)
        if not (entry.is_dir() or entry.name.endswith(SUFFIXES)):
            print(f"  skipping {clean(entry.name, 200)}: not a folder, .zip, .tar.gz or .tgz",
                  file=sys.stderr)  # fmt: skip
            continue
        name = report_name(entry.name, taken)
        taken.add(unique_key(name))
        found[name] = entry
    return found


def unique_key(name: str) -> str:
    """`name` as a case- and normalisation-insensitive file system (macOS, Windows) tells names
    apart: two names of one key would be one folder there."""
    return unicodedata.normalize("NFC", name).casefold()


def report_name(entry: str, taken: set[str]) -> str:
    """The first of these names whose `unique_key` is not in `taken`: the entry's name without
    its archive suffix, its whole name, its whole name and `-2`, `-3`, ..."""
    stem = next(entry.removesuffix(suffix) for suffix in (*SUFFIXES, "") if entry.endswith(suffix))
    candidates = itertools.chain(
        (stem, entry), (f"{entry}-{count}" for count in itertools.count(2))
    )
    return next(name for name in candidates if unique_key(name) not in taken)


def command(entry: Path, report_dir: Path, args: argparse.Namespace) -> list[str]:
    """The grader's command line for one submission, with the batch's options."""
    line = [sys.executable, "-m", "grader", str(entry.resolve()), "--out", str(report_dir)]
    line += ["--profile", args.profile, "--lang", args.lang, "--isolation", args.isolation]
    if args.seed is not None:
        line += ["--seed", str(args.seed)]
    if args.parts:
        line += ["--parts", ",".join(args.parts)]
    if args.rubric is not None:
        line += ["--rubric", str(args.rubric.resolve())]
    return line + args.grader_options


def grade_one(name: str, entry: Path, args: argparse.Namespace) -> Outcome:
    """Grade `entry` in a process (group) of its own; its report, or why there is none."""
    report_dir = (args.out / name).resolve()
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a name too long for the file system, say
        return Outcome(name, str(entry), None, f"no report folder: {error}", [], 0.0)
    resume.clear(report_dir)
    started = time.monotonic()
    with LAUNCHING:  # Ctrl-C stops every grading started, and none starts after it
        if STOPPING.is_set():
            return Outcome(name, str(entry), None, "interrupted", [], 0.0)
        process = subprocess.Popen(
            command(entry, report_dir, args),
            cwd=KIT_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # a group of its own, to kill whole on a timeout
            preexec_fn=die_with_the_grader,  # and gone with grade-all (or its Ray worker)
        )
        RUNNING.add(process)
    try:
        output, _ = process.communicate(timeout=args.timeout)
        failure = f"exit status {process.returncode}" if process.returncode else ""
    except subprocess.TimeoutExpired:
        stop(process)
        output, _ = process.communicate()
        failure = f"timed out after {args.timeout:g} s"
    finally:
        RUNNING.discard(process)
    seconds = time.monotonic() - started
    (report_dir / "grade.log").write_text(output, encoding="utf-8")
    report = None
    if not failure:
        try:
            report = load(report_dir).report
        except ReportError as error:
            failure = f"exit status 0 but {error}"
    tail = [line for line in output.splitlines() if line.strip()][-LOG_LINES:]
    return Outcome(name, str(entry), report, failure, tail, seconds)


def stop(process: subprocess.Popen) -> None:
    """Kill a grading's process group; its sandbox workers die with it (PDEATHSIG)."""
    with contextlib.suppress(ProcessLookupError):  # it had just ended
        os.killpg(process.pid, signal.SIGKILL)


def gpu_present() -> bool:
    import torch  # only when several gradings could time kernels at once; it takes seconds

    return torch.cuda.is_available()


def similar_pairs(entries: dict[str, Path], out: Path) -> list[dict]:
    """The leaderboard's rows of similar pairs (`grader.similarity`), their pages written under
    `out/similarity/`; none, with a warning, where the comparison fails: it never changes a score,
    so it never costs the leaderboard either."""
    print("Comparing the submissions' code (similar pairs, for the reviewer)...", file=sys.stderr)
    try:
        return [shown(row) for row in similarity_report(read_drive(entries), out)]
    except Exception as error:
        print(f"grade-all: the code comparison failed, the leaderboard has no similar pairs: "
              f"{type(error).__name__}: {clean(str(error), 300)}", file=sys.stderr)  # fmt: skip
        return []


def progress(done: int, total: int, outcome: Outcome) -> str:
    """One line per finished grading: its score, or why it has none (cleaned: a submission's
    name and the grader's last words may carry its text)."""
    if outcome.report is None:
        why = outcome.tail[-1] if outcome.tail else "no output"
        result = f"NOT GRADED ({outcome.failure}): {why}"
    else:
        result = f"{outcome.report['score']:g} / {outcome.report['max_score']:g}"
    line = f"[{done}/{total}] {outcome.name}: {result} ({outcome.seconds:.0f} s)"
    line += "".join(f"; {remark}" for remark in outcome.remarks)
    return clean(line.replace("\n", " "), 500)


def grade_locally(
    entries: dict[str, Path], args: argparse.Namespace, jobs: int, done: Callable[[Outcome], None]
) -> None:
    """Grade `entries` on this machine, `jobs` at a time, calling `done` with each outcome as it
    comes; on Ctrl-C, stop the gradings under way and raise KeyboardInterrupt."""
    pool = ThreadPoolExecutor(jobs)
    try:
        futures = [pool.submit(grade_one, name, entry, args) for name, entry in entries.items()]
        for future in as_completed(futures):
            done(future.result())
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        with LAUNCHING:
            STOPPING.set()
            started = list(RUNNING)
        for process in started:
            stop(process)  # each grading runs in a session of its own: Ctrl-C did not reach it
        raise
    finally:
        pool.shutdown()


def main(argv: list[str]) -> int:
    args, grader_options = parser().parse_known_args(argv)
    args.grader_options = grader_options  # forwarded to every grading, which checks them
    if args.merge:
        from grader import merge

        return merge.main(args)
    if args.folder is None or not args.folder.is_dir():
        print(f"grade-all: {args.folder} is not a folder: give the folder that holds the "
              "submissions (folders, .zip, .tar.gz)", file=sys.stderr)  # fmt: skip
        return 2
    if args.jobs < 1:
        print(f"grade-all: --jobs {args.jobs}: give 1 or more", file=sys.stderr)
        return 2
    if args.out.resolve() == args.folder.resolve():
        print(f"grade-all: --out {args.out} is the submissions' folder: give another, where the "
              "reports cannot mix with the submissions", file=sys.stderr)  # fmt: skip
        return 2
    try:
        found = isolation.probe(args.isolation)
    except RuntimeError as error:
        print(f"grade-all: {error}", file=sys.stderr)
        return 2
    if not found.isolated and not args.allow_unisolated:
        print(f"grade-all: {found.describe()}. A drive ranks people: install bubblewrap "
              "(Debian/Ubuntu: apt-get install bubblewrap), or pass --allow-unisolated to grade "
              "anyway, every row marked.", file=sys.stderr)  # fmt: skip
        return 2
    args.isolation = "bwrap" if found.isolated else "none"  # every grading, the same way
    entries = submissions(args.folder, args.out)
    if not entries:
        print(f"grade-all: {args.folder} holds no submission: put each candidate's folder, "
              ".zip or .tar.gz in it", file=sys.stderr)  # fmt: skip
        return 2
    try:
        settings = resume.wanted(args)
    except (ValueError, OSError) as error:
        print(f"grade-all: {error}", file=sys.stderr)
        return 2
    outcomes: list[Outcome] = []

    def done(outcome: Outcome) -> None:
        outcomes.append(outcome)
        print(progress(len(outcomes), len(entries), outcome), file=sys.stderr, flush=True)

    todo = {}
    for name, entry in entries.items():
        earlier = resume.kept(name, entry, args.out / name, settings)
        if earlier is None:
            todo[name] = entry
        else:
            done(earlier)
    try:
        if todo and args.ray:
            from grader import cluster  # Ray is imported only here

            cluster.grade(todo, args, done)
        elif todo:
            grade_locally(todo, args, local_jobs(args, len(todo)), done)
    except KeyboardInterrupt:
        print("\ngrade-all: interrupted; the gradings under way were stopped, no leaderboard "
              "written. The same command again grades the rest.", file=sys.stderr)  # fmt: skip
        return 130
    similar = similar_pairs(entries, args.out)
    page = leaderboard.write_all(outcomes, args.out, vars(args), similar)
    print(f"\nLeaderboard: {page}  (also leaderboard.csv)")
    return 0


def local_jobs(args: argparse.Namespace, count: int) -> int:
    """Gradings at once on this machine: one where two could time kernels on one GPU."""
    jobs = min(args.jobs, count)
    if jobs > 1 and "kernel" in (args.parts or PARTS) and gpu_present():
        print("A CUDA device is present: grading one submission at a time, so that no two "
              "kernel timings share the GPU.", file=sys.stderr)  # fmt: skip
        jobs = 1
    print(f"Grading {count} submissions, {jobs} at a time ({args.profile} profile)...",
          file=sys.stderr)  # fmt: skip
    return jobs
