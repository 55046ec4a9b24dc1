"""The rubric: each part's weight and any check's points that differ from the check's own.

The default rubric is the parts' weights in `grader/parts.toml`. A hiring team's own is a TOML
file (`--rubric my_rubric.toml`) that gives every part's weight and, optionally, a check's points
by its id from report.json (0 takes the check out of the score):

    [weights]
    allocator = 15
    decode = 20
    gather = 15
    kernel = 30
    scheduler = 10
    sharing = 10

    [points]
    "allocator/freed_blocks_are_reused" = 0
"""

import argparse
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.parts import PARTS


@dataclass(frozen=True)
class Rubric:
    weights: dict[str, float]
    points: dict[str, float] = field(default_factory=dict)


DEFAULT = Rubric({part.id: float(part.weight) for part in PARTS.values()})


def load_rubric(path: Path | None) -> Rubric:
    """The rubric at `path` (`DEFAULT` for None); ValueError naming the problem if a part or a
    number is wrong."""
    if path is None:
        return DEFAULT
    with path.open("rb") as file:
        data = tomllib.load(file)
    weights = data.get("weights", {})
    if set(weights) != set(PARTS):
        raise ValueError(f"{path}: [weights] must give exactly the parts {', '.join(PARTS)}")
    points = data.get("points", {})
    for key, value in {**weights, **points}.items():
        if not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{path}: {key} = {value!r} must be a number >= 0")
    return Rubric({part: float(weights[part]) for part in PARTS}, dict(points))


def parse_parts(text: str) -> tuple[str, ...]:
    """`--parts a,b`: the part ids, in the order given; each must be one of `PARTS`."""
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(
            f"unknown part {', '.join(unknown) or '(none)'}: choose from {', '.join(PARTS)}"
        )
    return parts
