"""A submission's standing in its drive: how its total and each part's score compare with the
other graded submissions of the same drive.

The percentile is the percentile rank, `100 * (below + tied / 2) / n` over the `n` graded
submissions (itself among the tied): the best of six distinct scores is at 91.7, a drive where
all tie puts each at 50. A part counts only the submissions in which it was graded. Where the
submission has full marks on a part, or in the total, its standing there also says how many of
them do (`full_marks`): the report says "full marks (N of M)", not a percentile that ties at the
top would drag to the middle.

`record` writes it into each report.json of the drive, as its `drive` field, and draws the
report's pages again, in the drive's language. The field is the drive's, not the grading's: the
seal leaves it out (`provenance.seal_of`), and every drive (a resumed one, `--merge`) computes it
anew over the reports it holds, so an edited one never outlives the next drive.
"""

from pathlib import Path
from statistics import median

from grader.provenance import DRIVE_FIELD
from grader.report.compare import ReportError, read
from grader.report.formats import graded_parts
from grader.report.leaderboard import Outcome
from grader.report.model import bounded
from grader.report.writers import replace_whole, report_json, write_pages


def percentile_rank(score: float, scores: list[float]) -> float:
    """Where `score` stands among `scores` (which hold it), 0 to 100, one decimal."""
    below = sum(other < score for other in scores)
    tied = sum(other == score for other in scores)
    return round(100 * (below + tied / 2) / len(scores), 1)


def standing(score: float, scores: list[float]) -> dict:
    """`score`'s standing among `scores`: how many, its percentile, their median."""
    return {
        "submissions": len(scores),
        "percentile": percentile_rank(score, scores),
        "median": round(median(scores), 2),
    }


def standings(reports: dict[str, dict]) -> dict[str, dict]:
    """Each report's standing in the drive of `reports` (by name): in the total, and in each part
    it was graded in."""
    totals = list(reports.values())
    by_part: dict[str, list[dict]] = {}
    for report in reports.values():
        for part_id, part in graded_parts(report).items():
            by_part.setdefault(part_id, []).append(part)
    return {
        name: {
            "total": part_standing(report, totals),
            "parts": {
                part_id: part_standing(part, by_part[part_id])
                for part_id, part in graded_parts(report).items()
            },
        }
        for name, report in reports.items()
    }


def part_standing(part: dict, parts: list[dict]) -> dict:
    """`part`'s standing among `parts` (that part of each report graded in it, or each report for
    the total, `part` among them), with `full_marks`, how many of them have full marks, where
    `part` has."""
    ranks = standing(part["score"], [other["score"] for other in parts])
    if not full_marks(part):
        return ranks
    return ranks | {"full_marks": sum(full_marks(other) for other in parts)}


def full_marks(part: dict) -> bool:
    """Whether `part` scored every point it was graded on (a part worth none has no full marks)."""
    return 0 < part.get("max_score", 0) <= part["score"]


def record(outcomes: list[Outcome], out: Path, lang: str) -> None:
    """Write each graded outcome's standing into its report folder `out/<name>/`: its report.json
    as written, with the `drive` field set (the rest unchanged, so its seal holds), replaced
    whole; then its pages drawn again in `lang`. A folder without a readable report.json is left
    alone."""
    reports = {o.name: o.report for o in outcomes if o.report is not None}
    for name, ranks in standings(reports).items():
        folder = out / name
        try:
            written = {**read(folder), DRIVE_FIELD: {"standing": ranks}}
        except ReportError:
            continue
        replace_whole(folder / "report.json", report_json(written))
        write_pages(bounded(written), folder, lang)
