"""A drive's item analysis: `items.csv` and `items.html`, how each check did across the drive.

A row per check id the reports give, in the rubric's order of parts, then as the reports list
them. Its statistics are over the graded submissions that attempted its part (`attempts.py`: a
stub, a missing file or a file that does not compile is no attempt; those are counted apart, as
`not_attempted`) and in which the check ran, passed or failed (`submissions`; one where it was
skipped, could not run or is absent is left out): how many `passed`, their `pass_share`, and its
`discrimination`, the point-biserial correlation between passing it (1 or 0) and the rest score
(the report's points on its other checks), both rounded to 3 decimals. Discrimination is
undefined (None: an empty cell) under two submissions or where either variable is constant: near
0 the check tells strong submissions from weak ones no better than chance; below 0 stronger ones
fail it more often. `flag` says "all passed" or "all failed" where every submission did,
"negative discrimination" where it is below 0.

The page also says, per part, how many graded submissions attempted it and why the others did
not (`Attempts`), and that the figures of a part fewer than `INDICATIVE_BELOW` submissions
attempted are indicative only.

The CSV is data: every field quoted, each cell formula-safe (`leaderboard.cell`), in English
whatever the drive's language. The page (`templates/items.html`) is in the drive's language,
linked from the leaderboard and back. Reports are read `bounded`, as the leaderboard reads them.
"""

import csv
import io
import statistics
from collections import Counter
from collections.abc import Iterator
from dataclasses import astuple, dataclass, fields

from grader.parts import PARTS
from grader.report.attempts import RAN, left_out
from grader.report.formats import graded_parts, percent, severity_word
from grader.report.i18n import tr
from grader.report.leaderboard import Outcome, cell, drive_language
from grader.report.model import bounded
from grader.report.render import render
from grader.text import clean

INDICATIVE_BELOW = 20  # attempts of a part under which the page calls its figures indicative
FLAGS = {
    "all passed": "items_flag_all_passed",
    "all failed": "items_flag_all_failed",
    "negative discrimination": "items_flag_negative",
}


@dataclass(frozen=True)
class Item:
    """One check's row: its statistics over the submissions that attempted its part and in which
    it ran."""

    check: str
    part: str
    severity: str
    submissions: int
    passed: int
    pass_share: float | None  # None where it ran in no submission
    discrimination: float | None  # None where undefined
    flag: str  # "" or a key of `FLAGS`
    not_attempted: int  # graded submissions in its part that did not attempt it, not counted


@dataclass(frozen=True)
class Attempts:
    """A part's graded submissions: how many attempted it, and how many did not, by reason
    (`attempts.REASONS`); `graded == attempted + missing + syntax + stub`."""

    part: str
    graded: int
    attempted: int
    missing: int
    syntax: int
    stub: int

    @property
    def indicative(self) -> bool:
        """Whether too few attempted the part for its checks' figures to be more than a hint."""
        return self.attempted < INDICATIVE_BELOW


def graded_reports(outcomes: list[Outcome]) -> list[dict]:
    """The reports of the graded submissions, `bounded`."""
    return [bounded(o.report) for o in outcomes if o.report is not None]


def checks_of(report: dict) -> Iterator[tuple[str, dict]]:
    """Each check of `report` that has an id, with its part's id."""
    for part_id, part in report["parts"].items():
        yield from ((part_id, check) for check in part["checks"] if "id" in check)


def listed(reports: list[dict]) -> dict[str, tuple[str, str]]:
    """Each check id the reports give, with its part and severity (as the first report listing it
    says), in the order of `PARTS`, then as the reports list them."""
    found: dict[str, tuple[str, str]] = {}
    for part_id in PARTS:
        for report in reports:
            for check in report["parts"].get(part_id, {}).get("checks", []):
                if "id" in check:
                    found.setdefault(check["id"], (part_id, check.get("severity", "")))
    return found


def results(report: dict, apart: frozenset[str] = frozenset()) -> dict[str, tuple[int, float]]:
    """Each check that ran in `report` (passed or failed), less those of the parts counted `apart`
    (not attempted): whether it passed (1 or 0), and the rest score, the report's points on its
    other checks."""
    by_part = list(checks_of(report))
    checks = [check for _, check in by_part]
    return {
        check["id"]: (
            int(check["status"] == "passed"),
            sum(other.get("points", 0) for other in checks if other is not check),
        )
        for part_id, check in by_part
        if check.get("status") in RAN and part_id not in apart
    }


def point_biserial(passes: list[int], rests: list[float]) -> float | None:
    """The correlation of passing (1 or 0) with the rest score, to 3 decimals; None when
    undefined (under two submissions, or either constant)."""
    try:
        return round(statistics.correlation(passes, rests), 3)
    except statistics.StatisticsError:
        return None


def flag(passed: int, submissions: int, discrimination: float | None) -> str:
    """What stands out in a check's row: all passed, all failed, negative discrimination, or ""."""
    if submissions and passed == submissions:
        return "all passed"
    if submissions and passed == 0:
        return "all failed"
    if discrimination is not None and discrimination < 0:
        return "negative discrimination"
    return ""


def items(outcomes: list[Outcome]) -> list[Item]:
    """The drive's rows: one per check id the graded reports give (see the module's docstring)."""
    reports = graded_reports(outcomes)
    apart = [frozenset(left_out(report)) for report in reports]
    ran_in = [results(report, parts) for report, parts in zip(reports, apart, strict=True)]
    unattempted = Counter(part_id for parts in apart for part_id in parts)
    return [
        item(
            check_id,
            part_id,
            severity,
            unattempted[part_id],
            [ran[check_id] for ran in ran_in if check_id in ran],
        )
        for check_id, (part_id, severity) in listed(reports).items()
    ]


def item(
    check_id: str, part_id: str, severity: str, not_attempted: int, ran: list[tuple[int, float]]
) -> Item:
    """A check's row from its `results` in the submissions where it ran, and the number that did
    not attempt its part."""
    passes, rests = [passed for passed, _ in ran], [rest for _, rest in ran]
    passed, submissions = sum(passes), len(ran)
    share = round(passed / submissions, 3) if submissions else None
    discrimination = point_biserial(passes, rests)
    return Item(check_id, part_id, severity, submissions, passed, share, discrimination,
                flag(passed, submissions, discrimination), not_attempted)  # fmt: skip


def attempts(outcomes: list[Outcome]) -> list[Attempts]:
    """Each part graded in a graded report, in the order of `PARTS`: its `Attempts`."""
    reports = graded_reports(outcomes)
    left = [(graded_parts(report), left_out(report)) for report in reports]
    rows = []
    for part_id in PARTS:
        reasons = Counter(
            apart.get(part_id, "attempted") for parts, apart in left if part_id in parts
        )
        if reasons:
            rows.append(Attempts(part_id, reasons.total(), reasons["attempted"], reasons["missing"],
                                 reasons["syntax"], reasons["stub"]))  # fmt: skip
    return rows


# -- items.csv ----------------------------------------------------------------------------------


def render_csv(outcomes: list[Outcome]) -> str:
    """`items.csv`: a header, then a row per `Item`, every field quoted, in English."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(field.name for field in fields(Item))
    for item in items(outcomes):
        writer.writerow(cell("" if value is None else value) for value in astuple(item))
    return out.getvalue()


# -- items.html ---------------------------------------------------------------------------------


def render_html(outcomes: list[Outcome], options: dict) -> str:
    """`items.html`: the rows as a table in the drive's language (`leaderboard.drive_language`)."""
    lang = drive_language(options)
    parts = attempts(outcomes)
    indicative = [part.part for part in parts if part.indicative]
    return render(
        "items.html",
        lang=lang,
        folder=clean(str(options.get("folder", "")), None),
        items=[html_row(item, lang) for item in items(outcomes)],
        attempts=parts,
        indicative=tr(lang, "list_separator").join(indicative),
        least=INDICATIVE_BELOW,
    )


def html_row(item: Item, lang: str) -> dict:
    """What the page shows of an `Item`, in `lang`: "-" for a share or a discrimination it lacks."""
    return {
        "check": item.check,
        "part": item.part,
        "severity": severity_word(lang, item.severity),
        "submissions": item.submissions,
        "not_attempted": item.not_attempted,
        "passed": item.passed,
        "pass_share": "-" if item.pass_share is None else percent(item.pass_share),
        "discrimination": "-" if item.discrimination is None else f"{item.discrimination:.3f}",
        "flag": tr(lang, FLAGS[item.flag]) if item.flag else "",
    }
