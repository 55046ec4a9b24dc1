"""The summary at the end of `make grade`: what was graded, its score per part, then what to look
at first.

What to look at first, in this order: the grader's own failures (the score may be incomplete);
the files that do not compile, each once, with its line and what failed on it; the first other
failed check of the earliest part that was started, with its message, its counterexample and
where the report shows it; the parts not implemented yet; the provisional scores; the end-to-end
checks (the engine check, the prefix-caching one); the integrity flags; and last the report's
path. The kit's words are in the report's language (`i18n.py`), and so are what a check and the
grader say (`messages.py`); a candidate's own text stays as it was written, but cleaned
(`text.clean`): a candidate's message must not move the cursor or redraw the screen.
"""

import sys
import unicodedata
from pathlib import Path
from typing import TextIO

from grader.report.formats import (
    ENGINE_CHECKS,
    NOT_STARTED,
    check_anchor,
    code_excerpt,
    counted,
    engine_message,
    failed_checks,
    graded,
    graded_from,
    provisional_note,
    run_in,
    severity_rank,
    syntax_blame,
    syntax_failures,
    syntax_line,
    tally,
    total_ungraded,
    ungraded_notes,
)
from grader.report.i18n import language, part_title, tr
from grader.report.messages import said_in
from grader.report.model import bounded
from grader.text import clean

FAILED = ("failed", "error")
MESSAGE_LINES = 6  # of the first failure's message, in the terminal
COUNTEREXAMPLE_LINES = 40  # a longer counterexample is left to the report, never cut
LINE_CHARS = 2000  # of one line on the terminal


def print_summary(report: dict, out: Path, stream: TextIO | None = None) -> None:
    """Print the summary of `report`, whose files are in `out`, to `stream` (standard output).

    Every line is cleaned and cut (`text.clean`): no terminal escapes, no lone surrogates, which a
    strict UTF-8 stream refuses; what a stream cannot encode otherwise (CJK on ASCII) is replaced.
    """
    stream = sys.stdout if stream is None else stream
    lines = "\n".join(summary_lines(bounded(report), out)).split("\n")
    text = "\n".join(clean(line, LINE_CHARS) for line in lines)
    try:
        print(text, file=stream)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        print(text.encode(encoding, "replace").decode(encoding), file=stream)


def summary_lines(report: dict, out: Path) -> list[str]:
    lang = language(report)
    lines = ["", graded_from(report, lang), ""]
    lines += [*score_table(report, lang), ""]
    isolation = report.get("isolation", {})
    if isolation.get("isolated") is False:
        description = said_in(lang, isolation, "description")
        lines += [tr(lang, "warning", message=description), ""]
    for error in said_in(lang, report, "errors"):
        lines += [tr(lang, "grader_failed"), error.rstrip(), ""]
    lines.append(tr(lang, "first_look"))
    lines += [
        line if isinstance(line, Verbatim) else f"  {line}"
        for line in look_first(report, out, lang)
    ]
    lines += ["", tr(lang, "report_at", path=out / "report.html")]
    return lines


def score_table(report: dict, lang: str) -> list[str]:
    """A line per part (its score, how many checks passed, the points not graded here), then the
    total: `allocator   10.00 / 10.00  4 of 5 checks passed (5.00 more graded by the hiring
    team's kit)`."""
    rows = []
    for part_id, part in report["parts"].items():
        score = f"{part['score']:6.2f} / {part['max_score']:<6.2f}" if graded(part) else f"{'-':>6}"
        rows.append(f"  {part_id:<10} {score:<15} {tally(part, lang)}{not_graded_here(part, lang)}")
    total = f"{report['score']:6.2f} / {report['max_score']:.2f}"
    total += not_graded_here(total_ungraded(report), lang)
    return [*rows, f"  {padded(tr(lang, 'summary_total'), 10)} {total}"]


def not_graded_here(part: dict, lang: str) -> str:
    """` (5.00 more graded by the hiring team's kit)`: a part's (or the total's) points not graded
    here, to follow its score; "" when there are none."""
    notes = ungraded_notes(part, lang, shown=lambda value: f"{value:.2f}")
    if not notes:
        return ""
    return f"{tr(lang, 'open')}{tr(lang, 'list_separator').join(notes)}{tr(lang, 'close')}"


def padded(text: str, columns: int) -> str:
    """`text` padded to `columns` terminal columns; a CJK character takes two."""
    width = sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
    return text + " " * max(columns - width, 0)


def look_first(report: dict, out: Path, lang: str) -> list[str]:
    """The lines under "what to look at first"."""
    parts = report["parts"]
    lines = syntax_errors(report, lang)
    started = {part_id: part for part_id, part in parts.items() if not not_started(part)}
    lines += first_failure(started, set(syntax_failures(report)), out, lang, run_in(report, lang))
    waiting = [part_id for part_id, part in parts.items() if not_started(part)]
    if waiting:
        lines.append(tr(lang, "not_started", parts=", ".join(waiting)))
    for part_id, part in parts.items():
        if part.get("provisional"):
            note = provisional_note(part, lang)
            lines.append(tr(lang, "provisional_note", part=part_id, note=note))
    for key in ENGINE_CHECKS:
        check = report.get(key)
        if check:
            status = check.get("status", "skipped")
            shown = tr(lang, status) if status in ("passed", "failed", "skipped") else status
            message = next(iter(engine_message(report, lang, key).strip().splitlines()), "")
            lines.append(tr(lang, f"{key}_line", status=shown, message=message).rstrip())
    if report["integrity"]:
        count = len(report["integrity"])
        lines.append(counted(lang, "integrity_count", count, count=count))
    return lines or [tr(lang, "all_passed")]


def syntax_errors(report: dict, lang: str) -> list[str]:
    """Each file that does not compile, once: where, the line itself, and what failed on it."""
    lines = []
    for error in report.get("syntax_errors", []):
        lines.append(syntax_line(error, lang))
        lines += indented(code_excerpt(error), MESSAGE_LINES, lang)
        blame = syntax_blame(error, lang)
        lines += [f"    {blame}"] if blame else []
    return lines


def not_started(part: dict) -> bool:
    """A graded part none of whose checks that ran got to run the candidate's code: a stub or a
    missing file. Skipped checks (no CUDA, or the candidate kit) do not count."""
    ran = [check for check in part["checks"] if check["status"] != "skipped"]
    return bool(ran) and all(
        check["status"] in FAILED and check["message"].startswith(NOT_STARTED) for check in ran
    )


def first_failure(
    parts: dict[str, dict], explained: set[str], out: Path, lang: str, runs_in: str
) -> list[str]:
    """The failed check to look at first, as the report orders them: the most serious
    (`SEVERITIES`), in the earliest part among equals, one with a counterexample where one of that
    severity has one. Its message, its counterexample (`counterexample_lines`, `runs_in` saying
    where), and where the report shows it. Checks whose id is in `explained` (they failed because
    a file does not compile, said above) are left out."""
    failures = {part_id: failed_checks(part, explained) for part_id, part in parts.items()}
    failures = {part_id: failed for part_id, failed in failures.items() if failed}
    if not failures:
        return []
    part_id = min(failures, key=lambda part_id: severity_rank(failures[part_id][0]))
    part, failed = parts[part_id], failures[part_id]
    worst = [check for check in failed if severity_rank(check) == severity_rank(failed[0])]
    check = next((check for check in worst if check["counterexample"]), worst[0])
    title = part_title(lang, part_id, part)
    status = tr(lang, check["status"])
    lines = [tr(lang, "first_failure", title=title, name=check["name"], status=status)]
    lines += indented(said_in(lang, check, "message"), MESSAGE_LINES, lang)
    if where := check.get("raised_at"):
        raised = tr(lang, "raised_at", file=where["file"], line=where["line"],
                    function=where["function"])  # fmt: skip
        lines += indented(f"{raised}{tr(lang, 'colon')}{where['code']}", 1, lang)
    if check["counterexample"]:
        counterexample = said_in(lang, check, "counterexample")
        lines += counterexample_lines(counterexample, runs_in, lang)
    anchor = check_anchor(part_id, check)
    page = (out / "report.html").resolve().as_uri()  # a link a terminal can open
    lines.append(tr(lang, "where", path=page, anchor=anchor, title=title))
    if len(failed) > 1:
        lines.append(counted(lang, "more_failures", len(failed) - 1, count=len(failed) - 1))
    return lines


class Verbatim(str):
    """A line printed as it is, never indented: a counterexample's, which must paste into Python
    and run as it is."""


def counterexample_lines(script: str, runs_in: str, lang: str) -> list[str]:
    """A counterexample whole, after where it runs (`runs_in`), its lines `Verbatim` between two
    blank ones; one longer than `COUNTEREXAMPLE_LINES`, or with a line the terminal would cut
    (`LINE_CHARS`), only named: cut, it would lose its setup or its failing assert, and a pasted
    part would not replay the failure. The report's link follows either way."""
    lines = script.rstrip().splitlines()
    if len(lines) > COUNTEREXAMPLE_LINES or any(len(line) > LINE_CHARS for line in lines):
        return [tr(lang, "counterexample_in_report", count=len(lines))]
    code = [Verbatim(line) for line in ["", *lines, ""]]
    return [tr(lang, "see_counterexample"), runs_in, *code]


def indented(text: str, limit: int, lang: str) -> list[str]:
    """`text`'s first `limit` lines, indented, and how many more the report has."""
    lines = text.rstrip().splitlines()
    shown = [f"    {line}" for line in lines[:limit]]
    if len(lines) > limit:
        more = len(lines) - limit
        shown.append(f"    {counted(lang, 'more_lines', more, count=more)}")
    return shown
