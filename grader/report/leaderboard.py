"""The batch's leaderboard: `leaderboard.csv` and `leaderboard.html`, one row per submission.

A row holds the candidate, the total and each part's score, the integrity flags (never part of
the score), the kernel's timing ratio (the geometric mean of the kernel part's benchmark ratios),
the time the grading took and a relative link to the report; a submission the grader could not
grade gets a row saying why. Rows are sorted by score, best first; ungraded ones come last.

The page (`templates/leaderboard.html`) is self-contained, like every page (`render.py`). Names,
reports and log tails may carry a candidate's text: both files show each outcome `cleaned`
(`text.py`: no control characters or lone surrogates, bounded lengths); the page's template
escapes every string, and CSV cells a spreadsheet would read as a formula are quoted with a `'`.
"""

import csv
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from grader.parts import PARTS
from grader.report.formats import origin, points
from grader.report.model import bounded
from grader.report.render import render
from grader.sandbox.isolation import UNISOLATED
from grader.text import clean

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
NAME_CHARS = 200  # of a submission's name


@dataclass
class Outcome:
    """One submission's grading: its report, or why there is none (`failure`, the log's tail)."""

    name: str
    entry: str
    report: dict | None
    failure: str
    tail: list[str]
    seconds: float
    remarks: tuple[str, ...] = ()  # what the drive adds: retried, kept from an earlier run, mixed


def earlier(name: str, entry: str, report: dict, remarks: tuple[str, ...]) -> Outcome:
    """A grading done before this drive (kept, or merged from elsewhere), from its `report`."""
    seconds = report.get("seconds")
    seconds = float(seconds) if isinstance(seconds, int | float) else 0.0
    return Outcome(name, entry, report, "", [], seconds, remarks)


def cleaned(outcome: Outcome) -> Outcome:
    """`outcome` with its strings cleaned and bounded: the name, the failure and the log's tail
    (`text.clean`), the report (`model.bounded`)."""
    return replace(
        outcome,
        name=clean(outcome.name, NAME_CHARS),
        entry=clean(outcome.entry, NAME_CHARS),
        report=None if outcome.report is None else bounded(outcome.report),
        failure=clean(outcome.failure),
        tail=[clean(line) for line in outcome.tail],
        remarks=tuple(clean(remark) for remark in outcome.remarks),
    )


def ranked(outcomes: list[Outcome]) -> list[tuple[int | None, Outcome]]:
    """Graded submissions by score (ties share a rank), then the ungraded ones, by name."""
    graded = sorted(
        (o for o in outcomes if o.report is not None), key=lambda o: (-o.report["score"], o.name)
    )
    rows: list[tuple[int | None, Outcome]] = []
    for index, outcome in enumerate(graded):
        tied = rows and rows[-1][1].report["score"] == outcome.report["score"]
        rows.append((rows[-1][0] if tied else index + 1, outcome))
    rows += [(None, o) for o in sorted(outcomes, key=lambda o: o.name) if o.report is None]
    return rows


def parts_of(outcomes: list[Outcome]) -> list[str]:
    """The parts any report graded or listed, in the rubric's order."""
    seen = {part for o in outcomes if o.report for part in o.report["parts"]}
    return [part for part in PARTS if part in seen]


def kernel_ratio(report: dict) -> str:
    """The geometric mean of the kernel's timing ratios, or why there is none."""
    ratios = [b["ratio"] for b in report["benchmarks"] if b["part"] == "kernel" and b["ratio"] > 0]
    if ratios:
        return f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}"
    kernel = report["parts"].get("kernel")
    if not kernel or not kernel["checks"]:
        return "n/a: not graded"
    if report["environment"].get("device") == "cpu":
        return "n/a: no GPU"
    return "n/a: not timed"


def flags(report: dict) -> list[str]:
    return [f"{origin(flag)}: {flag['message']}" for flag in report["integrity"]]


def note(outcome: Outcome) -> str:
    """Why a submission has no score, or the grader's own failure while grading it."""
    if outcome.report is None:
        why = f"not graded ({outcome.failure}): " + " | ".join(outcome.tail)
        return "; ".join((why, *outcome.remarks))
    notes = list(outcome.remarks)
    if outcome.report.get("isolation", {}).get("isolated") is False:
        notes.append(UNISOLATED)
    if outcome.report.get("errors"):
        last = outcome.report["errors"][-1].strip().rpartition("\n")[2]
        notes.append(f"the grader failed on part of it: {last}")
    parts = outcome.report["parts"]
    provisional = [part_id for part_id, part in parts.items() if "provisional" in part]
    if provisional:
        notes.append(f"provisional ({', '.join(provisional)}): checks skipped, see the report")
    return "; ".join(notes)


def report_path(outcome: Outcome) -> str:
    """The report (or, with none, the grader's log), relative to the leaderboard."""
    return f"{outcome.name}/{'report.html' if outcome.report else 'grade.log'}"


def link(outcome: Outcome) -> str:
    """`report_path` as a URL, for the page: of the name as it is on disk, not `cleaned`
    (undecodable bytes, as surrogates, are quoted as the bytes they were)."""
    return quote(report_path(outcome), errors="surrogateescape")


def took(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


# -- leaderboard.csv ----------------------------------------------------------------------------


def cell(value: object) -> str:
    """A CSV cell; text a spreadsheet would run as a formula is quoted with a `'`."""
    if not isinstance(value, str):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return f"'{value}" if value.startswith(FORMULA_START) else value


def render_csv(outcomes: list[Outcome]) -> str:
    parts = parts_of(outcomes)
    header = ["rank", "candidate", "status", "score", "max_score", *parts,
              "integrity_flags", "flags", "kernel_ratio", "seconds", "report", "note"]  # fmt: skip
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for rank, o in ranked([cleaned(o) for o in outcomes]):
        r = o.report
        if r is None:
            scores = ["", "", *([""] * len(parts)), "", "", ""]
        else:
            part_scores = [
                r["parts"][p]["score"] if r["parts"].get(p, {}).get("checks") else "" for p in parts
            ]
            scores = [r["score"], r["max_score"], *part_scores, len(r["integrity"]),
                      "; ".join(flags(r)), kernel_ratio(r)]  # fmt: skip
        status = "graded" if r else "not graded"
        row = [rank or "", o.name, status, *scores, round(o.seconds, 1), report_path(o), note(o)]
        writer.writerow([cell(value) for value in row])
    return out.getvalue()


# -- leaderboard.html ---------------------------------------------------------------------------


def render_html(outcomes: list[Outcome], options: dict, similar: Sequence[dict] = ()) -> str:
    """The page (`templates/leaderboard.html`): a row per submission, as `html_row` gives it,
    then the similar pairs (`grader.similarity.drive.shown` rows), which never change a score."""
    seed = options.get("seed")
    settings = f"{options.get('profile', 'quick')} profile, " + (
        f"seed {seed}" if seed is not None else "the default examples"
    )
    parts = parts_of(outcomes)
    return render(
        "leaderboard.html",
        folder=clean(str(options.get("folder", "")), None),
        graded=sum(o.report is not None for o in outcomes),
        total=len(outcomes),
        settings=settings,
        when=time.strftime("%Y-%m-%d %H:%M"),
        parts=parts,
        rows=[html_row(rank, cleaned(o), parts, link(o)) for rank, o in ranked(outcomes)],
        similar=similar,
    )


def html_row(rank: int | None, outcome: Outcome, parts: list[str], href: str) -> dict:
    """What the page shows of a submission; `outcome` is `cleaned`, `href` the `link` to its
    report. A part's score is None where the part was not graded, absent where not listed."""
    row = {"rank": rank, "name": outcome.name, "href": href, "took": took(outcome.seconds)}
    r = outcome.report
    if r is None:
        return {
            **row,
            "failure": outcome.failure,
            "tail": "\n".join(outcome.tail),
            "remarks": "; ".join(outcome.remarks),
        }
    return {
        **row,
        "score": points(r["score"]),
        "max_score": points(r["max_score"]),
        "parts": [part_cell(r["parts"].get(part)) for part in parts],
        "flags": flags(r),
        "kernel_ratio": kernel_ratio(r),
        "note": note(outcome),
    }


def part_cell(part: dict | None) -> str | None:
    """A part's score; "-" for a part the report does not list, None for one not graded."""
    if part is None:
        return "-"
    return f"{points(part['score'])} / {points(part['max_score'])}" if part["checks"] else None


def write_all(
    outcomes: list[Outcome], out: Path, options: dict, similar: Sequence[dict] = ()
) -> Path:
    """Write `leaderboard.csv` and `leaderboard.html` into `out`; the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "leaderboard.csv").write_text(render_csv(outcomes), encoding="utf-8", errors="replace")
    page = out / "leaderboard.html"
    page.write_text(render_html(outcomes, options, similar), encoding="utf-8", errors="replace")
    return page
