"""The rubric: each part's weight and any check's points that differ from the check's own.

The default rubric is the parts' weights in `grader/parts.toml`. A hiring team's own is a TOML
file (`--rubric my_rubric.toml`) that gives every part's weight and, optionally, a check's points
by its id from report.json, `part/check` (0 takes the check out of the score):

    [weights]
    allocator = 15
    decode = 15
    gather = 15
    kernel = 25
    scheduler = 10
    sharing = 10
    caching = 10

    [points]
    "allocator/freed_blocks_are_reused" = 0

    [severity]
    safety = 2.0

and, optionally, a factor by severity (`grader/severity.py`): each check of that severity counts
its points times the factor within its part, so that a part's safety failures cost more of its
weight (by default every factor is 1; a check in [points] has exactly the points given there).

A part id, a check id or a severity that does not exist is refused, with the valid ones: a
misspelt check would otherwise keep its points without a word. A part's checks are the `check_*`
functions of its check modules (`parts.toml`'s `checks`; `plugin.check_names`).
"""

import argparse
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.parts import PARTS
from grader.severity import SEVERITIES

TABLES = ("weights", "points", "severity")


@dataclass(frozen=True)
class Rubric:
    weights: dict[str, float]
    points: dict[str, float] = field(default_factory=dict)
    severity: dict[str, float] = field(default_factory=dict)  # a factor by severity; 1 if absent


DEFAULT = Rubric({part.id: float(part.weight) for part in PARTS.values()})


def load_rubric(path: Path | None) -> Rubric:
    """The rubric at `path` (`DEFAULT` for None); ValueError naming the problem if a table, a
    part, a check or a number is wrong."""
    if path is None:
        return DEFAULT
    with path.open("rb") as file:
        try:
            data = tomllib.load(file)
        except tomllib.TOMLDecodeError as error:
            raise ValueError(f"{path} is not valid TOML: {error}") from None
    stray = [key for key, value in data.items() if key not in TABLES or type(value) is not dict]
    if stray:
        raise ValueError(f"{path}: {stray[0]!r} is not a table [weights], [points] or "
                         "[severity], all that a rubric holds")  # fmt: skip
    weights, points = data.get("weights", {}), data.get("points", {})
    severity = data.get("severity", {})
    check_weights(path, weights)
    check_point_ids(path, points)
    unknown = [kind for kind in severity if kind not in SEVERITIES]
    if unknown:
        raise ValueError(f"{path}: [severity] names {unknown[0]!r}: the severities are "
                         f"{', '.join(SEVERITIES)}")  # fmt: skip
    for key, value in {**weights, **points, **severity}.items():
        if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{path}: {key} = {value!r} must be a finite number >= 0")
    return Rubric(
        {part: float(weights[part]) for part in PARTS},
        dict(points),
        {kind: float(factor) for kind, factor in severity.items()},
    )


def check_weights(path: Path, weights: dict) -> None:
    """ValueError unless [weights] names every part, and nothing else."""
    unknown = [part for part in weights if part not in PARTS]
    missing = [part for part in PARTS if part not in weights]
    if unknown or missing:
        wrong = [f"no part {', '.join(unknown)}"] if unknown else []
        wrong += [f"{', '.join(missing)} missing"] if missing else []
        raise ValueError(
            f"{path}: [weights] must give exactly the parts {', '.join(PARTS)} ({'; '.join(wrong)})"
        )


def check_point_ids(path: Path, points: dict) -> None:
    """ValueError unless each key of [points] is a check id, `part/check`, naming every one
    that is not with what it could be: the parts, or that part's checks."""
    if not points:
        return
    checks = part_checks()
    wrong = []
    for check_id in points:
        part, _, name = check_id.partition("/")
        if part not in checks:
            wrong.append(f"{check_id!r}: no part {part!r} (the parts: {', '.join(PARTS)})")
        elif name not in checks[part]:
            wrong.append(f"{check_id!r}: no such check (those of {part}: "
                         f"{', '.join(checks[part])})")  # fmt: skip
    if wrong:
        raise ValueError(
            f"{path}: [points] names checks that do not exist, give each as part/check: "
            + "; ".join(wrong)
        )


def part_checks() -> dict[str, list[str]]:
    """Each part's check names (its check modules' `check_*` functions, without the prefix)."""
    from grader.scoring.plugin import check_names  # pytest and the sandbox: only when needed

    return {
        part.id: sorted(name for module in part.checks for name in check_names(module))
        for part in PARTS.values()
    }


def parse_parts(text: str) -> tuple[str, ...]:
    """`--parts a,b`: the part ids, each once, in the order given; each must be one of `PARTS`."""
    parts = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [part for part in parts if part not in PARTS]
    if unknown or not parts:
        raise argparse.ArgumentTypeError(
            f"unknown part {', '.join(unknown) or '(none)'}: choose from {', '.join(PARTS)}"
        )
    return parts
