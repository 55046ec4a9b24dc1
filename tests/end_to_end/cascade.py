"""How far a bug reaches: the points a mutant of `test_buggy.py` loses outside its own part,
against those it loses in its own part.

A grading's parts table is meant to send a reviewer to the part a bug is in, so a mutant should
cost points in its own part and (almost) nowhere else. A mutant's cascade is

    the points lost outside the mutant's part
    -----------------------------------------
    the points lost in the mutant's part

where a part's loss is its `max_score - score` in the mutant's `report.json`. `CASCADE_LIMIT` is
what the kit promises for every mutant (`test_buggy.test_bugs_stay_in_their_part` asserts it);
the table also gives the figure summed over the mutants.

    .venv/bin/python -m tests.end_to_end.cascade [--out DIR] [--only ID,ID] [--from-reports]

grades every mutant (or those named) on the CPU parts it reaches (`reach.reached`) with the quick
profile, two at a time, writes each report to DIR/<id>-report/report.json, and prints each
mutant's losses and the figure; `--from-reports` recomputes it from reports already in DIR.
"""

import argparse
import json
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CASCADE_LIMIT = 0.10


@dataclass(frozen=True)
class Losses:
    """One mutant's points lost in its own part and, part by part, outside it."""

    mutant: str
    part: str
    own: float
    outside: dict[str, float]

    @property
    def outside_total(self) -> float:
        return sum(self.outside.values())

    @property
    def cascade(self) -> float:
        """Points lost outside the part over points lost in it (infinite where only outside)."""
        if self.own:
            return self.outside_total / self.own
        return math.inf if self.outside_total else 0.0


def losses(mutant: str, part: str, report: Mapping[str, Any]) -> Losses:
    """The points `report` (a `report.json`) loses in `part` and in each other part it graded."""
    lost = {
        part_id: round(graded["max_score"] - graded["score"], 2)
        for part_id, graded in report["parts"].items()
    }
    outside = {part_id: points for part_id, points in lost.items() if part_id != part and points}
    return Losses(mutant, part, lost.get(part, 0.0), outside)


def cascade(rows: Iterable[Losses]) -> float:
    """Points lost outside the mutants' parts over points lost in them, summed over the mutants
    (0 when none are lost)."""
    rows = list(rows)
    own = sum(row.own for row in rows)
    return sum(row.outside_total for row in rows) / own if own else 0.0


def table(rows: Iterable[Losses]) -> str:
    """Each mutant's losses and cascade, the worst first, then the worst and the summed figure."""
    rows = sorted(rows, key=lambda row: (-row.cascade, -row.outside_total, row.mutant))
    lines = [f"{'mutant':<48} {'part':<10} {'own':>6} {'outside':>8} {'cascade':>8}  where"]
    for row in rows:
        where = ", ".join(f"{part} {points:g}" for part, points in sorted(row.outside.items()))
        lines.append(
            f"{row.mutant:<48} {row.part:<10} {row.own:>6.2f} {row.outside_total:>8.2f} "
            f"{row.cascade:>8.1%}  {where}"
        )
    own = sum(row.own for row in rows)
    outside = sum(row.outside_total for row in rows)
    worst = max((row.cascade for row in rows), default=0.0)
    lines.append(
        f"total: {own:.2f} lost in the mutants' parts, {outside:.2f} outside: summed cascade "
        f"{cascade(rows):.1%}, worst {worst:.1%} (limit {CASCADE_LIMIT:.0%} for each mutant)"
    )
    return "\n".join(lines)


def report_path(out: Path, mutant: str) -> Path:
    return out / f"{mutant}-report" / "report.json"


def grade_all(out: Path, mutants: list) -> None:
    """Grade each mutant on the parts it reaches (quick profile), two at a time, into `out`."""
    from tests.grading import build_submission, concurrently, grade

    def job(mutant):
        folder = build_submission(out / mutant.id, edits=mutant.edits)
        return lambda: grade(folder, *mutant.options, "--profile", "quick")

    futures = concurrently({mutant.id: job(mutant) for mutant in mutants})
    for mutant_id, future in futures.items():
        future.result()
        print(f"graded {mutant_id}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    from tests.end_to_end.test_buggy import MUTANTS

    cli = argparse.ArgumentParser(
        prog="python -m tests.end_to_end.cascade", description=__doc__.split(".")[0]
    )
    cli.add_argument("--out", type=Path, default=Path("reports/cascade"))
    cli.add_argument("--only", help="comma-separated mutant ids (default: every mutant)")
    cli.add_argument("--from-reports", action="store_true", help="grade nothing, read DIR")
    args = cli.parse_args(argv)
    chosen = set(args.only.split(",")) if args.only else {mutant.id for mutant in MUTANTS}
    mutants = [mutant for mutant in MUTANTS if mutant.id in chosen]
    if not args.from_reports:
        grade_all(args.out.resolve(), mutants)
    rows = [
        losses(m.id, m.part, json.loads(report_path(args.out, m.id).read_text())) for m in mutants
    ]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
