"""How pages are drawn (`render.py`): every page (the report, the leaderboard, compare) has the
one head with its Content-Security-Policy and nothing that runs or fetches; `.html` templates
escape what they are given, `report.md` does not, and a name missing from a template is an error."""

import csv
import io
from pathlib import Path

import jinja2
import pytest

from grader.report import compare, leaderboard
from grader.report.i18n import LANGUAGES
from grader.report.leaderboard import Outcome
from grader.report.render import environment, report_html
from tests.grader.report.test_compare import BEFORE, after
from tests.grader.report.test_writers import HOSTILE, failing_report

CSP = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src'


def pages() -> dict[str, str]:
    """The three pages, each drawn from data carrying `HOSTILE` where a candidate's text goes."""
    hostile = failing_report()
    outcomes = [
        Outcome(HOSTILE, "a", hostile, "", [], 1.0),
        Outcome(f"{HOSTILE}2", "b", None, HOSTILE, [HOSTILE], 2.0),
    ]
    changed = after()
    changed["parts"]["allocator"]["checks"][1]["message"] = HOSTILE
    return {
        "report": report_html(hostile),
        "leaderboard": leaderboard.render_html(outcomes, {"folder": HOSTILE}),
        "compare": compare.render_html(
            compare.Side(Path(HOSTILE), BEFORE), compare.Side(Path("b"), changed)
        ),
    }


@pytest.mark.parametrize("name", ["report", "leaderboard", "compare"])
def test_every_page_has_the_policy_and_nothing_that_runs_or_fetches(name: str) -> None:
    page = pages()[name]
    assert page.startswith("<!doctype html>\n")
    assert page.count(CSP) == 1
    assert page.count("<style>") == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page
    page = page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, never fetched
    for reference in ("http://", "https://", "<link", "<img", "<script", "url(", "@import"):
        assert reference not in page


@pytest.mark.parametrize("lang", LANGUAGES)
def test_html_templates_escape_and_markdown_ones_do_not(lang: str) -> None:
    env = environment(lang)
    for page in ("base.html", "report.html", "leaderboard.html", "compare.html"):
        assert env.autoescape(page)
    assert not env.autoescape("report.md")  # its strings go through markdown.py's filters
    escaping = env.overlay(autoescape=True)  # as an .html template is: the values escaped
    page = escaping.from_string("{{ _('gap', before='<b>', after=x) }}").render(x="&")
    assert page == {"en": "&lt;b&gt; &amp;", "zh": "&lt;b&gt;&amp;"}[lang]


def test_a_name_or_an_id_missing_from_a_template_is_an_error() -> None:
    with pytest.raises(jinja2.UndefinedError):
        environment("en").from_string("{{ missing }}").render()
    with pytest.raises(KeyError, match="no_such_id"):
        environment("zh").from_string("{{ _('no_such_id') }}").render()


def test_the_leaderboard_marks_a_submission_that_fails_a_safety_check() -> None:
    """The double free of `failing_report` is a safety failure: the page's row carries the mark
    and the CSV its check id. The same report written before severities, or failing only
    because its code never ran, has neither."""
    unsafe, older, unrun = failing_report(), failing_report(), failing_report()
    for part in older["parts"].values():
        for check in part["checks"]:
            check.pop("severity", None)
    unrun["parts"]["allocator"]["checks"][1]["message"] = "not implemented: BlockAllocator.free"
    reports = {"unsafe": unsafe, "older": older, "unrun": unrun}
    outcomes = [Outcome(name, name, report, "", [], 1.0) for name, report in reports.items()]
    rows = {row["candidate"]: row for row in csv.DictReader(io.StringIO(
        leaderboard.render_csv(outcomes)))}  # fmt: skip
    assert rows["unsafe"]["failed_safety"] == "allocator/free_is_atomic"
    assert rows["older"]["failed_safety"] == rows["unrun"]["failed_safety"] == ""
    page = leaderboard.render_html(outcomes, {"folder": "drive"})
    assert (
        page.count('<span class="tag safety" title="allocator/free_is_atomic">safety 1</span>') == 1
    )


def test_a_rows_note_starts_with_its_diagnosis() -> None:
    """The CSV's note and the page's note cell start with what is most wrong (`diagnosis.py`),
    before the drive's own notes, which say a check the grader could not run."""
    outcome = Outcome("a", "a", failing_report(), "", [], 1.0, ("retried",))
    (row,) = csv.DictReader(io.StringIO(leaderboard.render_csv([outcome])))
    said = "free_is_atomic (safety)"
    assert row["note"].startswith(f"{said}; "), row["note"]
    assert "the grader could not run 1 of its checks: see the report" in row["note"]
    page = leaderboard.render_html([outcome], {"folder": "drive"})
    assert f"{said}; " in page, page


def pair(left: str, right: str, shares: tuple[float, float], page: str, **fields) -> dict:
    """A similar pair's row as `grader.similarity.drive.shown` gives it: one file."""
    share_left, share_right = shares
    shown = f"{share_left:.0%} / {share_right:.0%}"
    return {"left": left, "right": right, "known": False,
            "files": [{"file": "scheduler.py", "shares": shown}], "shares": shown,
            "share_left": share_left, "share_right": share_right, "matched": 40, "href": page,
            **fields}  # fmt: skip


def test_a_row_names_the_code_most_similar_to_its_own_and_links_the_pair() -> None:
    similar = [
        {"left": "copy", "file": "scheduler.py", "obfuscated": "decodes code"},
        pair("key", "copy", (1.0, 0.97), "similarity/pair-001.html"),
        pair("copy", "nano-vllm scheduler.py", (0.6, 0.0), "similarity/pair-002.html",
             known=True),
    ]  # fmt: skip
    outcomes = [Outcome(name, name, failing_report(), "", [], 1.0) for name in ("key", "copy", "b")]
    rows = {row["candidate"]: row for row in csv.DictReader(io.StringIO(
        leaderboard.render_csv(outcomes, similar)))}  # fmt: skip
    assert (rows["key"]["similarity"], rows["key"]["similar_to"]) == ("1", "copy")
    assert (rows["copy"]["similarity"], rows["copy"]["similar_to"]) == ("0.97", "key")
    assert (rows["b"]["similarity"], rows["b"]["similar_to"]) == ("", "")
    assert [rows[name]["similar_kind"] for name in ("key", "copy", "b")] == ["candidate"] * 2 + [""]
    page = leaderboard.render_html(outcomes, {"folder": "drive"}, similar)
    cell = '<a href="similarity/pair-001.html">{}</a> <span class="muted">{} (candidate)</span>'
    assert cell.format("97%", "key") in page
    assert cell.format("100%", "copy") in page


def test_on_a_tie_the_most_similar_code_is_a_known_implementation_marked_as_such() -> None:
    """Two copies of the answer key, "aaron" and "zed": their pair is listed first (a name that
    sorts before "answer key"), yet each row names the answer key, marked as known code. A
    submission named like a known implementation is never that implementation's side."""
    similar = [
        pair("aaron", "zed", (1.0, 1.0), "similarity/pair-001.html"),
        pair("aaron", "answer key", (1.0, 1.0), "similarity/pair-002.html", known=True),
        pair("zed", "answer key", (1.0, 1.0), "similarity/pair-003.html", known=True),
    ]
    names = ("aaron", "zed", "answer key")
    outcomes = [Outcome(name, name, failing_report(), "", [], 1.0) for name in names]
    rows = {row["candidate"]: row for row in csv.DictReader(io.StringIO(
        leaderboard.render_csv(outcomes, similar)))}  # fmt: skip
    said = {name: (rows[name]["similar_to"], rows[name]["similar_kind"]) for name in names}
    assert said == {"aaron": ("answer key", "known"), "zed": ("answer key", "known"),
                    "answer key": ("", "")}  # fmt: skip
    page = leaderboard.render_html(outcomes, {"folder": "drive"}, similar)
    known = '<span class="muted">answer key (known implementation)</span>'
    assert f'<a href="similarity/pair-002.html">100%</a> {known}' in page
    assert f'<a href="similarity/pair-003.html">100%</a> {known}' in page
    assert "(candidate)</span>" not in page


def test_a_similar_pair_is_one_row_listing_each_of_its_files_and_its_shares() -> None:
    files = [{"file": "block_allocator.py", "shares": "100% / 100%"},
             {"file": "scheduler.py", "shares": "92% / 90%"}]  # fmt: skip
    similar = [pair("alice", "answer key", (1.0, 1.0), "similarity/pair-001.html", known=True,
                    files=files)]  # fmt: skip
    page = leaderboard.render_html([], {"folder": "drive"}, similar)
    section = page[page.index('id="similar"') :]
    assert section.count("<tr>") == 2  # the header and the pair
    assert "<em>answer key (known implementation)</em>" in section
    assert "block_allocator.py (100% / 100%); scheduler.py (92% / 90%)" in section
