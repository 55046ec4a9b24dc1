"""The side-by-side HTML page of one similar pair, matched lines highlighted, in the drive's
language.

Drawn like every page of the kit (`grader/report/templates/pair.html` on `base.html`): no
script, no external URL, the Content-Security-Policy, every candidate string (names, code)
autoescaped. A known implementation's code is not shipped: its side names, file by file, the
reference matched (its origin; the answer key's, its path in the kit) and the matched lines' runs.
"""

from grader.report.render import render
from grader.similarity.pairs import FileMatch, Pair, Span


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
    """The two sides of `match`'s file, numbered and marked (a known implementation's side is
    empty)."""
    return (
        numbered(pair.left_files.get(match.file), [left for left, _ in match.regions]),
        numbered(pair.right_files.get(match.file), [right for _, right in match.regions]),
    )


def pair_page(pair: Pair, lang: str = "en") -> str:
    """The pair's page, in `lang` (the drive's): one section per matching file, left and right
    side by side."""
    return render("pair.html", pair=pair, sides=[sides(pair, m) for m in pair.files], lang=lang)
