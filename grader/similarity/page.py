"""The side-by-side HTML page of one similar pair, matched lines highlighted.

The page is self-contained and inert: no script, no external URL, a Content-Security-Policy
that forbids both, and every candidate string (names, code) HTML-escaped by jinja2's
autoescape. A reference's code is not shipped: its side names the source and the matched lines.
"""

from pathlib import Path

from jinja2 import Environment

from grader.similarity.pairs import FileMatch, Pair, Span

TEMPLATE = Path(__file__).with_name("pair.html.j2").read_text(encoding="utf-8")

TEMPLATE_ENV = Environment(autoescape=True, keep_trailing_newline=True)


def numbered(source: bytes | None, spans: list[Span]) -> list[tuple[int, str, bool]]:
    """(number, text, matched) of each line of `source`."""
    if source is None:
        return []
    hit = {line for first, last in spans for line in range(first, last + 1)}
    lines = source.decode("utf-8", errors="replace").splitlines()
    return [(number, text, number in hit) for number, text in enumerate(lines, 1)]


def sides(
    pair: Pair, match: FileMatch
) -> tuple[list[tuple[int, str, bool]], list[tuple[int, str, bool]]]:
    return (
        numbered(pair.left_files.get(match.file), [left for left, _ in match.regions]),
        numbered(pair.right_files.get(match.file), [right for _, right in match.regions]),
    )


def render(pair: Pair) -> str:
    """The pair's page: one section per matching file, left and right side by side."""
    return TEMPLATE_ENV.from_string(TEMPLATE).render(
        pair=pair, sides=[sides(pair, m) for m in pair.files]
    )
