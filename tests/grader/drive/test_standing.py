# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""A submission's standing in its drive (`grader/drive/standing.py`): percentile ranks and
medians, in the total and per part graded, a part with full marks said as how many have them;
written into each report.json outside the seal, and said on the report's pages."""

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


def marked(total: float, parts: dict[str, tuple[float, float]]) -> dict:
    """A report scoring `total`, each of `parts` graded with (score, max_score)."""
    return {
        "score": total,
        "max_score": sum(most for _, most in parts.values()),
        "parts": {
            part: {"score": score, "max_score": most, "checks": [{"id": f"{part}/a"}]}
            for part, (score, most) in parts.items()
        },
    }


def test_a_part_with_full_marks_says_how_many_have_them_not_a_percentile() -> None:
    ranks = standings(
        {
            "best": marked(30, {"allocator": (15, 15), "decode": (15, 15)}),
            "tied": marked(25, {"allocator": (15, 15), "decode": (10, 15)}),
            "worst": marked(0, {"allocator": (0, 15), "decode": (0, 15)}),
        }
    )
    assert ranks["tied"]["parts"] == {
        "allocator": {"submissions": 3, "percentile": 66.7, "median": 15, "full_marks": 2},
        "decode": {"submissions": 3, "percentile": 50.0, "median": 10},
    }
    assert "full_marks" not in ranks["worst"]["parts"]["allocator"]
    assert ranks["best"]["total"]["full_marks"] == 1  # the total's maximum: its parts'
    assert "full_marks" not in ranks["tied"]["total"]
    best = {"drive": {"standing": ranks["best"]}}
    assert standing_line(best, "en").startswith(
        "Standing among the drive's 3 graded submissions: full marks in the total (1 of 3); "
    )
    assert "总分满分（3 份中有 1 份满分）" in standing_line(best, "zh")
    tied = {"drive": {"standing": ranks["tied"]}}
    assert standing_line(tied, "en") == (
        "Standing among the drive's 3 graded submissions: percentile 50 in the total (median 25); "
        "by part: allocator full marks (2 of 3); decode 50 (median 10)"
    )
    zh = "各部分：allocator 满分（3 份中有 2 份满分）；decode 50（中位数 10）"
    assert standing_line(tied, "zh").endswith(zh)


def test_a_part_worth_nothing_has_no_full_marks() -> None:
    nothing = marked(0, {"allocator": (0, 0)})
    ranks = standings({"a": nothing, "b": nothing})
    assert "full_marks" not in ranks["a"]["parts"]["allocator"]


def test_full_marks_are_said_on_the_report_pages(tmp_path: Path) -> None:
    report = written(tmp_path, KEY)  # full marks in every part
    zero = copy.deepcopy(report)
    for part in zero["parts"].values():
        part["score"] = 0.0
    ranks = standings({"full": report, "zero": zero})["full"]
    shown = {**report, "drive": {"standing": ranks}}
    for page in (report_html(shown), report_markdown(shown)):
        assert "by part: allocator full marks (1 of 2)" in page
        assert "allocator 75" not in page


@pytest.mark.parametrize("count", ["2", 2.0, None, float("inf")])
def test_a_full_marks_count_not_as_the_drive_writes_it_hides_the_line(count: object) -> None:
    rank = {"submissions": 3, "percentile": 66.7, "median": 15, "full_marks": count}
    total = {"submissions": 3, "percentile": 50.0, "median": 25}
    broken = {"drive": {"standing": {"total": total, "parts": {"allocator": rank}}}}
    assert standing_line(broken, "en") == ""


def test_the_standing_is_written_outside_the_seal_and_shown_on_the_pages(tmp_path: Path) -> None:
    first = written(tmp_path / "first", KEY)
    second = copy.deepcopy(first)
    second["score"] = 0.0
    reports = {"first": first, "second": second}
    for name in reports:
        shutil.copytree(tmp_path / "first" / "report", tmp_path / "drive" / name)
    outcomes = [Outcome(name, name, report, "", [], 1.0) for name, report in reports.items()]
    record(outcomes, tmp_path / "drive", "en")
    kept = json.loads((tmp_path / "drive" / "first" / "report.json").read_text())
    assert kept["drive"]["standing"]["total"] == {
        "submissions": 2,
        "percentile": 75.0,
        "median": 17.5,
        "full_marks": 1,
    }
    assert provenance.problems(kept, KEY) == []  # the drive's field is outside the seal
    page = (tmp_path / "drive" / "first" / "report.html").read_text()
    assert 'id="standing"' in page
    markdown = (tmp_path / "drive" / "first" / "report.md").read_text()
    assert "full marks in the total (1 of 2)" in page
    assert "full marks in the total (1 of 2)" in markdown
    kept["score"] = 99.0
    assert provenance.problems(kept, KEY), "the rest of the report is still sealed"


def test_a_report_graded_alone_or_with_a_broken_standing_has_no_line(tmp_path: Path) -> None:
    report = written(tmp_path, KEY)
    assert standing_line(report, "en") == ""
    assert 'id="standing"' not in report_html(report)
    for broken in ({"standing": {"total": {}}}, {"standing": "high"}, "top"):
        assert standing_line({**report, "drive": broken}, "zh") == ""
        assert report_markdown({**report, "drive": broken})
