"""Whether a graded submission attempted a part, and if not, why: what the item analysis counts
apart (`items.py`), since a check failed by code the candidate never wrote tells nothing of it.

A part graded in a report (it lists checks) is not attempted for the first of `REASONS` that
holds, from its files as the report records them, then from its checks that ran (passed or
failed), each of which failed before any of the candidate's code in it ran:

- "missing": a file of the part is not among the submission's (`submission.files`), or its
  checks said "not submitted";
- "syntax": a file of the part does not compile (`syntax_errors`), or its checks failed on a file
  that does not (`formats.syntax_failures`) or on an import;
- "stub": every file of the part is the kit's stub as it ships (`STUBS`, by sha256), or its
  checks said "not implemented" (a stub edited in form only, or a shared file whose other part
  was done).

A part with a passed check, or one that failed having run the candidate's code, is attempted; so
is one whose checks were all skipped, unless its files say otherwise. Read from report.json as
written: a report without `submission.files` is judged by its checks alone.
"""

import hashlib
from functools import cache

from grader import ANSWER_KEY, KIT_ROOT
from grader.parts import PARTS, SUBMISSION_FILES
from grader.provenance import field
from grader.report.formats import (
    IMPORT_FAILED,
    NOT_IMPLEMENTED,
    NOT_SUBMITTED,
    graded_parts,
    message_of,
    syntax_failures,
)

REASONS = ("missing", "syntax", "stub")  # why a part was not attempted, checked in this order
RAN = ("passed", "failed")  # the statuses of a check that ran
# The stubs handed to candidates, as the full kit ships them (in the candidate kit, `exercises/`
# is the candidate's own work: there the checks are what tell a stub).
STUBS = KIT_ROOT / "exercises"


@cache
def stub_digests() -> dict[str, str]:
    """The sha256 of each of the kit's stubs, by file name; none in the candidate kit (it has no
    answer key), whose `exercises/` holds the candidate's own work."""
    if not ANSWER_KEY.is_dir():
        return {}
    return {
        name: hashlib.sha256((STUBS / name).read_bytes()).hexdigest()
        for name in SUBMISSION_FILES
        if (STUBS / name).is_file()
    }


def left_out(report: dict) -> dict[str, str]:
    """Each part graded in `report` that was not attempted, with why (one of `REASONS`)."""
    return {
        part_id: reason
        for part_id in graded_parts(report)
        if (reason := not_attempted(report, part_id))
    }


def not_attempted(report: dict, part_id: str) -> str | None:
    """Why `report`'s part `part_id` was not attempted (one of `REASONS`), or None if it was."""
    return by_files(report, part_id) or by_checks(report, part_id)


def by_files(report: dict, part_id: str) -> str | None:
    """What the part's files say (see the module), or None; nothing for a part the kit lacks."""
    own = PARTS[part_id].files if part_id in PARTS else ()
    files = field(report, "submission").get("files")
    recorded = bool(own) and isinstance(files, dict)
    if recorded and any(name not in files for name in own):
        return "missing"
    broken = {error.get("file") for error in report.get("syntax_errors", [])}
    if any(name in broken for name in own):
        return "syntax"
    if recorded and all(files[name] == stub_digests().get(name) for name in own):
        return "stub"
    return None


def by_checks(report: dict, part_id: str) -> str | None:
    """What the part's checks that ran say: the first of `REASONS` among their failures when
    each failed before the candidate's code ran, else None (none ran, or one ran its code)."""
    explained = syntax_failures(report)
    checks = report["parts"][part_id].get("checks", [])
    said = [why(check, explained) for check in checks if check.get("status") in RAN]
    if not said or None in said:
        return None
    return next(reason for reason in REASONS if reason in said)


def why(check: dict, explained: dict) -> str | None:
    """Which of `REASONS` a check that ran failed for before the candidate's code ran; None if
    it passed or ran that code."""
    if check.get("status") != "failed":
        return None
    message = message_of(check)
    if message.startswith(NOT_SUBMITTED):
        return "missing"
    if check.get("id") in explained or message.startswith(IMPORT_FAILED):
        return "syntax"
    if message.startswith(NOT_IMPLEMENTED):
        return "stub"
    return None
