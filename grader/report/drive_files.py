"""A drive's own files in its OUT folder: the leaderboard (`leaderboard.py`) and the item
analysis (`items.py`), written together, each whole.
"""

from collections.abc import Sequence
from pathlib import Path

from grader.report import items, leaderboard
from grader.report.leaderboard import Outcome


def write_all(
    outcomes: list[Outcome], out: Path, options: dict, similar: Sequence[dict] = ()
) -> Path:
    """Write `leaderboard.csv`, `leaderboard.html`, `items.csv` and `items.html` into `out`; the
    leaderboard page's path. Each file is written whole beside its place, then moved there: an
    earlier leaderboard is replaced only by a complete one, never left half-written (by Ctrl-C, a
    full disk)."""
    out.mkdir(parents=True, exist_ok=True)
    texts = {
        "leaderboard.csv": leaderboard.render_csv(outcomes, similar),
        "leaderboard.html": leaderboard.render_html(outcomes, options, similar),
        "items.csv": items.render_csv(outcomes),
        "items.html": items.render_html(outcomes, options),
    }
    for name, text in texts.items():
        (out / f".{name}.partial").write_text(text, encoding="utf-8", errors="replace")
    for name in texts:
        (out / f".{name}.partial").replace(out / name)
    return out / "leaderboard.html"
