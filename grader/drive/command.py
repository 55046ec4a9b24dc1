"""`python -m grader grade-all FOLDER`: grade every submission in a folder, then a leaderboard.

Each entry of FOLDER that is a folder, a `.zip`, a `.tar.gz` or a `.tgz` is graded by a process of
its own, with a timeout (`local.py`): a submission that breaks or hangs the grader costs only its
own row, and the batch goes on. Up to `--jobs` gradings run at once (the number of cores by
default). On a machine with a CUDA device, when the kernel part is graded, they run one at a time:
the kernel's timing is a ratio measured on the one GPU, and two gradings timing kernels at once
would each measure the other's load. (The CPU timings are ratios to the reference measured in the
same rounds, so they bear a shared machine.)

Every option is checked once, before anything is graded or written (`option_problems`: the
folders, --jobs, --timeout, the rubric, the options passed on to each grading, which the
grader's own parser reads, the reviewer's notes: `reviews.toml` in FOLDER or `--reviews FILE`,
`reviews.py`); a wrong one ends the drive with exit status 2 and its message. While
the gradings run, stderr shows a line per finished grading and a running count with an estimate
of the time left (`progress.py`). Every line it prints is in the drive's language (`--lang`,
`i18n.tr`; what the grader says, `messages.text_in`), and so is every page it writes, a report
kept from an earlier run included (`resume.py`); only the texts of errors raised in English
elsewhere (a refused archive, a seal key, a rubric or a reviewer's file that cannot be read,
argparse's own) are quoted as they are, inside a line of that language.

Each report folder also gets `grade.log`, the grader's output, and its report.json the report's
standing in the drive (`standing.py`, outside the seal). Then `OUT/leaderboard.csv` and
`OUT/leaderboard.html`, with the item analysis, how each check did across the drive, `OUT/items.csv`
and `OUT/items.html` (`outputs.py`), and the similar pairs' pages: the drive's own outputs
(`names.OWN_OUTPUTS`), each replaced whole, never half-written. A failed drive never replaces a
leaderboard:

- every submission graded: the leaderboard is written; exit status 0.
- some not graded (the grader refused or failed on them, or timed out): the leaderboard is
  written, each of them a row saying why, since the others' scores stand; exit status 1, with a
  closing line naming them and where their logs are, for the script or CI job that ran the drive.
- none graded (every row would say "not graded": a machine or set-up problem more often than
  the submissions'): no leaderboard is written, an earlier one stays as it was; exit status 1.
- Ctrl-C: the gradings under way are stopped within a second or two, no leaderboard is written;
  exit status 130.
- a wrong option, or FOLDER holding no submission (OUT may not be FOLDER itself, where report
  folders would land among the submissions): nothing is graded or written; exit status 2.

A second run on the same folder and OUT resumes the drive: a submission whose report was made by
the same kit version, profile, seed, rubric and parts, from the same files, is kept, not graded
again (`resume.py`); Ctrl-C leaves such a drive. `--ray ADDRESS` grades each submission as a task
on a Ray cluster instead of a process here (`cluster.py`, Ray imported only then), and `--merge
DIR...` grades nothing: one leaderboard of report folders graded elsewhere (`merge.py`).

Each submission's name and report folder: `names.py`.
"""

import argparse
import contextlib
import importlib.util
import io
import math
import os
import sys
from pathlib import Path

from grader import seal_key
from grader.cli import parser as grading_parser
from grader.drive import merge, outputs, resume
from grader.drive.local import grade_locally
from grader.drive.names import REVIEWS, submissions
from grader.drive.progress import DriveProgress, grading_line
from grader.parts import PARTS
from grader.report.i18n import tr
from grader.report.leaderboard import Outcome
from grader.report.messages import said_in, text_in
from grader.report.reviews import Review, ReviewsError, load_reviews
from grader.said import message_of
from grader.sandbox import isolation
from grader.scoring.profiles import PROFILES
from grader.scoring.rubric import load_rubric, parse_parts
from grader.similarity.drive import obfuscated, read_drive, shown, similarity_report
from grader.text import clean

DEFAULT_OUT = Path("reports") / "leaderboard"
DEFAULT_TIMEOUT = 3600.0  # seconds for one grading: the grader's own part limits come far sooner
NOT_GRADED = 1  # exit status: some submission could not be graded
USAGE = 2  # exit status: a wrong option or folder, nothing graded
INTERRUPTED = 130  # exit status: Ctrl-C


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m grader grade-all",
        description="Grade every submission in FOLDER (folders, .zip, .tar.gz, .tgz), "
        "each into OUT/<name>/ (the name made unique, and never one of the leaderboard's "
        "files), then write each report's standing in the drive into its report.json, "
        "OUT/leaderboard.html and .csv, and the item analysis, OUT/items.html and .csv. "
        "Any other option (--rubric, --memory-limit-gb, the timeouts) goes to every grading.",
    )
    cli.add_argument("folder", type=Path, nargs="?", help="the folder holding the submissions")
    cli.add_argument("--out", type=Path, default=DEFAULT_OUT,
                     help=f"the folder of the reports and the leaderboard (default "
                          f"{DEFAULT_OUT})")  # fmt: skip
    cli.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                     help="gradings at once (default: the number of cores)")  # fmt: skip
    cli.add_argument("--parts", type=parse_parts, help="comma-separated part ids (default all)")
    cli.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                     help="how many examples each check tries: quick (the default) or full, "
                          "for a hiring decision")  # fmt: skip
    cli.add_argument("--seed", type=int, help="a private seed, the same for every submission")
    cli.add_argument("--lang", choices=("en", "zh"), default="en",
                     help="the language of the reports, the leaderboard and these lines "
                          "(default en)")  # fmt: skip
    cli.add_argument("--isolation", choices=isolation.MODES, default="auto",
                     help="workers in bubblewrap (auto, bwrap) or not (none)")  # fmt: skip
    cli.add_argument("--allow-unisolated", action="store_true",
                     help="grade even where no sandbox can be made: every row then says "
                          "'not isolated: not for a hiring decision'")  # fmt: skip
    cli.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                     help="seconds one grading may take (default: an hour)")  # fmt: skip
    cli.add_argument(
        "--rubric", type=Path, help="a TOML file of weights, points and severity factors, for all"
    )
    cli.add_argument("--ray", metavar="ADDRESS",
                     help="grade on the Ray cluster at ADDRESS ('auto': the local one), each "
                          "submission a task (pip install '.[cluster]')")  # fmt: skip
    cli.add_argument("--merge", type=Path, nargs="+", metavar="DIR",
                     help="no grading: one leaderboard of the report folders in each DIR "
                          "(grade-all outputs, or report folders), graded elsewhere")  # fmt: skip
    cli.add_argument("--allow-mixed", action="store_true",
                     help="with --merge: take reports of other settings, marked")  # fmt: skip
    cli.add_argument("--reviews", type=Path, metavar="FILE",
                     help="the reviewer's notes, shown on the leaderboard, never scored "
                          f"(default: FOLDER/{REVIEWS}, where there is one; --merge: none): "
                          "TOML, a [submissions.\"NAME\"] table per submission with note = "
                          "\"...\" and [[submissions.\"NAME\".flags]] tables of about "
                          "(\"similar: OTHER\" or the start of a flag's text), verdict "
                          "(\"confirmed\" or \"dismissed\") and reason")  # fmt: skip
    cli.add_argument("--seal-key", type=Path, metavar="FILE",
                     help="the hiring team's key: every report is sealed with it, and only "
                          "reports it verifies are kept (resume) or merged (default: "
                          f"{seal_key.DEFAULT_SHOWN})")  # fmt: skip
    return cli


def gpu_present() -> bool:
    import torch  # only when several gradings could time kernels at once; it takes seconds

    return torch.cuda.is_available()


def similar_pairs(entries: dict[str, Path], out: Path, lang: str = "en") -> list[dict]:
    """The leaderboard's rows of similar pairs (`grader.similarity`), their pages written under
    `out/similarity/` in `lang`, after a row for each obfuscated file (`obfuscated`, its reason in
    `lang`). Where the comparison fails, a row that says so in their place, and a warning: it
    never changes a score, so it never costs the leaderboard either."""
    print(tr(lang, "drive_comparing"), file=sys.stderr)
    intakes = read_drive(entries, lang)
    hidden = [
        {**row, "obfuscated": said_in(lang, row, "obfuscated")} for row in obfuscated(intakes)
    ]
    try:
        return hidden + [shown(row) for row in similarity_report(intakes, out, lang=lang)]
    except Exception as error:
        why = f"{type(error).__name__}: {clean(str(error), 300)}"
        print(tr(lang, "drive_comparison_failed", why=why), file=sys.stderr)
        return [*hidden, {"failed": why}]


def main(argv: list[str]) -> int:
    args, grader_options = parser().parse_known_args(argv)
    args.grader_options = grader_options  # forwarded to every grading
    if args.merge:
        return merge.main(args)
    try:
        return drive(args)
    except KeyboardInterrupt:
        print("\n" + tr(args.lang, "drive_interrupted"), file=sys.stderr)
        return INTERRUPTED


def drive(args: argparse.Namespace) -> int:
    """Check the options, grade each submission not kept from an earlier run, write the
    leaderboard (`finish`); the exit status (see the module)."""
    problems = option_problems(args)
    for problem in problems:
        print(tr(args.lang, "drive_error", error=problem), file=sys.stderr)
    if problems:
        return USAGE
    args.reviews = reviews_path(args)
    reviews = load_reviews(args.reviews)  # checked by `option_problems`
    try:
        found = isolation.probe(args.isolation)
    except RuntimeError as error:
        return usage(args.lang, error)
    if not found.isolated and not args.allow_unisolated:
        reason = text_in(args.lang, found.describe())
        print(tr(args.lang, "drive_unisolated", reason=reason), file=sys.stderr)
        return USAGE
    args.isolation = "bwrap" if found.isolated else "none"  # every grading, the same way
    try:
        key = seal_key.grading_key(args.seal_key, found.isolated)
    except seal_key.SealKeyError as error:
        return usage(args.lang, error)
    entries = submissions(args.folder, args.out, args.lang)
    if not entries:
        print(tr(args.lang, "drive_no_submission", folder=args.folder), file=sys.stderr)
        return USAGE
    try:
        settings = resume.wanted(args)
    except (ValueError, OSError) as error:
        return usage(args.lang, error)
    earlier = {
        name: resume.kept(name, entry, args.out / name, settings, key, args.lang)
        for name, entry in entries.items()
    }
    todo = {name: entries[name] for name, outcome in earlier.items() if outcome is None}
    if todo and args.ray:
        from grader.drive import cluster  # Ray is imported only here

        try:
            cluster.connect(args)
        except cluster.NoCluster as error:
            return usage(args.lang, error)
    with DriveProgress(len(entries), args.lang) as progress:
        for outcome in earlier.values():
            if outcome is not None:
                progress.kept(outcome)
        if todo:
            grade(todo, args, key, progress)
    return finish(progress.outcomes, entries, args, reviews)


def usage(lang: str, error: Exception) -> int:
    """Say `error`, which stops the drive before anything is graded, in `lang` where it is a
    message of the kit's (`said`); `USAGE`."""
    print(tr(lang, "drive_error", error=text_in(lang, message_of(error))), file=sys.stderr)
    return USAGE


def option_problems(args: argparse.Namespace) -> list[str]:
    """What is wrong with grade-all's options, each with what to do, in the drive's language;
    none when a drive may start. Nothing is graded or written to find out."""
    lang, problems = args.lang, []
    if args.folder is None or not args.folder.is_dir():
        problems.append(tr(lang, "drive_not_a_folder", folder=args.folder))
    elif args.out.resolve() == args.folder.resolve():
        problems.append(tr(lang, "drive_out_is_folder", out=args.out))
    if args.out.exists() and not args.out.is_dir():
        problems.append(tr(lang, "drive_out_is_file", out=args.out))
    if args.jobs < 1:
        problems.append(tr(lang, "drive_jobs", jobs=args.jobs))
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        problems.append(tr(lang, "drive_timeout", timeout=f"{args.timeout:g}"))
    if args.ray and importlib.util.find_spec("ray") is None:
        problems.append(tr(lang, "drive_no_ray"))
    return (
        problems
        + rubric_problems(args.rubric, lang)
        + review_problems(reviews_path(args))
        + forwarded_problems(args.grader_options, lang)
    )


def rubric_problems(path: Path | None, lang: str) -> list[str]:
    """Why the rubric at `path` cannot be read (`load_rubric`), if it cannot, in `lang`."""
    try:
        load_rubric(path)
    except (ValueError, OSError) as error:
        return [tr(lang, "drive_rubric", error=text_in(lang, message_of(error)))]
    return []


def reviews_path(args: argparse.Namespace) -> Path | None:
    """The reviewer's notes: `--reviews FILE`, else `reviews.toml` in FOLDER where there is one,
    else None."""
    if args.reviews is not None or args.folder is None:
        return args.reviews
    beside = args.folder / REVIEWS
    return beside if beside.exists() else None


def review_problems(path: Path | None) -> list[str]:
    """Why the reviewer's notes at `path` cannot be read (`ReviewsError`: the line at fault), if
    they cannot."""
    try:
        load_reviews(path)
    except ReviewsError as error:
        return [str(error)]
    return []


def forwarded_problems(options: list[str], lang: str) -> list[str]:
    """Why the options grade-all passes on to each grading would fail it, if they would, in
    `lang` (the parser's own words, argparse's, as it says them): the grader's own parser reads
    them, after a stand-in submission (nothing is graded)."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            grading_parser().parse_args(["SUBMISSION", *options])
    except SystemExit:  # the parser's error, which it printed
        why = said.getvalue().strip().rpartition("error: ")[2]
        return [tr(lang, "drive_forwarded", why=why)]
    return []


def grade(
    todo: dict[str, Path], args: argparse.Namespace, key: bytes | None, progress: DriveProgress
) -> None:
    """Grade `todo` on this machine, or on the Ray cluster with --ray (its tasks given the seal
    `key`), each outcome to `progress` as it comes; KeyboardInterrupt on Ctrl-C, once the
    gradings are stopped."""
    if args.ray:
        from grader.drive import cluster  # connected by `drive`

        def begin(at_once: int) -> None:
            progress.begin(len(todo), at_once)

        cluster.grade(todo, args, key, progress.done, begin)
    else:
        jobs = local_jobs(args, len(todo))
        grade_locally(todo, args, jobs, progress.done, lambda: progress.begin(len(todo), jobs))


def finish(
    outcomes: list[Outcome],
    entries: dict[str, Path],
    args: argparse.Namespace,
    reviews: dict[str, Review] | None = None,
) -> int:
    """The leaderboard (with the reviewer's notes, `reviews`), unless no submission could be
    graded, and the closing lines; the exit status: 0 when every submission was graded, else
    `NOT_GRADED`."""
    failed = sorted(outcome.name for outcome in outcomes if outcome.report is None)
    said = {"total": len(outcomes), "names": clean(", ".join(failed), 1000), "out": args.out}
    if len(failed) == len(outcomes):
        print(tr(args.lang, "drive_none_graded", **said), file=sys.stderr)
        return NOT_GRADED
    similar = similar_pairs(entries, args.out, args.lang)
    page = outputs.write_all(outcomes, args.out, vars(args), similar, reviews)
    print("\n" + tr(args.lang, "drive_leaderboard", page=page))
    outputs.warn_unmatched(outcomes, reviews, args.reviews, args.lang)
    if failed:
        print(tr(args.lang, "drive_some_failed", failed=len(failed), **said), file=sys.stderr)
        return NOT_GRADED
    return 0


def local_jobs(args: argparse.Namespace, count: int) -> int:
    """Gradings at once on this machine: one where two could use one GPU (time kernels, or
    fill its memory under the other's workers)."""
    jobs = min(args.jobs, count)
    if jobs > 1 and "kernel" in (args.parts or PARTS) and gpu_present():
        print(tr(args.lang, "drive_one_at_a_time"), file=sys.stderr)
        jobs = 1
    print(grading_line(args.lang, count, jobs, args.profile), file=sys.stderr)
    return jobs
