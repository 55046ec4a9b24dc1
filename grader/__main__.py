"""`python -m grader SUBMISSION`: grade a submission and write its report.

Exit status 0 whenever the grade ran and its report was written, whatever the score; 2 when the
grader could not run (a bad argument, a submission it refuses to read, a report folder holding
another input's report, or no report but other files); 130 when Ctrl-C stopped it
(`interrupt.py`), with nothing written. Its lines are in `--lang`: the kit's words (`i18n.tr`)
and what it says of a refusal where that is a message of the kit's (`said`).

Three commands share the entry point: `python -m grader grade-all FOLDER` (`drive/command.py`),
`python -m grader compare A B` (`report/compare.py`) and `python -m grader similarity FOLDER`
(`similarity/`). A submission folder named like one of them is graded as
`python -m grader ./compare`.
"""

import argparse
import gc
import importlib
import resource
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from grader import interrupt, seal_key
from grader.cli import parser
from grader.intake import Intake, SubmissionRefused, read_submission
from grader.report.compare import ReportError, read
from grader.report.i18n import profile_name, tr
from grader.report.messages import text_in
from grader.said import message_of, said
from grader.sandbox import isolation
from grader.sandbox.process import Limits, surely_started_zygotes
from grader.sandbox.zygotes import Zygotes, inherit
from grader.scoring.profiles import PROFILES, Profile
from grader.scoring.rubric import Rubric, load_rubric
from grader.text import clean

# The grading process's own private memory (RLIMIT_DATA, soft: its workers set their own): an
# honest grading takes under 0.5 GiB, and no reply it decodes can take it far past that.
GRADER_MEMORY_BYTES = 8 << 30
# The cyclic collector's thresholds while grading: Hypothesis and the proxies make many short-lived
# objects, which Python's default (700 allocations) collects 250 to 450 times a part; these cut
# the grading process's time in the collector by a third to two thirds, for a few MB held longer.
GC_THRESHOLDS = (50_000, 20, 20)

COMMANDS = {
    "grade-all": "grader.drive.command",
    "compare": "grader.report.compare",
    "similarity": "grader.similarity.__main__",
}


def main(argv: list[str]) -> int:
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return grade_submission(args)
    except KeyboardInterrupt:  # Ctrl-C before the report was written (it is written `held`)
        print(f"\n{tr(args.lang, 'interrupted')}", file=sys.stderr)
        return interrupt.EXIT_STATUS


def limit_own_memory() -> None:
    """Bound this grading process's private memory to `GRADER_MEMORY_BYTES` (a lower limit that
    was set before stays), so that whatever a submission does, one grading cannot take the
    machine's memory from the others of a drive."""
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    bound = (
        GRADER_MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(GRADER_MEMORY_BYTES, hard)
    )
    if soft == resource.RLIM_INFINITY or soft > bound:
        resource.setrlimit(resource.RLIMIT_DATA, (bound, hard))


def grade_submission(args: argparse.Namespace) -> int:
    """Grade the submission `args` name, write its report and print its summary: 0; or 2, with
    a message, where the grader refuses to start."""
    inherit()  # the zygotes a drive lends its gradings, if this is one of them
    try:
        intake = read_submission(args.submission)
        out = args.out or Path("reports") / intake.name
        check_report_folder(out, Path(intake.path))
        rubric = load_rubric(args.rubric)
        isolated = isolation.probe(args.isolation)
        key = seal_key.grading_key(args.seal_key, isolated.isolated)
    except (SubmissionRefused, ValueError, OSError, RuntimeError) as error:
        why = text_in(args.lang, message_of(error))
        print(tr(args.lang, "grader_error", error=why), file=sys.stderr)
        return 2
    zygotes = Zygotes.borrowing(isolated, args.import_timeout)  # the grading's workers'
    try:
        launch_early(zygotes, args.parts)  # they import torch while this process does
        return graded_and_written(args, intake, out, isolated, rubric, key, zygotes)
    finally:
        zygotes.close()


def launch_early(zygotes: Zygotes, parts: Iterable[str]) -> None:
    """Launch now the zygotes (`zygotes.py`) that a grading of `parts` will surely start
    (`surely_started_zygotes`: every part chosen, no GPU, workers that may be forked), so that
    they import torch while this process imports it, about a second sooner than the grading
    would ask for them. A wrong guess (a GPU no device file shows) costs only their start: they
    stop unused."""
    zygotes.launch(surely_started_zygotes(parts))


def graded_and_written(
    args: argparse.Namespace,
    intake: Intake,
    out: Path,
    isolated: isolation.Isolation,
    rubric: Rubric,
    key: bytes | None,
    zygotes: Zygotes,
) -> int:
    """Grade `intake` with the options `args` gives, its workers forked from `zygotes`; write
    its report into `out`, sealed with `key`, and print its summary: 0."""
    from grader.grade import Options, grade  # torch and pytest: grading only
    from grader.report.summary import print_summary
    from grader.report.writers import write_all

    gc.freeze()  # torch's objects, and the rest imported, are never garbage: not scanned again
    gc.set_threshold(*GC_THRESHOLDS)
    limit_own_memory()

    limits = Limits(
        memory_bytes=int(args.memory_limit_gb * (1 << 30)),
        call_seconds=args.call_timeout,
        import_seconds=args.import_timeout,
        part_seconds=args.part_timeout,
        submission_seconds=args.submission_timeout,
    )
    options = Options(
        parts=args.parts,
        profile=with_shrinks(PROFILES[args.profile], args.shrinks),
        seed=args.seed,
        limits=limits,
        rubric=rubric,
        isolation=isolated,
        lang=args.lang,
        live=sys.stderr.isatty(),
    )
    print(tr(args.lang, "grading", submission=args.submission,
             profile=profile_name(args.lang, args.profile)),
          file=sys.stderr)  # fmt: skip
    if intake.folder:
        print(tr(args.lang, "grading_folder", folder=intake.folder), file=sys.stderr)
    if not isolated.isolated:
        warning = text_in(args.lang, isolated.describe())
        print(tr(args.lang, "warning", message=warning), file=sys.stderr)
    report = grade(intake, options, zygotes)
    with interrupt.held():  # written whole and said so, or Ctrl-C came first and nothing is
        write_all(report, out, key)
        print_summary(report, out)
    return 0


def with_shrinks(profile: Profile, shrinks: int | None) -> Profile:
    """`profile`, with `--shrinks` in place of its own where given."""
    return profile if shrinks is None else replace(profile, shrinks=shrinks)


def check_report_folder(out: Path, submission: Path) -> None:
    """Refuse (ValueError) to write the report of `submission` into `out` where that would
    overwrite anything but an earlier report of the same input: `out` may be absent, empty, or
    hold a report whose `submission.path` resolves to `submission`'s."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(
            said("{out} is a file, not a report folder: pass --out with a folder", out=out)
        )
    if next(out.iterdir(), None) is None:
        return
    try:
        earlier = read(out)["submission"]["path"]
    except (ReportError, KeyError, TypeError):
        raise ValueError(
            said(
                "{out} holds files that are not a grade report: pass --out with a new or empty "
                "folder, or remove what is in it",
                out=out,
            )
        ) from None
    if Path(str(earlier)).resolve() != submission.resolve():
        raise ValueError(
            said(
                "{out} holds the report of another input, {earlier}, not of {submission}: pass "
                "--out with another folder, or remove {out} to replace it",
                out=out,
                earlier=clean(str(earlier), 300),
                submission=submission,
            )
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
