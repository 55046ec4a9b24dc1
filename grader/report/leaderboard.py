"""The batch's leaderboard: `leaderboard.csv` and `leaderboard.html`, one row per submission.

A row holds the candidate, the total and each part's score, the integrity flags (never part of
the score), the kernel's timing ratio (the geometric mean of the kernel part's benchmark ratios),
the time the grading took and a relative link to the report; a submission the grader could not
grade gets a row saying why. Rows are sorted by score, best first; ungraded ones come last.

The page is self-contained (inline style, no script). Names, reports and log tails may carry a
candidate's text: both files show each outcome `cleaned` (`text.py`: no control characters or
lone surrogates, bounded lengths); the page escapes every string, and CSV cells a spreadsheet
would read as a formula are quoted with a `'`.
"""

import csv
import io
import math
import time
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path
from urllib.parse import quote

from grader.parts import PARTS
from grader.report.html import origin, points
from grader.report.model import bounded
from grader.sandbox.isolation import UNISOLATED
from grader.text import clean

STYLE = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
 margin:2rem auto;padding:0 1rem;max-width:90rem}
h1{font-size:1.4rem;margin:0 0 .3rem}
.muted{color:#59636e}
table{border-collapse:collapse;width:100%;margin-top:1rem}
th,td{text-align:left;vertical-align:top;padding:.35rem .5rem;border-bottom:1px solid #d1d9e0}
th{background:#f6f8fa;position:sticky;top:0}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.failed td{background:#ffebe9}
.flagged{color:#9a6700;font-weight:600}
pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;
 overflow-wrap:anywhere;margin:.2rem 0}
summary{cursor:pointer}
ul{margin:.2rem 0;padding-left:1.1rem}
@media print{
 body{max-width:none;margin:0;font-size:9pt}
 th{position:static}
 tr{break-inside:avoid}
 a{color:inherit;text-decoration:none}
 details::details-content{content-visibility:visible;display:contents}
 .failed td{print-color-adjust:exact;-webkit-print-color-adjust:exact}
}
"""
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


def cleaned(outcome: Outcome) -> Outcome:
    """`outcome` with its strings cleaned and bounded: the name, the failure and the log's tail
    (`text.clean`), the report (`reports.bounded`)."""
    return replace(
        outcome,
        name=clean(outcome.name, NAME_CHARS),
        entry=clean(outcome.entry, NAME_CHARS),
        report=None if outcome.report is None else bounded(outcome.report),
        failure=clean(outcome.failure),
        tail=[clean(line) for line in outcome.tail],
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
        return f"not graded ({outcome.failure}): " + " | ".join(outcome.tail)
    notes = []
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


def render_html(outcomes: list[Outcome], options: dict) -> str:
    parts = parts_of(outcomes)
    graded = sum(o.report is not None for o in outcomes)
    seed = options.get("seed")
    folder = escape(clean(str(options.get("folder", "")), None))
    settings = f"{options.get('profile', 'quick')} profile, " + (
        f"seed {seed}" if seed is not None else "the default examples"
    )
    numeric = ["#", "score", *parts, "kernel ratio", "time"]
    heads = ["#", "candidate", "score", *parts, "integrity", "kernel ratio", "time", "note"]
    head_cells = "".join(
        f"<th{' class=num' if h in numeric else ''}>{escape(h)}</th>" for h in heads
    )
    rows = "\n".join(html_row(rank, cleaned(o), parts, link(o)) for rank, o in ranked(outcomes))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Leaderboard: {folder}</title>
<style>{STYLE}</style></head>
<body>
<h1>Leaderboard: {folder}</h1>
<p class="muted">{graded} of {len(outcomes)} submissions graded, {escape(settings)},
{escape(time.strftime("%Y-%m-%d %H:%M"))}. Integrity flags are for the reviewer and never change
the score. The kernel ratio is the geometric mean of the kernel's time over the reference's (lower
is faster). Each name links to its report.</p>
<table>
<thead><tr>{head_cells}</tr></thead>
<tbody>
{rows}
</tbody>
</table>
</body></html>
"""


def html_row(rank: int | None, outcome: Outcome, parts: list[str], href: str) -> str:
    """A submission's row; `outcome` is `cleaned`, `href` the `link` to its report."""
    name = f'<a href="{escape(href)}">{escape(outcome.name)}</a>'
    r = outcome.report
    if r is None:
        tail = escape("\n".join(outcome.tail))
        why = f"<td colspan={len(parts) + 2}><strong>Not graded ({escape(outcome.failure)})"
        why += f"</strong><pre>{tail}</pre></td>"
        return (
            f'<tr class="failed"><td class="num"></td><td>{name}</td><td class="num">-</td>'
            f'{why}<td class="num">{took(outcome.seconds)}</td><td></td></tr>'
        )
    part_cells = "".join(
        f'<td class="num">{part_cell(r["parts"][part]) if part in r["parts"] else "-"}</td>'
        for part in parts
    )
    return (
        f'<tr><td class="num">{rank}</td><td>{name}</td>'
        f'<td class="num"><strong>{points(r["score"])}</strong> / {points(r["max_score"])}</td>'
        f"{part_cells}<td>{flags_cell(flags(r))}</td>"
        f'<td class="num">{escape(kernel_ratio(r))}</td><td class="num">{took(outcome.seconds)}'
        f"</td><td>{escape(note(outcome))}</td></tr>"
    )


def part_cell(part: dict) -> str:
    if not part["checks"]:
        return '<span class="muted">-</span>'
    return f"{points(part['score'])} / {points(part['max_score'])}"


def flags_cell(found: list[str]) -> str:
    """The number of flags; the flags themselves on hover and, unfolded, in a list."""
    if not found:
        return '<span class="muted">0</span>'
    items = "".join(f"<li>{escape(flag)}</li>" for flag in found)
    title = escape("\n".join(found))
    return (
        f'<details title="{title}"><summary class="flagged">{len(found)}</summary>'
        f"<ul>{items}</ul></details>"
    )


def write_all(outcomes: list[Outcome], out: Path, options: dict) -> Path:
    """Write `leaderboard.csv` and `leaderboard.html` into `out`; the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "leaderboard.csv").write_text(render_csv(outcomes), encoding="utf-8", errors="replace")
    page = out / "leaderboard.html"
    page.write_text(render_html(outcomes, options), encoding="utf-8", errors="replace")
    return page
