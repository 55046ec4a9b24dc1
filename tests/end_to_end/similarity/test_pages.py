"""The similarity pages in a real browser (`tests/browser.py`): the leaderboard's "Similar pairs"
section and a pair's side-by-side page render with no console error, show what they list, and
run nothing a candidate's name or code carries."""

from pathlib import Path

from grader.drive import outputs
from grader.similarity.drive import shown, similarity_report
from tests.browser import Browser, Tab
from tests.end_to_end.similarity.copies import intake, key_files, renamed_and_reordered

HOSTILE = "<script>document.title = 'ran'</script>"

SHOWN = """(() => {
  const seen = (el) => el.checkVisibility() && el.getBoundingClientRect().height > 0;
  const visible = (selector) => [...document.querySelectorAll(selector)].filter(seen);
  return {
    title: document.title,
    pairs: visible("#similar ~ table tbody tr").length,
    links: visible("#similar ~ table a").map((a) => a.getAttribute("href")),
    matched: visible("span.hit").length,
    text: document.body.innerText,
  };
})()"""


def drive(out: Path) -> Path:
    """A drive of two submissions, one a renamed and reordered copy of the other (under a
    hostile name): its leaderboard page, with the similar pairs."""
    key = key_files()
    copy = {name: renamed_and_reordered(source, seed=3) for name, source in key.items()}
    rows = similarity_report([intake("honest", key), intake(HOSTILE, copy)], out)
    assert rows, "the copy was not flagged"
    return outputs.write_all([], out, {"folder": "drive"}, [shown(row) for row in rows])


def page_shows(browser: Browser, page: Path) -> dict:
    tab = Tab(browser, page)
    try:
        seen = tab.evaluate(SHOWN)
        assert tab.console_errors() == []
        return seen
    finally:
        tab.close()


def test_the_leaderboard_lists_the_similar_pairs_with_links_that_resolve(
    browser: Browser, tmp_path: Path
) -> None:
    page = drive(tmp_path)
    board = page_shows(browser, page)
    assert board["title"] != "ran"
    assert board["pairs"] >= 2  # the two submissions, and each against the answer key
    assert HOSTILE in board["text"]  # as text, never as markup
    assert all((tmp_path / link).is_file() for link in board["links"]), board["links"]
    pair = page_shows(browser, tmp_path / board["links"][0])
    assert pair["title"] != "ran"
    assert pair["matched"] > 0
    assert "Similar code" in pair["text"]
