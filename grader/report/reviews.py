"""The reviewer's notes on a drive (`reviews.toml`): read and checked, never scored.

grade-all reads `reviews.toml` beside the drive's submissions (or `--reviews FILE`; `--merge`
only with `--reviews`), and the leaderboard shows each note beside its row and each flag's
verdict (`leaderboard.py`). No note changes a score, a rank or any other column. The file:

    [submissions."alice"]            # a submission's name as the leaderboard gives it
    note = "Strong kernel; ask about GQA."
    [[submissions."alice".flags]]    # an integrity flag or a similar pair of that submission
    about = "similar: bob"           # "similar: <other name>", or the start of a flag's text
    verdict = "dismissed"            # "confirmed" or "dismissed"
    reason = "pair programming was allowed in round 1"

`note` and `flags` may each be left out; a flag needs all three keys. A file that is not TOML,
or not this shape, is refused with the line at fault (`ReviewsError`) before anything is graded.
"""

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from grader.text import clean

VERDICTS = ("confirmed", "dismissed")
SUBMISSION_KEYS = ("note", "flags")
FLAG_KEYS = ("about", "verdict", "reason")
NAME_CHARS = 200  # of a name or a key the file writes, in a message


class ReviewsError(ValueError):
    """The reviewer's file cannot be read or is not of the shape above: the file and the line."""


@dataclass(frozen=True)
class Flag:
    """The reviewer's verdict on an integrity flag or a similar pair, and why."""

    about: str
    verdict: str
    reason: str


@dataclass(frozen=True)
class Review:
    """What the reviewer says of one submission."""

    note: str
    flags: tuple[Flag, ...]


def load_reviews(path: Path | None) -> dict[str, Review]:
    """The reviews in `path`, by submission name (none without a file); ReviewsError where it
    cannot be read, is not TOML, or is not of the module's shape."""
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ReviewsError(f"{path}: cannot be read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ReviewsError(f"{path}: not UTF-8 text: {error.reason}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:  # its message says "(at line N, column M)"
        raise ReviewsError(f"{path}: not TOML: {error}") from None
    return Reader(path, text).reviews(data)


class Reader:
    """Checks the parsed file, saying where in its `text` each fault is (`fault`)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def reviews(self, data: dict) -> dict[str, Review]:
        """The file's reviews by submission name, from its parsed `data`."""
        self.unknown(data, ("submissions",), (), "the file")
        submissions = data.get("submissions", {})
        if not isinstance(submissions, dict):
            raise self.fault('submissions must be tables: [submissions."NAME"]', "submissions")
        return {name: self.review(name, value) for name, value in submissions.items()}

    def review(self, name: str, value: object) -> Review:
        """The review of the submission `name`, from its table."""
        where = ("submissions", name)
        said = f'submissions."{clean(name, NAME_CHARS)}"'
        if not isinstance(value, dict):
            raise self.fault(f"{said} must be a table of note and flags", *where)
        self.unknown(value, SUBMISSION_KEYS, where, said)
        note = value.get("note", "")
        if not isinstance(note, str):
            raise self.fault(f"note must be a string (in quotes), not {shown(note)}",
                             *where, "note")  # fmt: skip
        flags = value.get("flags", [])
        if not (isinstance(flags, list) and all(isinstance(flag, dict) for flag in flags)):
            raise self.fault(f"flags must be [[{said}.flags]] tables", *where, "flags")
        return Review(note, tuple(self.flag(flag, where, n) for n, flag in enumerate(flags)))

    def flag(self, value: dict, where: tuple[str, ...], index: int) -> Flag:
        """The `index`-th flag of the submission's table at `where`."""
        at = (*where, ("flags", index))
        said = f'flag {index + 1} of submissions."{clean(where[1], NAME_CHARS)}"'
        self.unknown(value, FLAG_KEYS, at, said)
        for key in FLAG_KEYS:
            if key not in value:
                raise self.fault(f"{said} has no {key}: a flag takes {' and '.join(FLAG_KEYS)}",
                                 *at)  # fmt: skip
            if not isinstance(value[key], str) or not value[key].strip():
                raise self.fault(f"{key} must be a string (in quotes) that says it, not "
                                 f"{shown(value[key])}", *at, key)  # fmt: skip
        if value["verdict"] not in VERDICTS:
            raise self.fault(f'verdict must be "confirmed" or "dismissed", not '
                             f"{shown(value['verdict'])}", *at, "verdict")  # fmt: skip
        return Flag(value["about"], value["verdict"], value["reason"])

    def unknown(self, table: dict, known: tuple[str, ...], where: tuple, said: str) -> None:
        """ReviewsError at the first key of `table` not in `known`."""
        for key in table:
            if key not in known:
                raise self.fault(f'{said} has an unknown key "{clean(key, NAME_CHARS)}": it takes '
                                 f"{' and '.join(known)}", *where, key)  # fmt: skip

    def fault(self, what: str, *keys: str | tuple[str, int]) -> ReviewsError:
        """`what` is wrong at the line of `keys` (`line_of`), as a ReviewsError to raise."""
        return ReviewsError(f"{self.path}, line {self.line_of(keys)}: {what}")

    def line_of(self, keys: tuple[str | tuple[str, int], ...]) -> int:
        """The line where the file writes the last of `keys`, each found from the line of the
        one before (a `(key, n)` the n-th time after it, counting from 0: the n-th flag); where
        one is not found, the line of the last that is (line 1 with none)."""
        found, start, owner = 1, 0, ""
        for key in keys:
            nth = isinstance(key, tuple)  # the n-th table of a kind, of its owner's
            name, skip = key if nth else (key, 0)
            pattern = re.compile(rf"(?<![\w-])([\"']?){re.escape(name)}\1\s*[=.\]]")
            hits = [
                n
                for n in range(start, len(self.lines))
                if pattern.search(self.lines[n]) and (not nth or owner in self.lines[n])
            ]
            owner = name
            if len(hits) <= skip:
                break
            start = hits[skip]
            found = start + 1
        return found


def shown(value: object) -> str:
    """A value of the file as TOML writes it, bounded: `"maybe"`, `3`."""
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
    return clean(text, NAME_CHARS)
