"""report.html in a real browser: headless Chromium renders the page of a partial grade and of a
full-marks one, with no console error, with its key elements visible, on screen and printed; and
a drive's leaderboard and item analysis made of the two.

The two reports are `fixtures/*.json`: real grades (the tutorial's decode bug graded
on parts 1-3; the answer key on parts 1 and 3) with the sections this version of the kit adds
(GPU kernel timings, a part's note, the end-to-end engine check, the scheduling trace) filled in
by hand. No grading runs here.

Chromium and the page's tab are `tests/browser.py`'s (`browser`, `Tab`).

Screenshots (the page, and the page as printed) and the printed PDFs are kept in
`tests/artifacts/` (git-ignored); their paths are printed.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.drive import outputs
from grader.report.formats import score_line
from grader.report.leaderboard import Outcome
from grader.report.render import report_html
from grader.report.reviews import Flag, Review
from tests.browser import ARTIFACTS, Browser, Tab, say

FIXTURES = Path(__file__).parent / "fixtures"
# What the page shows, measured in the browser: visible means laid out, with a size, not hidden.
SHOWN = """(() => {
  const seen = (el) => !!el && el.checkVisibility({checkOpacity: true, visibilityProperty: true})
      && el.getBoundingClientRect().width > 0 && el.getBoundingClientRect().height > 0;
  const visible = (selector) => [...document.querySelectorAll(selector)].filter(seen);
  const fill = (bar) => {  // the filled width over the track's inner width
    const style = getComputedStyle(bar);
    const inner = bar.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return bar.firstElementChild.getBoundingClientRect().width / inner;
  };
  return {
    title: document.title,
    heading: visible("h1").map((el) => el.textContent),
    total: visible("#total").map((el) => el.textContent),
    partBars: visible(".part-row .bar").map(fill),
    counterexamples: visible(".check .counterexample").map((el) => el.textContent),
    timingCharts: visible("#timings svg").length,
    schedulingCharts: visible("#scheduling svg").length,
    integration: visible("#integration .tag").map((el) => el.textContent),
    integrity: visible("#integrity li").length,
    environment: visible("#environment th").map((el) => el.textContent),
    ungraded: visible(".ungraded").map((el) => el.textContent),
  };
})()"""


def ungraded_phrase(report: dict) -> str:
    """What the page says of the report's one part with points not graded here; "" if none."""
    items = [item for part in report["parts"].values() for item in part.get("ungraded", [])]
    assert len(items) <= 1, "the fixtures have at most one such part"
    return f"{items[0]['points']:g} more {items[0]['reason']}" if items else ""


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def graded_shares(report: dict) -> list[float]:
    return [
        part["score"] / part["max_score"] for part in report["parts"].values() if part["checks"]
    ]


@pytest.fixture(scope="module")
def artifacts(pytestconfig: pytest.Config) -> Iterator[list[Path]]:
    """The folder of screenshots and PDFs; their paths are printed at the end."""
    ARTIFACTS.mkdir(exist_ok=True)
    kept: list[Path] = []
    yield kept
    say(pytestconfig, "\nReport page artifacts:\n" + "\n".join(f"  {path}" for path in kept))


@pytest.mark.parametrize("name", ["partial", "full_marks"])
def test_page_shows_its_key_elements_without_console_errors(
    name: str, browser: Browser, artifacts: list[Path], tmp_path: Path
) -> None:
    report = load(name)
    page = tmp_path / "report.html"
    page.write_text(report_html(report), encoding="utf-8")
    tab = Tab(browser, page)
    try:
        shown = tab.evaluate(SHOWN)
        artifacts += tab.screenshots(f"report-{name}")
        assert tab.console_errors() == []

        assert report["submission"]["name"] in shown["title"]
        assert shown["heading"] == [report["submission"]["name"]]
        assert len(shown["total"]) == 1
        assert f"{report['score']:g}" in shown["total"][0]
        assert f"/ {report['max_score']:g}" in shown["total"][0]
        # One bar per graded part, filled to the part's share of its points.
        assert shown["partBars"] == pytest.approx(graded_shares(report), abs=0.02)
        counterexamples = [
            check["counterexample"]
            for part in report["parts"].values()
            for check in part["checks"]
            if check["status"] in ("failed", "error") and check["counterexample"]
        ]
        assert shown["counterexamples"] == counterexamples
        assert shown["timingCharts"] == len({row["part"] for row in report["benchmarks"]})
        assert shown["schedulingCharts"] == 1
        assert shown["integration"] == [report["integration"]["status"]]
        assert shown["integrity"] == len(report["integrity"])
        assert "torch" in shown["environment"]
        # Points not graded here: what the score is out of, under it; beside the total and
        # the part's score (twice).
        phrase = ungraded_phrase(report)
        out_of = [score_line(report, "en")] if phrase else []
        assert shown["ungraded"] == (out_of + [phrase] * 3 if phrase else [])

        # Printed: the same elements still shown; and a PDF.
        tab.send("Emulation.setEmulatedMedia", media="print")
        printed = tab.evaluate(SHOWN)
        assert printed["partBars"] == pytest.approx(graded_shares(report), abs=0.02)
        assert printed["counterexamples"] == counterexamples
        assert printed["timingCharts"] == shown["timingCharts"]
        artifacts += tab.screenshots(f"report-{name}-print")
        pdf = ARTIFACTS / f"report-{name}.pdf"
        assert tab.pdf(pdf) >= 2  # a report this long takes more than a page
        assert pdf.read_bytes().startswith(b"%PDF")
        artifacts.append(pdf)
        assert tab.console_errors() == []
    finally:
        tab.close()


def test_console_errors_are_caught_and_the_page_refuses_scripts(
    browser: Browser, tmp_path: Path
) -> None:
    """The check above can fail: a script slipped into the page is refused by its policy, and
    the refusal is a console error."""
    page = tmp_path / "report.html"
    html = report_html(load("partial"))
    page.write_text(html.replace("</body>", "<script>document.title = 'ran'</script></body>"))
    tab = Tab(browser, page)
    try:
        assert tab.evaluate("document.title") != "ran"
        errors = tab.console_errors()
        assert errors, "the injected script was neither refused nor reported"
        assert "Content Security Policy" in " ".join(errors)
    finally:
        tab.close()


DRIVE_SHOWN = """(() => ({
  rows: document.querySelectorAll("table.board tbody.entry").length,  // the leaderboard's
  checks: document.querySelectorAll("#checks tbody tr").length,  // the item analysis's
  struck: [...document.querySelectorAll("del")].map((el) => el.textContent),
  links: [...document.querySelectorAll("a")].map((a) => a.getAttribute("href")),
}))()"""


def test_the_drives_pages_render_without_console_errors(browser: Browser, tmp_path: Path) -> None:
    """The leaderboard (a safety mark, the most similar code, the reviewer's notes with a
    dismissed flag) and the item analysis it links to, in the browser."""
    outcomes = [Outcome(name, name, load(name), "", [], 12.0) for name in ("partial", "full_marks")]
    similar = [{"left": "partial", "right": "full_marks", "known": False,
                "files": [{"file": "a.py", "shares": "90% / 80%"}], "shares": "90% / 80%",
                "share_left": 0.9, "share_right": 0.8, "matched": 40,
                "href": "similarity/pair-001.html"}]  # fmt: skip
    flag = Flag("similar: full_marks", "dismissed", "pair work was allowed")
    reviews = {"partial": Review("ask about the decode rule", (flag,))}
    page = outputs.write_all(outcomes, tmp_path, {"folder": "drive"}, similar, reviews)
    shown = {}
    for name in (page.name, "items.html"):
        tab = Tab(browser, tmp_path / name)
        try:
            shown[name] = tab.evaluate(DRIVE_SHOWN)
            assert tab.console_errors() == [], name
        finally:
            tab.close()
    board, checks = shown[page.name], shown["items.html"]
    assert board["rows"] == len(outcomes)
    assert board["struck"] == ["similar: full_marks"]
    assert "items.html" in board["links"]
    assert "leaderboard.html" in checks["links"]
    ids = {c["id"] for o in outcomes for part in o.report["parts"].values() for c in part["checks"]}
    assert checks["checks"] == len(ids)
