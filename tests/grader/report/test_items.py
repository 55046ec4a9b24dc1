# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The item analysis of a drive (`items.py`): per check, the submissions it ran in, its pass share,
its discrimination (the point-biserial correlation with the rest score) and its flag; the CSV
quoted and in English, the page in the drive's language, linked from the leaderboard and back."""

import csv
import io
from pathlib import Path

import pytest

from grader.drive import outputs
from grader.report import items, leaderboard
from grader.report.items import Item
from grader.report.leaderboard import Outcome
from tests.grader.report.english import english_words, html_text
from tests.grader.report.punctuation import slips

CSP = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src'
# Each check's status in submissions a, b, c, d, and its points when passed; "-" where absent.
DRIVE = {
    "allocator/x": ("safety", 1, "PPFF"),
    "allocator/y": ("contract", 2, "PFFF"),
    "allocator/all": ("contract", 1, "PPPP"),
    "allocator/z": ("speed", 1, "FFFP"),
    "allocator/s": ("contract", 1, "SPFE"),  # skipped in a, could not run in d
    "allocator/once": ("contract", 1, "F---"),
    "decode/none": ("safety", 1, "FFFF"),
}
STATUS = {"P": "passed", "F": "failed", "S": "skipped", "E": "error"}
FOLDER = "/tmp/batch_1"


def report(checks: list[dict]) -> dict:
    """A minimal report of `checks`, the decode part listed before the allocator's."""
    parts = {"decode": [], "allocator": []}
    for check in checks:
        parts[check["id"].partition("/")[0]].append(check)
    return {
        "score": sum(check["points"] for check in checks),
        "max_score": sum(check["max_points"] for check in checks),
        "parts": {
            part_id: {"score": 0, "max_score": 0, "checks": part_checks}
            for part_id, part_checks in parts.items()
        },
        "integrity": [],
        "benchmarks": [],
    }


def submission(index: int) -> Outcome:
    """Submission `index` (0 for a) of `DRIVE`: a's total is 4, b's 3, c's 1, d's 2."""
    checks = [
        {"id": check_id, "name": check_id.partition("/")[2], "status": STATUS[said[index]],
         "points": worth if said[index] == "P" else 0, "max_points": worth, "severity": severity}
        for check_id, (severity, worth, said) in DRIVE.items()
        if said[index] != "-"
    ]  # fmt: skip
    name = "abcd"[index]
    return Outcome(name, f"{name}.zip", report(checks), "", [], 1.0)


def drive() -> list[Outcome]:
    """The four graded submissions of `DRIVE` and one the grader could not grade."""
    ungraded = Outcome("e", "e.zip", None, "exit status 2", ["not a zip"], 1.0)
    return [*(submission(index) for index in range(4)), ungraded]


def by_check() -> dict[str, Item]:
    return {item.check: item for item in items.items(drive())}


def test_rows_follow_the_parts_then_the_reports_order() -> None:
    assert [item.check for item in items.items(drive())] == [*DRIVE]
    assert [item.part for item in items.items(drive())][-1] == "decode"


def test_pass_share_and_discrimination_computed_by_hand() -> None:
    """x: passed by a and b (rest 3 and 2), failed by c and d (rest 1 and 2): the rests' mean is
    2, their deviations 1, 0, -1, 0; passing's +-1/2: r = 1 / sqrt(1 * 2) = 0.707."""
    x = by_check()["allocator/x"]
    assert (x.part, x.severity, x.submissions, x.passed) == ("allocator", "safety", 4, 2)
    assert (x.pass_share, x.discrimination, x.flag) == (0.5, 0.707, "")


def test_a_check_the_weakest_passes_alone_has_negative_discrimination() -> None:
    """z: passed by d alone (rest 1), the others' rests 4, 3, 1: r = -1.25 / sqrt(0.75 * 6.75)."""
    z = by_check()["allocator/z"]
    assert (z.submissions, z.passed, z.pass_share) == (4, 1, 0.25)
    assert (z.discrimination, z.flag) == (-0.556, "negative discrimination")


def test_all_passed_and_all_failed_are_flagged_and_have_no_discrimination() -> None:
    rows = by_check()
    assert rows["allocator/all"] == Item(
        "allocator/all", "allocator", "contract", 4, 4, 1.0, None, "all passed"
    )
    assert rows["decode/none"] == Item(
        "decode/none", "decode", "safety", 4, 0, 0.0, None, "all failed"
    )


def test_a_skipped_errored_or_absent_check_leaves_that_submission_out() -> None:
    rows = by_check()
    s = rows["allocator/s"]  # ran in b (passed, rest 2) and c (failed, rest 1)
    assert (s.submissions, s.passed, s.pass_share, s.discrimination) == (2, 1, 0.5, 1.0)
    once = rows["allocator/once"]  # one submission: no correlation
    assert (once.submissions, once.discrimination, once.flag) == (1, None, "all failed")


def test_an_ungraded_submission_is_left_out() -> None:
    assert items.items(drive()) == items.items(drive()[:4])
    assert items.items([drive()[4]]) == []


def test_a_check_that_never_ran_has_a_row_without_statistics() -> None:
    check = {"id": "allocator/x", "status": "skipped", "points": 0, "max_points": 1}
    only = Outcome("a", "a", report([check]), "", [], 1.0)
    assert items.items([only]) == [Item("allocator/x", "allocator", "", 0, 0, None, None, "")]


def test_the_csv_quotes_every_field_and_leaves_undefined_cells_empty() -> None:
    text = items.render_csv(drive())
    lines = text.splitlines()
    assert lines[0] == (
        '"check","part","severity","submissions","passed","pass_share","discrimination","flag"'
    )
    assert lines[1] == '"allocator/x","allocator","safety","4","2","0.5","0.707",""'
    assert all(line.startswith('"') and line.endswith('"') for line in lines)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(DRIVE)
    assert (rows[2]["discrimination"], rows[2]["flag"]) == ("", "all passed")


def test_no_csv_cell_is_a_formula() -> None:
    check = {"id": "=HYPERLINK(1)", "status": "passed", "points": 1, "max_points": 1}
    hostile = report([])
    hostile["parts"]["allocator"]["checks"] = [check]
    text = items.render_csv([Outcome("a", "a", hostile, "", [], 1.0)])
    assert list(csv.reader(io.StringIO(text)))[1][0] == "'=HYPERLINK(1)"


def page(lang: str) -> str:
    return items.render_html(drive(), {"folder": FOLDER, "lang": lang})


def test_the_english_page_shows_each_check_and_links_back() -> None:
    html = page("en")
    text = html_text(html)
    assert html.count(CSP) == 1
    assert "<script" not in html
    assert '<a href="leaderboard.html">' in html
    assert "Item analysis: /tmp/batch_1" in text
    assert "Discrimination is the point-biserial correlation" in text
    assert "<code>allocator/x</code>" in html
    for said in ("50%", "0.707", "-0.556", "negative discrimination", "all failed"):
        assert said in text, said


def test_the_chinese_page_has_no_english_words() -> None:
    html = page("zh")
    text = html_text(html)
    assert '<html lang="zh-CN">' in html
    assert '<a href="leaderboard.html">' in html
    for said in ("逐项分析：/tmp/batch_1", "区分度", "全部通过", "全部未通过", "区分度为负"):
        assert said in text, said
    assert english_words(text) == [], text
    assert slips(text) == [], text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_leaderboard_links_to_the_item_analysis(lang: str) -> None:
    html = leaderboard.render_html(drive(), {"folder": FOLDER, "lang": lang})
    assert '<a href="items.html">' in html


def test_write_all_writes_the_item_analysis_beside_the_leaderboard(tmp_path: Path) -> None:
    outputs.write_all(drive(), tmp_path, {"folder": FOLDER})
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "items.csv", "items.html", "leaderboard.csv", "leaderboard.html"
    ]  # fmt: skip
    assert (tmp_path / "items.csv").read_text() == items.render_csv(drive())


def test_the_page_escapes_a_check_id() -> None:
    check = {"id": "<script>alert(1)</script>", "status": "passed", "points": 1, "max_points": 1}
    hostile = report([])
    hostile["parts"]["allocator"]["checks"] = [check]
    html = items.render_html([Outcome("a", "a", hostile, "", [], 1.0)], {})
    assert "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>" in html
    assert "<script" not in html
