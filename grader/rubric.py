"""The rubric: each part's weight and any check's points that differ from the check's own."""

import argparse
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_RUBRIC = Path(__file__).parent / "rubric.toml"
PARTS = {
    "allocator": "Part 1: the KV-cache block allocator",
    "decode": "Part 2: prefill and decode-time block allocation",
    "gather": "Part 3: the block gather and the slot mapping",
    "kernel": "Part 4: the Triton paged-attention kernel",
    "scheduler": "Part 5: the continuous-batching scheduler",
    "sharing": "Part 6: prefix sharing and copy-on-write",
}


@dataclass(frozen=True)
class Rubric:
    weights: dict[str, float]
    points: dict[str, float] = field(default_factory=dict)


def load_rubric(path: Path = DEFAULT_RUBRIC) -> Rubric:
    """The rubric at `path`; ValueError naming the problem if a part or a number is wrong."""
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
