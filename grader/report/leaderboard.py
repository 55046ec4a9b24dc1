"""The batch's leaderboard: `leaderboard.csv` and `leaderboard.html`, one row per submission,
the page linking to the item analysis beside it (`items.py`); `grader/drive/outputs.py` writes
them.

A row holds the candidate, the total and each part's score, the checks it fails whose failure
means a corrupted or leaking cache (severity "safety": marked, first in the page's note cell, and
the CSV's `failed_safety`, ids separated by spaces), the number of integrity flags (never
part of the score) and the first of them (all are in the report: a flood of them cannot fill the
board), the highest share of its code found in another submission or a known implementation
(`most_similar`, a known implementation first on a tie: the page links it to the pair's page and
says whether the other side is a known implementation or a candidate; the CSV's `similarity`,
`similar_to` and `similar_kind`, "known" or "candidate"),
the kernel's timing ratio (the geometric mean of the kernel part's benchmark ratios),
the time the grading took, a relative link to the report and the entry it was graded from (its
path, as grade-all was given it: the CSV's `entry` column, the page's tooltip on the name); a
submission the grader could not grade gets a row saying why. Rows are sorted by score, best
first; ungraded ones come last.

A row's note starts with its report's diagnosis (`diagnosis.py`: what is most wrong with it, most
serious first; none for full marks), then its notes (`notes`: the drive's remarks, "not isolated",
the grader's own failure, "provisional"): the CSV's `note`, each row whole. The page states once,
above the table, the notes every graded row shares (`shared_notes`: "provisional (kernel)" on a
machine without a GPU, "kept from an earlier run" on a resumed drive), and keeps on each row only
the others. After them come the reviewer's note and each flag's verdict (`reviews.py`: a dismissed
flag struck through, never removed; the CSV's `review_note` and `review_flags`), which change no
score, rank or other column.

The CSV is data: its columns and cells are in English whatever the drive's language. The page is
in the drive's language (`options["lang"]`): its own words through `i18n.tr`, the grader's and the
drive's (an integrity flag, why a submission has no report, a remark) from their ids
(`messages.py`).

The page (`templates/leaderboard.html`) is self-contained, like every page (`render.py`). Names,
reports and log tails may carry a candidate's text: both files show each outcome `cleaned`
(`text.py`: no control characters or lone surrogates, bounded lengths); the page's template
escapes every string. The CSV quotes every field, and puts a `'` before any stretch of text a
spreadsheet could read as a formula, whatever delimiter it assumes (`cell`).
"""

import csv
import io
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from urllib.parse import quote

from grader.parts import PARTS
from grader.report.diagnosis import diagnosis
from grader.report.formats import origin, points, safety_failures
from grader.report.i18n import LANGUAGES, profile_name, tr
from grader.report.messages import said_in, text_in
from grader.report.model import bounded
from grader.report.render import render
from grader.report.reviews import Flag, Review
from grader.said import Said, from_record
from grader.text import clean

# A spreadsheet runs a cell as a formula when its first character past blanks and quotes is one
# of these. A reader that assumes another delimiter than ours (`;`, tab) loses track of our quotes,
# so a cell may begin anywhere a delimiter or a line break is: at a field's start, after a `,`, `;`,
# tab, CR or LF inside it.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
FORMULA_CELL = re.compile(rf"(^|[,;\t\r\n])([ \"]*)(?=[{re.escape(''.join(FORMULA_START))}])")
NAME_CHARS = 200  # of a submission's name
NO_REVIEW = Review("", ())


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


def kernel_ratio(report: dict, lang: str = "en") -> str:
    """The geometric mean of the kernel's timing ratios, or why there is none (in `lang`)."""
    ratios = [b["ratio"] for b in report["benchmarks"] if b["part"] == "kernel" and b["ratio"] > 0]
    if ratios:
        return f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}"
    kernel = report["parts"].get("kernel")
    if not kernel or not kernel["checks"]:
        return tr(lang, "board_ratio_not_graded")
    if report["environment"].get("device") == "cpu":
        return tr(lang, "board_ratio_no_gpu")
    return tr(lang, "board_ratio_not_timed")


def first_flag(report: dict) -> str:
    """The first integrity flag, where it comes from and what it says; "" where there is none. A
    row shows it beside the count (every flag is in the report)."""
    return "".join(f"{origin(flag)}: {flag['message']}" for flag in report["integrity"][:1])


def shown_flag(report: dict, lang: str) -> dict | None:
    """The first integrity flag as the page shows it: where it comes from, and its message in
    `lang`; None where there is none."""
    return next(
        ({"origin": origin(flag), "message": said_in(lang, flag, "message")}
         for flag in report["integrity"]),
        None,
    )  # fmt: skip


def unisolated(isolation: dict, lang: str) -> str:
    """An unisolated grading's note, its reason aside: the status its description starts with."""
    records = isolation.get("said")
    description = from_record(records.get("description")) if isinstance(records, dict) else None
    status = description.params.get("status") if description is not None else None
    if isinstance(status, Said):
        return text_in(lang, status)
    return str(isolation["description"]).partition(" (")[0]  # a report without its record


def notes(outcome: Outcome) -> list[str]:
    """What a row of the CSV says beside the scores, in English: why a submission has no score,
    or its `report_notes`."""
    if outcome.report is None:
        return [f"not graded ({outcome.failure}): " + " | ".join(outcome.tail), *outcome.remarks]
    return report_notes(outcome, "en")


def report_notes(outcome: Outcome, lang: str) -> list[str]:
    """What a graded row says beside the scores, in `lang`: the drive's remarks, and what to
    know of its grading (not isolated, the grader's own failure or checks it could not run,
    provisional)."""
    notes = [text_in(lang, remark) for remark in outcome.remarks]
    isolation = outcome.report.get("isolation", {})
    if isolation.get("isolated") is False and isolation.get("description"):
        notes.append(unisolated(isolation, lang))
    if outcome.report.get("errors"):
        last = outcome.report["errors"][-1].strip().rpartition("\n")[2]
        notes.append(tr(lang, "board_grader_failed", error=last))
    parts = outcome.report["parts"]
    errored = [c for part in parts.values() for c in part["checks"] if c.get("status") == "error"]
    if errored:
        notes.append(tr(lang, "board_check_errors", count=len(errored)))
    provisional = [part_id for part_id, part in parts.items() if "provisional" in part]
    if provisional:
        notes.append(tr(lang, "board_provisional", parts=", ".join(provisional)))
    return notes


def shared_notes(outcomes: list[Outcome], lang: str = "en") -> list[str]:
    """The notes every graded row has (`report_notes`, in `lang`), when two or more are graded:
    said once, above the page's table (in the order of the first row's notes)."""
    graded = [report_notes(o, lang) for o in outcomes if o.report is not None]
    if len(graded) < 2:
        return []
    return [note for note in graded[0] if all(note in others for others in graded[1:])]


def most_similar(name: str, similar: Sequence[dict]) -> dict | None:
    """Of the similar pairs (`grader.similarity.drive.shown` rows), the one where the code of the
    submission `name` (`cleaned`) has its highest share, a known implementation's before another
    submission's on a tie (then the first listed): that `share`, the `other` side, whether it is
    `known` (else a candidate) and the pair page's `href`; None where it is in none."""
    found = [
        {"share": pair[f"share_{side}"], "other": pair[other], "known": pair["known"],
         "href": pair["href"]}
        for pair in similar
        if "href" in pair  # not a row of an obfuscated file or a failed comparison
        for side, other in submission_sides(pair)
        if pair[side] == name
    ]  # fmt: skip
    return max(found, key=lambda pair: (pair["share"], pair["known"]), default=None)


def similar_cells(pair: dict | None) -> list:
    """The CSV's `similarity`, `similar_to` and `similar_kind` of a row's `most_similar` pair."""
    if pair is None:
        return ["", "", ""]
    return [round(pair["share"], 2), pair["other"], "known" if pair["known"] else "candidate"]


def submission_sides(pair: dict) -> tuple[tuple[str, str], ...]:
    """(a submission's side, the other side) of a similar pair, for each submission in it: a
    known implementation, on the right, is none (whatever a submission's name)."""
    return (("left", "right"),) if pair["known"] else (("left", "right"), ("right", "left"))


def reviewed(reviews: Mapping[str, Review] | None) -> dict[str, Review]:
    """The reviewer's notes (`reviews.py`) by `cleaned` name, each note, flag and reason
    cleaned and bounded (`text.clean`): the reviewer's text, shown as the candidates' is."""
    return {
        clean(name, NAME_CHARS): Review(
            clean(review.note),
            tuple(Flag(clean(f.about), f.verdict, clean(f.reason)) for f in review.flags),
        )
        for name, review in (reviews or {}).items()
    }


def unmatched_reviews(outcomes: list[Outcome], reviews: Mapping[str, Review] | None) -> list[str]:
    """The names in the reviewer's notes (`reviewed`) that no row of `outcomes` has."""
    names = {clean(o.name, NAME_CHARS) for o in outcomes}
    return [name for name in reviewed(reviews) if name not in names]


def report_path(outcome: Outcome) -> str:
    """The report (or, with none, the grader's log), relative to the leaderboard."""
    return f"{outcome.name}/{'report.html' if outcome.report else 'grade.log'}"


def link(outcome: Outcome) -> str:
    """`report_path` as a URL, for the page: of the name as it is on disk, not `cleaned`
    (undecodable bytes, as surrogates, are quoted as the bytes they were)."""
    return quote(report_path(outcome), errors="surrogateescape")


def took(seconds: float, lang: str = "en") -> str:
    """How long a grading took, in `lang`: "2 min 05 s", "42 s"."""
    minutes, rest = divmod(round(seconds), 60)
    if minutes:
        return tr(lang, "board_took_minutes", minutes=minutes, seconds=f"{rest:02d}")
    return tr(lang, "board_took", seconds=rest)


# -- leaderboard.csv ----------------------------------------------------------------------------


def cell(value: object) -> str:
    """A CSV cell. In text, each stretch a spreadsheet could read as a cell of its own
    (`FORMULA_CELL`) that would start a formula gets a `'` before its first character past
    blanks and quotes, which shows it as text."""
    if not isinstance(value, str):
        return f"{value:g}" if isinstance(value, float) else str(value)
    return FORMULA_CELL.sub(r"\1\2'", value)


def flag_review(flag: Flag) -> str:
    """A flag's verdict as the CSV's `review_flags` gives it: "dismissed: about (reason)"."""
    return f"{flag.verdict}: {flag.about} ({flag.reason})"


def render_csv(
    outcomes: list[Outcome],
    similar: Sequence[dict] = (),
    reviews: Mapping[str, Review] | None = None,
) -> str:
    parts = parts_of(outcomes)
    by_name = reviewed(reviews)
    header = ["rank", "candidate", "entry", "status", "score", "max_score", *parts,
              "failed_safety", "integrity_flags", "first_flag", "similarity", "similar_to",
              "similar_kind", "kernel_ratio", "seconds", "report", "note", "review_note",
              "review_flags"]  # fmt: skip
    out = io.StringIO()
    # Every field quoted: a reader that splits on another delimiter (`;`, as Excel does in
    # most of Europe) finds no cell that begins inside a name or a note.
    writer = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    for rank, o in ranked([cleaned(o) for o in outcomes]):
        r = o.report
        if r is None:
            scores = ["", "", *([""] * len(parts)), "", "", "", "", "", "", ""]
        else:
            part_scores = [
                r["parts"][p]["score"] if r["parts"].get(p, {}).get("checks") else "" for p in parts
            ]
            scores = [r["score"], r["max_score"], *part_scores, " ".join(safety_failures(r)),
                      len(r["integrity"]), first_flag(r),
                      *similar_cells(most_similar(o.name, similar)), kernel_ratio(r)]  # fmt: skip
        status = "graded" if r else "not graded"
        said = diagnosis(r, "en") if r else []
        review = by_name.get(o.name, NO_REVIEW)
        row = [rank or "", o.name, o.entry, status, *scores, round(o.seconds, 1), report_path(o),
               "; ".join(said + notes(o)), review.note,
               "; ".join(map(flag_review, review.flags))]  # fmt: skip
        writer.writerow([cell(value) for value in row])
    return out.getvalue()


# -- leaderboard.html ---------------------------------------------------------------------------


def render_html(
    outcomes: list[Outcome],
    options: dict,
    similar: Sequence[dict] = (),
    reviews: Mapping[str, Review] | None = None,
) -> str:
    """The page (`templates/leaderboard.html`) in the drive's language (`drive_language`): a row
    per submission, as `html_row` gives it, with the reviewer's notes on it (`review_pieces`),
    then the similar pairs (`grader.similarity.drive.shown` rows); neither changes a score. A
    name the notes give that no row has (`unmatched_reviews`) is said above the table."""
    lang = drive_language(options)
    by_name = reviewed(reviews)
    parts = parts_of(outcomes)
    shared = [clean(note) for note in shared_notes(outcomes, lang)]
    rows = [
        html_row(rank, cleaned(o), parts, link(o), shared, lang) for rank, o in ranked(outcomes)
    ]
    for row in rows:
        row["similar"] = most_similar(row["name"], similar)
        row["review"] = review_pieces(by_name.get(row["name"], NO_REVIEW), lang)
    return render(
        "leaderboard.html",
        lang=lang,
        folder=clean(str(options.get("folder", "")), None),
        graded=sum(o.report is not None for o in outcomes),
        total=len(outcomes),
        settings=settings(options, lang),
        when=time.strftime("%Y-%m-%d %H:%M"),
        parts=parts,
        shared_notes=shared,
        unmatched=unmatched_reviews(outcomes, reviews),
        rows=rows,
        similar=similar,
    )


def review_pieces(review: Review, lang: str) -> list[dict]:
    """What a row's note cell shows of `review` (`reviewed`), in `lang`, after the row's own
    note: the reviewer's note, then each flag's verdict; a dismissed flag's `struck` text (what
    it is about) is shown struck through, before why it was dismissed."""
    pieces = []
    if review.note:
        pieces.append({"struck": "", "text": tr(lang, "board_review_note", note=review.note)})
    for flag in review.flags:
        if flag.verdict == "confirmed":
            said = tr(lang, "board_review_confirmed", about=flag.about, reason=flag.reason)
            pieces.append({"struck": "", "text": said})
        else:
            said = tr(lang, "board_review_dismissed", reason=flag.reason)
            pieces.append({"struck": flag.about, "text": said})
    return pieces


def drive_language(options: dict) -> str:
    """The drive's language (`--lang`, `options["lang"]`) when the kit knows it, else English."""
    lang = options.get("lang", "en")
    return lang if lang in LANGUAGES else "en"


def settings(options: dict, lang: str) -> str:
    """The drive's profile and seed, in `lang`: "quick profile, seed 7"."""
    profile = profile_name(lang, options.get("profile", "quick"))
    seed = options.get("seed")
    if seed is None:
        return tr(lang, "board_settings_default", profile=profile)
    return tr(lang, "board_settings_seed", profile=profile, seed=seed)


def html_row(
    rank: int | None,
    outcome: Outcome,
    parts: list[str],
    href: str,
    shared: Sequence[str] = (),
    lang: str = "en",
) -> dict:
    """What the page shows of a submission, in `lang`; `outcome` is `cleaned`, `href` the `link`
    to its report, `shared` the notes said above the table, left out of the row. A part's score
    is None where the part was not graded, absent where not listed."""
    row = {
        "rank": rank,
        "name": outcome.name,
        "entry": outcome.entry,
        "entry_name": entry_name(outcome),
        "href": href,
        "took": took(outcome.seconds, lang),
    }
    separator = tr(lang, "list_separator")
    r = outcome.report
    if r is None:
        return {
            **row,
            "failure": text_in(lang, outcome.failure),
            "tail": "\n".join(outcome.tail),
            "remarks": separator.join(text_in(lang, remark) for remark in outcome.remarks),
        }
    notes = [note for note in report_notes(outcome, lang) if note not in shared]
    return {
        **row,
        "score": points(r["score"]),
        "max_score": points(r["max_score"]),
        "parts": [part_cell(r["parts"].get(part)) for part in parts],
        "unsafe": safety_failures(r),
        "diagnosis": separator.join(diagnosis(r, lang)),
        "flag_count": len(r["integrity"]),
        "first_flag": shown_flag(r, lang),
        "kernel_ratio": kernel_ratio(r, lang),
        "note": separator.join(notes),
    }


def entry_name(outcome: Outcome) -> str:
    """The entry's own name (`a.zip`) where the row's name (`a`) does not say it, else ""."""
    name = PurePath(outcome.entry).name
    return "" if name == outcome.name else name


def part_cell(part: dict | None) -> str | None:
    """A part's score; "-" for a part the report does not list, None for one not graded."""
    if part is None:
        return "-"
    return f"{points(part['score'])} / {points(part['max_score'])}" if part["checks"] else None
