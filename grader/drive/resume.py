"""Resuming a drive: `grade-all` keeps a report it finds already made with the drive's settings.

A submission is graded again unless its report folder holds every file a grading leaves
(`REPORT_FILES`: the grader writes report.json first and grade-all writes grade.log last, so a
grading stopped half-way, by Ctrl-C or a dead node, leaves an incomplete folder), its report.json
passes `provenance.problems` with the drive's seal key (an edited, forged or unsealed report is
graded again), its `provenance.settings` are the drive's (`wanted`: kit version, profile, seed,
rubric, parts), and its per-file sha256 are those of the submission as it is now (a candidate
who sent a new version is graded again). The language is no setting: a report kept is drawn
again in the drive's `--lang`, its pages and the grader's words in them (recorded by id,
`grader/said.py`), with no grading, while its report.json, sealed, keeps the `language` it was
graded in. `clear` empties a folder before a grading.
"""

import argparse
from pathlib import Path

from grader import provenance
from grader.intake import SubmissionRefused, read_submission
from grader.parts import PARTS
from grader.report.compare import ReportError, read
from grader.report.leaderboard import Outcome, earlier
from grader.report.model import bounded
from grader.report.render import SIMULATION_PAGE
from grader.report.writers import WRITERS, write_pages
from grader.said import said
from grader.scoring.rubric import load_rubric

REPORT_FILES = (*WRITERS, "grade.log")  # the grader's files, then grade-all's log
KEPT = said("kept from an earlier run with the same settings")


def wanted(args: argparse.Namespace) -> dict:
    """The drive's `provenance.settings`; ValueError or OSError for a rubric it cannot read."""
    return {
        "kit": provenance.kit_version(),
        "profile": args.profile,
        "seed": args.seed,
        "rubric": provenance.rubric_digest(load_rubric(args.rubric)),
        "parts": list(args.parts or PARTS),
    }


def kept(
    name: str, entry: Path, report_dir: Path, settings: dict, key: bytes | None, lang: str
) -> Outcome | None:
    """The earlier grading of `entry` in `report_dir` if it stands (see the module; its seal
    checked with `key`, and none stands without one), its pages drawn again in `lang` from its
    verified report.json (`write_pages`); else None."""
    if not all((report_dir / file).is_file() for file in REPORT_FILES):
        return None
    try:
        raw = read(report_dir)
        files = read_submission(entry).sha256()
    except (ReportError, SubmissionRefused, OSError, ValueError):
        return None
    if provenance.problems(raw, key) or provenance.settings(raw) != settings:
        return None
    if raw["submission"]["files"] != files:
        return None
    report = bounded(raw)
    write_pages(report, report_dir, lang)
    return earlier(name, str(entry), report, (KEPT,))


def clear(report_dir: Path) -> None:
    """Remove an earlier grading's files from `report_dir` (its simulation page too, which only
    some reports have), so that none outlives a new one and the grader finds the folder empty."""
    for file in (*REPORT_FILES, SIMULATION_PAGE):
        (report_dir / file).unlink(missing_ok=True)
