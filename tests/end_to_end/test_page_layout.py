"""Every kind of page the kit writes, seen as a person sees it: in headless Chromium, in English and
in Chinese, in a laptop's window (1280 px) and a narrow one (800 px), and printed on A4.

The pages are drawn from real gradings, the golden reports' (`test_golden_reports.grade_case`,
graded once per session and shared with that module): the answer key with no failure, and a
report of about ten failed checks made of the three mutants' failed parts; a drive of eight rows
(those, their mutants, a second copy of the answer key, one the grader could not grade) with the
reviewer's notes, its item analysis, a similar pair's page, the comparison of two reports, and
the simulation's page.

On each page, at each width and as printed on A4, with every folded section opened: no box of
text narrower than its text needs (`tests/browser.LAYOUT`: the lesser of its text on one line and
12 characters of its font), nothing past the window's (or the paper's) right edge, on paper no
box cut short, and what a reader comes for on the first screen (a report's score and diagnosis,
the leaderboard's first row). Printed, before anything is opened: a report without failures on at
most 6 pages, one with about ten failed checks on at most 12, the leaderboard of 8 submissions on
at most 8. The screenshots and PDFs are kept in
`tests/artifacts/layout-*` (git-ignored).
"""

import json
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from grader.drive import outputs
from grader.report import compare
from grader.report.leaderboard import Outcome
from grader.report.render import report_html, simulation_html
from grader.report.reviews import Flag, Review
from grader.similarity.drive import shown, similarity_report
from tests.browser import ARTIFACTS, HEIGHT, Browser, Tab, say
from tests.end_to_end.similarity.copies import intake, key_files, renamed_and_reordered
from tests.end_to_end.test_golden_reports import CASES, grade_case
from tests.grading import Graded, concurrently

LANGS = ("en", "zh")
WIDTHS = (1280, 800)
MUTANTS = ("negative_id_wraps", "tutorial_decode_rule", "fork_without_incref")
# A page's most printed A4 pages, where the issue that asked for this test set one.
MOST_PAGES = {"report_full_marks": 6, "report_failing": 12, "leaderboard": 8}
# What a reader comes for, which must end within the first screen.
FIRST_SCREEN = {
    "report_full_marks": ("#total",),
    "report_failing": ("#total", "#diagnosis"),
    "leaderboard": ("tbody.entry",),
}
PAGES = ("report_full_marks", "report_failing", "leaderboard", "items", "pair", "compare",
         "simulation")  # fmt: skip


@pytest.fixture(scope="module")
def graded(shared_gradings: Path) -> dict[str, Future[Graded]]:
    return concurrently(
        {name: lambda name=name: grade_case(name, shared_gradings) for name in CASES}
    )


def report_of(graded: dict[str, Future[Graded]], name: str) -> dict:
    report = graded[name].result().report
    assert report, f"the grading of {name} wrote no report"
    return report


def failing(graded: dict[str, Future[Graded]]) -> dict:
    """The answer key's report with each mutant's failed part in place of its own: about ten
    failed checks, over three parts, each with its counterexample, and the view of each file a
    failure was raised in (`code`)."""
    report = json.loads(json.dumps(report_of(graded, "answer_key")))
    for name in MUTANTS:
        for part_id, part in report_of(graded, name)["parts"].items():
            if part["score"] < part["max_score"]:
                report["parts"][part_id] = part
        report["code"] += report_of(graded, name)["code"]
    assert report["code"], "no failure was raised in a mutant's file"
    report["score"] = round(sum(part["score"] for part in report["parts"].values()), 2)
    failed = [check for part in report["parts"].values() for check in part["checks"]
              if check["status"] in ("failed", "error")]  # fmt: skip
    assert 8 <= len(failed) <= 12, f"{len(failed)} failed checks, not about ten"
    return report


def drive(folder: Path, reports: dict[str, dict], lang: str) -> Path:
    """A drive of eight rows, its leaderboard (with the reviewer's notes and the similar pairs
    among two copies of the answer key and a renamed one), item analysis and pair pages in
    `folder`, in `lang`; the leaderboard's path."""
    outcomes = [Outcome(name, f"submissions/{name}", report, "", [], 61.0)
                for name, report in reports.items()]  # fmt: skip
    tail = ["Grading part allocator...", "(no output)"]
    timed_out = Outcome("timed_out", "submissions/timed_out.zip", None, "timed out", tail, 3600.0)
    outcomes.append(timed_out)
    key = key_files()
    renamed = {name: renamed_and_reordered(source, seed=5) for name, source in key.items()}
    intakes = [intake("alice", key), intake("bob", key), intake("carol", renamed)]
    similar = [shown(row) for row in similarity_report(intakes, folder, lang=lang)]
    reviews = {
        "alice": Review("Strong on the phone screen; ask how the kernel would split the KV.", ()),
        "bob": Review("", (Flag("similar: alice", "dismissed", "pair work was allowed"),)),
        "nobody": Review("a name the drive has no row for", ()),
    }
    options = {"folder": "submissions", "lang": lang, "profile": "quick"}
    return outputs.write_all(outcomes, folder, options, similar, reviews)


@pytest.fixture(scope="module")
def pages(
    graded: dict[str, Future[Graded]], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], Path]:
    """Each kind of page in each language: `(kind, lang) -> its file`."""
    key, bad = report_of(graded, "answer_key"), failing(graded)
    reports = {"alice": key, "bob": key, "carol": bad} | {
        name: report_of(graded, name) for name in MUTANTS
    }
    reports["dave"] = {**bad, "score": bad["score"] - 1}  # a second failing row, ranked apart
    found: dict[tuple[str, str], Path] = {}
    for lang in LANGS:
        folder = tmp_path_factory.mktemp(f"layout-{lang}")
        texts = {
            "report_full_marks": report_html(key, lang),
            "report_failing": report_html(bad, lang),
            "simulation": simulation_html(key, lang),
            "compare": compare.render_html(
                compare.Side(folder / "a", key), compare.Side(folder / "b", bad), lang
            ),
        }
        for kind, text in texts.items():
            found[kind, lang] = (
                folder / kind / ("report.html" if "report" in kind else f"{kind}.html")
            )
            found[kind, lang].parent.mkdir(parents=True)
            found[kind, lang].write_text(text, encoding="utf-8")
        board = drive(folder / "drive", reports, lang)
        found["leaderboard", lang] = board
        found["items", lang] = board.parent / "items.html"
        pairs = sorted((board.parent / "similarity").glob("pair-*.html"))
        assert pairs, "the drive found no similar pair"
        found["pair", lang] = pairs[0]
    return found


@pytest.fixture(scope="module")
def artifacts(pytestconfig: pytest.Config) -> Iterator[list[Path]]:
    kept: list[Path] = []
    yield kept
    say(pytestconfig, "\nPage layout artifacts:\n" + "\n".join(f"  {path}" for path in kept))


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("kind", PAGES)
def test_a_page_lays_out_at_every_width_and_prints_within_its_pages(
    kind: str,
    lang: str,
    pages: dict[tuple[str, str], Path],
    browser: Browser,
    artifacts: list[Path],
) -> None:
    for width in WIDTHS:
        tab = Tab(browser, pages[kind, lang], width)
        try:
            stem = f"layout-{kind}-{lang}-{width}"
            artifacts.extend(tab.screenshots(stem))
            for selector in FIRST_SCREEN.get(kind, ()):
                assert tab.bottom(selector) <= HEIGHT, f"{selector} is below the first screen"
            if width == WIDTHS[0]:
                printed = tab.pdf(ARTIFACTS / f"{stem}.pdf")
                artifacts.append(ARTIFACTS / f"{stem}.pdf")
                assert 1 <= printed <= MOST_PAGES.get(kind, printed), f"printed on {printed} pages"
                paper = tab.printed_layout()
                assert paper["narrow"] == [], "printed:\n" + "\n".join(paper["narrow"])
                assert paper["overflow"] <= 0, f"printed, {paper['overflow']} px too wide"
                assert paper["clipped"] == [], "printed:\n" + "\n".join(paper["clipped"])
            layout = tab.layout()
            assert layout["narrow"] == [], f"at {width} px:\n" + "\n".join(layout["narrow"])
            assert layout["overflow"] <= 0, f"at {width} px, {layout['overflow']} px too wide"
            assert tab.console_errors() == []
        finally:
            tab.close()


def test_the_link_to_the_line_a_failure_raised_at_opens_its_file_there(
    pages: dict[tuple[str, str], Path], browser: Browser
) -> None:
    """A failed check's "raised in your code" link, followed, opens the folded view of that
    file and shows the marked line, with the check beside it, on the first screen."""
    page = pages["report_failing", "en"]
    tab = Tab(browser, page)
    try:
        href = tab.evaluate("document.querySelector('.raised-at a').getAttribute('href')")
        tab.send("Page.navigate", url=f"{page.resolve().as_uri()}{href}")
        browser.wait_for("Page.navigatedWithinDocument", tab.session)
        line = f"document.getElementById({json.dumps(href[1:])})"
        assert tab.evaluate(f"{line}.closest('details').open") is True
        top = tab.evaluate(f"{line}.getBoundingClientRect().top")
        # scrolled to its top, less a fraction of a pixel where the page's layout rounds
        assert -1 < top < HEIGHT, f"the marked line is {top} px down the window"
        assert tab.evaluate(f"{line}.querySelector('.raised-checks a') !== null")
    finally:
        tab.close()


# The layout a page had before this test: an interviewer's question as a grid's first column,
# sized to its whole text, its answer squeezed into what is left.
SQUEEZED = "<style>dl{display:grid !important;grid-template-columns:max-content 1fr}</style>"


def test_the_layout_check_finds_a_squeezed_column_and_a_page_too_wide(
    pages: dict[tuple[str, str], Path], browser: Browser, tmp_path: Path
) -> None:
    """The check above can fail: the old grid of questions and answers squeezes each answer to a
    column a few characters wide, and a page wider than the window is measured as such."""
    html = pages["report_failing", "en"].read_text(encoding="utf-8")
    page = tmp_path / "report.html"
    page.write_text(html.replace("</head>", f"{SQUEEZED}</head>"), encoding="utf-8")
    tab = Tab(browser, page, WIDTHS[0])
    try:
        narrow = tab.layout()["narrow"]
        assert any("<dd" in line for line in narrow), narrow
        tab.evaluate("(document.body.style.minWidth = '2000px').length")
        assert tab.layout()["overflow"] > 0
    finally:
        tab.close()
