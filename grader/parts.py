"""The parts of the exercise, as `parts.toml` lists them: the one place that names them.

`PARTS` maps each part's id to its `Part`, in the statement's order (part 1 first).
"""

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

MANIFEST = Path(__file__).with_name("parts.toml")


@dataclass(frozen=True)
class Part:
    """One part: what it asks, which files it grades, and how it is graded."""

    id: str
    title: str
    title_zh: str
    ask: str
    ask_zh: str
    files: tuple[str, ...]
    weight: float
    checks: tuple[str, ...]  # module names in grader/checks/, in the order they run
    # its checks' seconds on the answer key, by profile: what splits a grading's parts between
    # its two processes
    cost: Mapping[str, float] = field(hash=False)
    swapped: tuple[str, ...] = ()  # other parts' files, always the answer key's when graded
    alone: bool = False  # its worker holds its own files only
    regraded: tuple[str, ...] = ()  # its check modules graded again on the kit's allocator, where
    # the candidate's fails part 1 and they lost points
    engine: bool = False  # the engine check serves a trace through it

    def titled(self, lang: str) -> str:
        return self.title_zh if lang == "zh" else self.title

    def asks(self, lang: str) -> str:
        return self.ask_zh if lang == "zh" else self.ask


def load(path: Path = MANIFEST) -> dict[str, Part]:
    with path.open("rb") as file:
        entries = tomllib.load(file)["part"]
    parts = [Part(**{key: as_field(value) for key, value in entry.items()}) for entry in entries]
    return {part.id: part for part in parts}


def as_field(value: object) -> object:
    """A TOML value as a frozen `Part` holds it: lists become tuples, tables read-only
    mappings."""
    if isinstance(value, list):
        return tuple(value)
    return MappingProxyType(value) if isinstance(value, dict) else value


PARTS = load()
# Every file a submission holds, in the order the parts first name them.
SUBMISSION_FILES = tuple(dict.fromkeys(name for part in PARTS.values() for name in part.files))
ENGINE_PARTS = frozenset(part.id for part in PARTS.values() if part.engine)
