"""A submission's standing in its drive (`grader/drive/standing.py`): percentile ranks and
medians, in the total and per part graded; written into each report.json outside the seal, and
said on the report's pages."""

import copy
import json
import shutil
from pathlib import Path

import pytest

from grader import provenance
from grader.drive.standing import percentile_rank, record, standings
from grader.report.formats import standing_line
from grader.report.leaderboard import Outcome
from grader.report.render import report_html, report_markdown
from tests.grader.test_seal import KEY, written


@pytest.mark.parametrize(
    ("score", "scores", "rank"),
    [
        (90, [10, 20, 30, 40, 50, 90], 91.7),  # the best of six
        (10, [10, 20, 30, 40, 50, 90], 8.3),
        (5, [5, 5, 5], 50.0),  # all tied
        (7, [7], 50.0),
        (20, [10, 20, 20, 30], 50.0),  # one below, two tied
    ],
)
def test_the_percentile_rank_counts_those_below_and_half_of_those_tied(
    score: float, scores: list[float], rank: float
) -> None:
    assert percentile_rank(score, scores) == rank


def scored(total: float, parts: dict[str, float | None]) -> dict:
    """A report of `parts` (None: a part not graded, which lists no checks) scoring `total`."""
    return {
        "score": total,
        "parts": {
            part: {"score": score or 0.0, "checks": [] if score is None else [{"id": f"{part}/a"}]}
            for part, score in parts.items()
        },
    }


def test_a_part_counts_only_the_submissions_it_was_graded_in() -> None:
    ranks = standings(
        {
            "best": scored(30, {"allocator": 15, "kernel": 15}),
            "middle": scored(20, {"allocator": 10, "kernel": None}),
            "worst": scored(5, {"allocator": 5, "kernel": 0}),
        }
    )
    assert ranks["best"]["total"] == {"submissions": 3, "percentile": 83.3, "median": 20}
    assert ranks["worst"]["parts"]["kernel"] == {
        "submissions": 2,
        "percentile": 25.0,
        "median": 7.5,
    }
    assert "kernel" not in ranks["middle"]["parts"]


def test_the_standing_is_written_outside_the_seal_and_shown_on_the_pages(tmp_path: Path) -> None:
    first = written(tmp_path / "first", KEY)
    second = copy.deepcopy(first)
    second["score"] = 0.0
    reports = {"first": first, "second": second}
    for name in reports:
        shutil.copytree(tmp_path / "first" / "report", tmp_path / "drive" / name)
    outcomes = [Outcome(name, name, report, "", [], 1.0) for name, report in reports.items()]
    record(outcomes, tmp_path / "drive")
    kept = json.loads((tmp_path / "drive" / "first" / "report.json").read_text())
    assert kept["drive"]["standing"]["total"] == {
        "submissions": 2,
        "percentile": 75.0,
        "median": 17.5,
    }
    assert provenance.problems(kept, KEY) == []  # the drive's field is outside the seal
    page = (tmp_path / "drive" / "first" / "report.html").read_text()
    assert 'id="standing"' in page
    assert "percentile 75 in the total (median 17.5)" in page
    assert "percentile 75 in the total" in (tmp_path / "drive" / "first" / "report.md").read_text()
    kept["score"] = 99.0
    assert provenance.problems(kept, KEY), "the rest of the report is still sealed"


def test_a_report_graded_alone_or_with_a_broken_standing_has_no_line(tmp_path: Path) -> None:
    report = written(tmp_path, KEY)
    assert standing_line(report, "en") == ""
    assert 'id="standing"' not in report_html(report)
    for broken in ({"standing": {"total": {}}}, {"standing": "high"}, "top"):
        assert standing_line({**report, "drive": broken}, "zh") == ""
        assert report_markdown({**report, "drive": broken})
