"""A drive's own outputs, once its gradings are done: each report's standing in the drive
(`standing.py`, into its report folder), then in OUT the leaderboard (`leaderboard.py`) and the
item analysis (`items.py`), written together, each whole; and a warning for each submission the
reviewer's notes name that the drive has no row for, in the drive's language.
"""

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from grader.drive import standing
from grader.report import items, leaderboard
from grader.report.i18n import tr
from grader.report.leaderboard import Outcome, drive_language, unmatched_reviews
from grader.report.reviews import Review


def write_all(
    outcomes: list[Outcome],
    out: Path,
    options: dict,
    similar: Sequence[dict] = (),
    reviews: Mapping[str, Review] | None = None,
) -> Path:
    """Record each report's standing (`standing.record`, its pages drawn again in the drive's
    language), then write `leaderboard.csv`, `leaderboard.html` (with the reviewer's notes,
    `reviews`), `items.csv` and `items.html` into `out`; the leaderboard page's path. Each file
    is written whole beside its place, then moved there: an earlier leaderboard is replaced only
    by a complete one, never left half-written (by Ctrl-C, a full disk)."""
    standing.record(outcomes, out, drive_language(options))
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        "leaderboard.csv": leaderboard.render_csv(outcomes, similar, reviews),
        "leaderboard.html": leaderboard.render_html(outcomes, options, similar, reviews),
        "items.csv": items.render_csv(outcomes),
        "items.html": items.render_html(outcomes, options),
    }
    for name, text in texts.items():
        (out / f".{name}.partial").write_text(text, encoding="utf-8", errors="replace")
    for name in texts:
        (out / f".{name}.partial").replace(out / name)
    return out / "leaderboard.html"


def warn_unmatched(
    outcomes: list[Outcome], reviews: Mapping[str, Review] | None, source: Path | None, lang: str
) -> None:
    """A warning on stderr, in `lang`, for each submission the reviewer's notes (from `source`)
    name that no row of the drive is (a misspelt name, say): its notes are shown nowhere."""
    for name in unmatched_reviews(outcomes, reviews):
        print(tr(lang, "drive_unmatched_review", source=source, name=name), file=sys.stderr)
