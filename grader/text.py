"""Text a submission wrote, made safe to show a person.

A candidate's exception messages, tracebacks, log tails and names reach the terminal, the reports
and the leaderboard. Before they do, `clean` bounds their length, removes control characters
(terminal escapes could redraw the screen: only newline and tab stay) and replaces lone
surrogates (which a strict UTF-8 stream refuses).
"""

import re

from grader.said import Said

MESSAGE_CHARS = 2000  # of one candidate-written message
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean(text: str, limit: int | None = MESSAGE_CHARS) -> str:
    """`text` without control characters (but newline and tab) or lone surrogates, cut to
    `limit` characters (None: no limit) with a note of how much was cut; a message of the kit's
    (`said.Said`) that needs neither stays itself, its id and parts with it."""
    if isinstance(text, Said) and (limit is None or len(text) <= limit) and _scrub(text) == text:
        return text
    text = str(text)
    if limit is None or len(text) <= limit:
        return _scrub(text)
    # Only what may be kept is cleaned, a piece at a time (removed characters leave room for the
    # next piece, each as long as all before it): a 100 MB message costs what a short one does.
    # The note counts what was left uncleaned as it came, control characters included.
    kept, end = "", 0
    while len(kept) <= limit and end < len(text):
        piece = max(limit + 1, end)
        kept += _scrub(text[end : end + piece])
        end += piece
    if len(kept) <= limit:
        return kept
    return f"{kept[:limit]}... [{len(kept) - limit + max(len(text) - end, 0)} more characters cut]"


def _scrub(text: str) -> str:
    """`text` without control characters but newline and tab, lone surrogates replaced."""
    return _SURROGATE.sub("\ufffd", _CONTROL.sub("", text))


def clean_all(value: object) -> object:
    """`value` (JSON-like: dicts, lists, strings) with every string and key cleaned, unbounded."""
    if isinstance(value, str):
        return clean(value, None)
    if isinstance(value, dict):
        return {clean(str(key), None): clean_all(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [clean_all(item) for item in value]
    return value
