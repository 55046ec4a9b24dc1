"""Text made inert in `report.md`: the filters its template passes every report string through.

Markdown has no autoescape: `plain` (prose and table cells), `code_span` (a name in inline code)
and `fence` (a block: a message, a counterexample, a traceback) are how a report's string gets
into the file, and none of them lets it open raw HTML, break a table cell or close its code early.
What the candidate wrote or its worker said (the submission's name, an integrity event, an
exception's or a syntax error's message, the engine check's message and figures) goes in a code span
or a fence only: in prose, `[text](url)` would still render as a link, and `![](url)` as an image
fetched when the file is viewed.
"""

import re
from html import escape

from grader.report.formats import percent, share


def plain(text: str) -> str:
    """`text` safe in Markdown prose and table cells: one line, no raw HTML, no cell breaks."""
    return escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def code_span(text: str) -> str:
    """Inline code that no backtick in `text` can close early (CommonMark's rule)."""
    ticks = "`" * (longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{' '.join(text.split())}{pad}{ticks}"


def fence(text: str, language: str = "") -> str:
    """A fenced code block that no backtick run in `text` can close early."""
    ticks = "`" * max(3, longest_run(text, "`") + 1)
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}"


def longest_run(text: str, char: str) -> int:
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)


def text_bar(score: float, max_score: float, cells: int = 10) -> str:
    """A score as a bar of characters, with its percentage: `█████░░░░░ 50%`."""
    fraction = share(score, max_score)
    full = round(fraction * cells)
    return f"`{'█' * full}{'░' * (cells - full)}` {percent(fraction)}"
