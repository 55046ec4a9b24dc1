"""A drive's own files in its OUT folder: the leaderboard (`leaderboard.py`) and the item
analysis (`items.py`), written together, each whole.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path

from grader.report import items, leaderboard
from grader.report.leaderboard import Outcome
from grader.report.reviews import Review


def write_all(
    outcomes: list[Outcome],
    out: Path,
    options: dict,
    similar: Sequence[dict] = (),
    reviews: Mapping[str, Review] | None = None,
) -> Path:
    """Write `leaderboard.csv`, `leaderboard.html` (with the reviewer's notes, `reviews`),
    `items.csv` and `items.html` into `out`; the leaderboard page's path. Each file is written
    whole beside its place, then moved there: an earlier leaderboard is replaced only by a
    complete one, never left half-written (by Ctrl-C, a full disk)."""
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
