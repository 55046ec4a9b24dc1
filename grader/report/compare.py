"""`python -m grader compare A B [--html PATH]`: two reports side by side, check by check.

For a hiring team asking why a score changed: the same submission graded twice (another seed,
profile or machine) or two candidates. A and B are `report.json` files, or folders holding one.
The terminal gets the provenance of each (submission and file hashes, profile, seed, the kit's
environment), the total and each part's score with the change, every check whose status or
points differ with both messages shortened, then the timings' ratios. `--html` writes the same
as one self-contained page. Exit status 2, with a message, when a report is missing or invalid.
A report's strings may carry a candidate's text: `load` cleans and bounds them (`model.bounded`)
and the paths given are cleaned where shown, so no terminal escape or lone surrogate gets out.
"""

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.report.formats import points
from grader.report.model import bounded
from grader.report.render import render
from grader.text import clean

MESSAGE_CHARS = 160  # of a check's message, on one line
ENVIRONMENT_KEYS = ("device", "python", "platform", "torch", "triton", "hypothesis", "pytest")


class ReportError(ValueError):
    """A path that is not a readable report; the message says which and what to do."""


@dataclass(frozen=True)
class Side:
    """One report and where it was read from."""

    path: Path
    report: dict


@dataclass(frozen=True)
class CheckChange:
    id: str
    a: dict | None  # None: the check is not in that report
    b: dict | None


def load(path: Path) -> Side:
    """The report at `path` (a report.json, or a folder holding one), checked for its fields,
    its strings cleaned and bounded (`model.bounded`)."""
    return Side(report_file(path), bounded(read(path)))


def report_file(path: Path) -> Path:
    return path / "report.json" if path.is_dir() else path


def read(path: Path) -> dict:
    """The report at `path` as it was written, checked for the fields a reader needs; not
    bounded (what its seal covers). ReportError saying what is wrong."""
    file = report_file(path)
    try:
        report = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(
            f"{file} does not exist: give a report.json or the report folder holding one"
        ) from None
    except (OSError, ValueError) as error:
        raise ReportError(f"{file} is not a readable JSON report: {error}") from None
    parts = report.get("parts") if isinstance(report, dict) else None
    if not isinstance(parts, dict) or not all(
        isinstance(part, dict) and isinstance(part.get("checks"), list) for part in parts.values()
    ):
        raise ReportError(f"{file} is not a grade report: it has no parts with checks")
    for key in ("score", "max_score"):
        if not isinstance(report.get(key), int | float):
            raise ReportError(f"{file} is not a grade report: it has no {key}")
    return report


def checks_of(report: dict) -> dict[str, dict]:
    """Each check by its id (`part/name`), in the report's order."""
    return {
        check.get("id") or f"{part_id}/{check.get('name')}": check
        for part_id, part in report["parts"].items()
        for check in part["checks"]
    }


def changed_checks(a: dict, b: dict) -> list[CheckChange]:
    """The checks whose status or points differ, or that only one report has."""
    checks_a, checks_b = checks_of(a), checks_of(b)
    changes = []
    for check_id in [*checks_a, *(c for c in checks_b if c not in checks_a)]:
        one, two = checks_a.get(check_id), checks_b.get(check_id)
        if one is None or two is None or outcome(one) != outcome(two):
            changes.append(CheckChange(check_id, one, two))
    return changes


def outcome(check: dict) -> tuple:
    return check.get("status"), check.get("points"), check.get("max_points")


def part_rows(a: dict, b: dict) -> list[tuple[str, str, str, str]]:
    """(part, A's score, B's score, B minus A) for each part of either report, then the total."""
    rows = []
    for part_id in [*a["parts"], *(p for p in b["parts"] if p not in a["parts"])]:
        one, two = a["parts"].get(part_id), b["parts"].get(part_id)
        rows.append((part_id, score_of(one), score_of(two), delta(one, two)))
    rows.append(("total", score_of(a), score_of(b), delta(a, b)))
    return rows


def score_of(scored: dict | None) -> str:
    if scored is None:
        return "absent"
    if "checks" in scored and not scored["checks"]:
        return "not graded"
    return f"{points(scored['score'])} / {points(scored['max_score'])}"


def delta(one: dict | None, two: dict | None) -> str:
    if one is None or two is None:
        return ""
    change = round(two["score"] - one["score"], 2)
    return f"{change:+g}" if change else "="


def shortened(text: str) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"


def check_line(check: dict | None) -> str:
    """A check's status, points and message, on one line."""
    if check is None:
        return "absent"
    line = f"{check.get('status')}, {points(check.get('points', 0))} / "
    line += f"{points(check.get('max_points', 0))}"
    message = shortened(check.get("message", ""))
    return f"{line}: {message}" if message else line


def provenance(side: Side) -> str:
    """Which submission, when, how: name, profile, seed, device."""
    report, env = side.report, side.report.get("environment", {})
    seed = env.get("seed")
    return (
        f"{report.get('submission', {}).get('name', '?')}, graded {report.get('started_at', '?')}"
        f", {env.get('profile', '?')} profile, "
        + (f"seed {seed}" if seed is not None else "default examples")
        + f", on {env.get('device', '?')}"
    )


def file_differences(a: dict, b: dict) -> str:
    """Whether the submissions' files are the same, by sha256; which differ if not."""
    files_a = a.get("submission", {}).get("files", {})
    files_b = b.get("submission", {}).get("files", {})
    if files_a == files_b:
        return "the same files (sha256)"
    changes = []
    for name in sorted(set(files_a) | set(files_b)):
        one, two = files_a.get(name), files_b.get(name)
        if one != two:
            changes.append(f"{name} ({(one or 'absent')[:12]} vs {(two or 'absent')[:12]})")
    return "files differ: " + ", ".join(changes)


def environment_differences(a: dict, b: dict) -> list[str]:
    env_a, env_b = a.get("environment", {}), b.get("environment", {})
    return [
        f"{key}: {env_a.get(key)} vs {env_b.get(key)}"
        for key in ENVIRONMENT_KEYS
        if env_a.get(key) != env_b.get(key)
    ]


def benchmark_rows(a: dict, b: dict) -> list[tuple[str, str, str]]:
    """(benchmark, A's ratio, B's ratio) for each timing of either report."""
    ratios_a = {row["name"]: row["ratio"] for row in a.get("benchmarks", [])}
    ratios_b = {row["name"]: row["ratio"] for row in b.get("benchmarks", [])}
    names = [*ratios_a, *(name for name in ratios_b if name not in ratios_a)]
    return [(name, ratio(ratios_a.get(name)), ratio(ratios_b.get(name))) for name in names]


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


# -- the terminal -------------------------------------------------------------------------------


def render_text(a: Side, b: Side) -> str:
    env = environment_differences(a.report, b.report)
    lines = [
        "Comparing two grade reports",
        f"  A  {a.path}: {provenance(a)}",
        f"  B  {b.path}: {provenance(b)}",
        f"  submission: {file_differences(a.report, b.report)}",
        "  environment: " + ("; ".join(env) if env else "the same"),
        "",
        f"  {'part':<12} {'A':>15} {'B':>15} {'change':>8}",
    ]
    lines += [
        f"  {p:<12} {one:>15} {two:>15} {d:>8}" for p, one, two, d in part_rows(a.report, b.report)
    ]
    changes = changed_checks(a.report, b.report)
    total = len(checks_of(a.report) | checks_of(b.report))
    lines += ["", f"Checks that changed: {len(changes)} of {total}"]
    for change in changes:
        lines += [
            f"  {change.id}",
            f"    A  {check_line(change.a)}",
            f"    B  {check_line(change.b)}",
        ]
    rows = benchmark_rows(a.report, b.report)
    if rows:
        lines += ["", "Timings (candidate time / reference time; lower is faster)"]
        lines += [f"  {one:>8} {two:>8}  {name}" for name, one, two in rows]
    return "\n".join(lines) + "\n"


# -- the page -----------------------------------------------------------------------------------


def render_html(a: Side, b: Side) -> str:
    """The comparison as one page (`templates/compare.html`): the same as the terminal's."""
    env = environment_differences(a.report, b.report)
    changes = changed_checks(a.report, b.report)
    return render(
        "compare.html",
        sides=[("A", a.path, provenance(a)), ("B", b.path, provenance(b))],
        files=file_differences(a.report, b.report),
        environment="; ".join(env) if env else "the same",
        parts=part_rows(a.report, b.report),
        changes=[(c.id, check_line(c.a), check_line(c.b)) for c in changes],
        timings=benchmark_rows(a.report, b.report),
    )


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(
        prog="python -m grader compare",
        description="Two grade reports side by side: scores, the checks that changed, timings.",
    )
    cli.add_argument("a", type=Path, help="a report.json, or a report folder holding one")
    cli.add_argument("b", type=Path, help="the other report")
    cli.add_argument("--html", type=Path, help="also write the comparison as a page here")
    args = cli.parse_args(argv)
    try:
        a, b = load(args.a), load(args.b)
    except ReportError as error:
        print(clean(f"compare: {error}", None), file=sys.stderr)
        return 2
    sys.stdout.write(clean(render_text(a, b), None))  # the paths as given: the reports are clean
    if args.html:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(clean(render_html(a, b), None), encoding="utf-8")
        print(clean(f"\nPage: {args.html}", None))
    return 0
