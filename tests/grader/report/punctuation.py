# ruff: noqa: RUF001, RUF002 -- Chinese text takes full-width punctuation, not ASCII's.
"""Finding ASCII punctuation in Chinese text: one style, the full-width marks `，。：；（）` around
Chinese words, and no space beside them.

A slip is ASCII `: ; , ( )` touching a Chinese character (a space between them allowed), or a
space between a full-width mark and the text beside it. Code keeps its own punctuation (`f(x)`
before a Chinese word is code, not a slip); a line's indentation and a Markdown table's `|` are
layout, not text.
"""

import re

HAN = "\u3400-\u9fff"
MARKS = "，。：；（）！？、"
SLIP = re.compile(
    rf"[{HAN}{MARKS}] ?[:;,()]"  # ASCII punctuation after Chinese
    rf"|[:;,(] ?[{HAN}]"  # ASCII punctuation before Chinese
    rf"|(?<=\S) [{MARKS}]"  # a space before a full-width mark
    rf"|[{MARKS}] (?=[^\s|])"  # a space after one
)


def slips(text: str) -> list[str]:
    """Each line of `text` with a slip of punctuation, as it is."""
    return [line for line in text.splitlines() if SLIP.search(line)]
