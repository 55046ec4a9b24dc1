"""`python -m grader compare A B [--html PATH]`: two reports side by side, check by check.

For a hiring team asking why a score changed: the same submission graded twice (another seed,
profile or machine) or two candidates. A and B are `report.json` files, or folders holding one.
The terminal gets the provenance of each (submission and file hashes, profile, seed, which kit
made it, the kit's environment), a warning when the two were made by different kits, the total and
each part's score with the change, every check whose status or points differ with both messages
shortened, then the timings' ratios, A's and B's. `--html` writes the same
as one self-contained page. Exit status 2, with a message, when a report is missing or invalid.
Both are in `--lang`, by default report A's language: the kit's words through `i18n.tr`, the
checks' messages and the timings' names from their ids (`messages.py`).
A report's strings may carry a candidate's text: `load` cleans and bounds them (`model.bounded`)
and the paths given are cleaned where shown, so no terminal escape or lone surrogate gets out.
"""

import argparse
import json
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from grader.report.formats import kit_label, points
from grader.report.i18n import LANGUAGES, has, language, profile_name, tr
from grader.report.messages import said_in, text_in
from grader.report.model import bounded
from grader.report.render import render
from grader.said import message_of, said
from grader.text import clean

MESSAGE_CHARS = 160  # of a check's message, on one line
ENVIRONMENT_KEYS = ("device", "python", "platform", "torch", "triton", "hypothesis", "pytest")
STATUSES = ("passed", "failed", "error", "skipped")  # a check's, each a word of `i18n`


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
            said(
                "{file} does not exist: give a report.json or the report folder holding one",
                file=file,
            )
        ) from None
    except (OSError, ValueError) as error:
        unread = said("{file} is not a readable JSON report: {error}", file=file, error=error)
        raise ReportError(unread) from None
    parts = report.get("parts") if isinstance(report, dict) else None
    if not isinstance(parts, dict) or not all(
        isinstance(part, dict) and isinstance(part.get("checks"), list) for part in parts.values()
    ):
        raise ReportError(
            said("{file} is not a grade report: it has no parts with checks", file=file)
        )
    for key in ("score", "max_score"):
        if not isinstance(report.get(key), int | float):
            raise ReportError(
                said("{file} is not a grade report: it has no {key}", file=file, key=key)
            )
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


def part_rows(a: dict, b: dict, lang: str = "en") -> list[tuple[str, str, str, str]]:
    """(part, A's score, B's score, B minus A) for each part of either report, then the total."""
    rows = []
    for part_id in [*a["parts"], *(p for p in b["parts"] if p not in a["parts"])]:
        one, two = a["parts"].get(part_id), b["parts"].get(part_id)
        rows.append((part_id, score_of(one, lang), score_of(two, lang), delta(one, two)))
    rows.append((tr(lang, "compare_total"), score_of(a, lang), score_of(b, lang), delta(a, b)))
    return rows


def score_of(scored: dict | None, lang: str = "en") -> str:
    if scored is None:
        return tr(lang, "compare_absent")
    if "checks" in scored and not scored["checks"]:
        return tr(lang, "not_graded")
    return f"{points(scored['score'])} / {points(scored['max_score'])}"


def delta(one: dict | None, two: dict | None) -> str:
    if one is None or two is None:
        return ""
    change = round(two["score"] - one["score"], 2)
    return f"{change:+g}" if change else "="


def shortened(text: str) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= MESSAGE_CHARS else flat[: MESSAGE_CHARS - 1] + "…"


def check_line(check: dict | None, lang: str = "en") -> str:
    """A check's status, points and message, on one line, in `lang`."""
    if check is None:
        return tr(lang, "compare_absent")
    status = check.get("status")
    line = tr(
        lang,
        "compare_check_line",
        status=tr(lang, status) if status in STATUSES else status,
        points=points(check.get("points", 0)),
        max_points=points(check.get("max_points", 0)),
    )
    message = shortened(said_in(lang, check, "message") or "")
    return tr(lang, "compare_check_message", line=line, message=message) if message else line


def provenance(side: Side, lang: str = "en") -> str:
    """Which submission, when, how: name, profile, seed, device, and which kit made the report."""
    report, env = side.report, side.report.get("environment", {})
    seed = env.get("seed")
    return tr(
        lang,
        "compare_provenance",
        name=report.get("submission", {}).get("name", "?"),
        started_at=report.get("started_at", "?"),
        profile=profile_name(lang, env.get("profile", "?")),
        seed=tr(lang, "compare_no_seed") if seed is None else tr(lang, "compare_seed", seed=seed),
        device=env.get("device", "?"),
        kit=kit_label(report, lang),
    )


def kit_warning(a: dict, b: dict, lang: str = "en") -> str | None:
    """Why the two scores are not alike when A and B were made by different kits, as a
    sentence; None when by the same one."""
    if kit_label(a) == kit_label(b):
        return None
    return tr(lang, "compare_kit_warning", a=kit_label(a, lang), b=kit_label(b, lang))


def file_differences(a: dict, b: dict, lang: str = "en") -> str:
    """Whether the submissions' files are the same, by sha256; which differ if not."""
    files_a = a.get("submission", {}).get("files", {})
    files_b = b.get("submission", {}).get("files", {})
    if files_a == files_b:
        return tr(lang, "compare_same_files")
    absent = tr(lang, "compare_absent")
    changes = [
        tr(lang, "compare_file_differs", name=name, a=(one or absent)[:12], b=(two or absent)[:12])
        for name in sorted(set(files_a) | set(files_b))
        if (one := files_a.get(name)) != (two := files_b.get(name))
    ]
    return tr(lang, "compare_files_differ", files=tr(lang, "compare_file_separator").join(changes))


def environment_differences(a: dict, b: dict, lang: str = "en") -> list[str]:
    """Each value of the kit's environment that differs, A's and B's, named in `lang`."""
    env_a, env_b = a.get("environment", {}), b.get("environment", {})
    differing = [key for key in ENVIRONMENT_KEYS if env_a.get(key) != env_b.get(key)]
    return [
        tr(
            lang,
            "compare_env_differs",
            name=environment_name(key, lang),
            a=env_a.get(key),
            b=env_b.get(key),
        )
        for key in differing
    ]


def listed(items: list[str], lang: str) -> str:
    """`items` on one line, between them `i18n`'s list separator in `lang` ("; " in English)."""
    return tr(lang, "list_separator").join(items)


def environment_name(key: str, lang: str) -> str:
    """An environment value's name in `lang` ("device"); a package's (torch) as it is."""
    name = f"compare_env_{key}"
    return tr(lang, name) if has(lang, name) else key


def benchmark_rows(a: dict, b: dict, lang: str = "en") -> list[tuple[str, str, str]]:
    """(benchmark, A's ratio, B's ratio) for each timing of either report, its name in `lang`."""
    ratios_a = {row["name"]: row["ratio"] for row in a.get("benchmarks", [])}
    ratios_b = {row["name"]: row["ratio"] for row in b.get("benchmarks", [])}
    shown = {row["name"]: said_in(lang, row, "name")
             for row in [*b.get("benchmarks", []), *a.get("benchmarks", [])]}  # fmt: skip
    names = [*ratios_a, *(name for name in ratios_b if name not in ratios_a)]
    return [(shown[name], ratio(ratios_a.get(name)), ratio(ratios_b.get(name))) for name in names]


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


# -- the terminal -------------------------------------------------------------------------------


def render_text(a: Side, b: Side, lang: str = "en") -> str:
    env = environment_differences(a.report, b.report, lang)
    warning = kit_warning(a.report, b.report, lang)
    same = tr(lang, "compare_same")
    lines = [
        tr(lang, "compare_heading_text"),
        f"  A  {a.path}: {provenance(a, lang)}",
        f"  B  {b.path}: {provenance(b, lang)}",
        *([f"  {tr(lang, 'warning', message=warning)}"] if warning else []),
        f"  {tr(lang, 'compare_submission', files=file_differences(a.report, b.report, lang))}",
        f"  {tr(lang, 'compare_environment', differences=listed(env, lang) or same)}",
        "",
        f"  {padded(tr(lang, 'compare_part'), -12)} {padded('A', 15)} {padded('B', 15)} "
        f"{padded(tr(lang, 'compare_change'), 8)}",
    ]
    lines += [
        f"  {padded(p, -12)} {padded(one, 15)} {padded(two, 15)} {padded(d, 8)}"
        for p, one, two, d in part_rows(a.report, b.report, lang)
    ]
    changes = changed_checks(a.report, b.report)
    total = len(checks_of(a.report) | checks_of(b.report))
    lines += ["", tr(lang, "compare_checks_changed", count=len(changes), total=total)]
    for change in changes:
        lines += [
            f"  {change.id}",
            f"    A  {check_line(change.a, lang)}",
            f"    B  {check_line(change.b, lang)}",
        ]
    rows = benchmark_rows(a.report, b.report, lang)
    if rows:
        lines += ["", tr(lang, "compare_timings")]
        lines += [f"  {'A':>8} {'B':>8}  {tr(lang, 'compare_benchmark')}"]
        lines += [f"  {one:>8} {two:>8}  {name}" for name, one, two in rows]
    return "\n".join(lines) + "\n"


def padded(text: str, width: int) -> str:
    """`text` right-aligned in `width` terminal columns, left-aligned for a negative width; a
    wide (Chinese) character takes two."""
    room = " " * max(abs(width) - columns(text), 0)
    return text + room if width < 0 else room + text


def columns(text: str) -> int:
    """How many terminal columns `text` takes: two for each wide character."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


# -- the page -----------------------------------------------------------------------------------


def render_html(a: Side, b: Side, lang: str = "en") -> str:
    """The comparison as one page (`templates/compare.html`): the same as the terminal's."""
    env = environment_differences(a.report, b.report, lang)
    changes = changed_checks(a.report, b.report)
    return render(
        "compare.html",
        lang=lang,
        sides=[("A", a.path, provenance(a, lang)), ("B", b.path, provenance(b, lang))],
        warning=kit_warning(a.report, b.report, lang),
        files=file_differences(a.report, b.report, lang),
        environment=listed(env, lang) or tr(lang, "compare_same"),
        parts=part_rows(a.report, b.report, lang),
        changes=[(c.id, check_line(c.a, lang), check_line(c.b, lang)) for c in changes],
        timings=benchmark_rows(a.report, b.report, lang),
    )


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(
        prog="python -m grader compare",
        description="Two grade reports side by side: scores, the checks that changed, timings.",
    )
    cli.add_argument("a", type=Path, help="a report.json, or a report folder holding one")
    cli.add_argument("b", type=Path, help="the other report")
    cli.add_argument("--html", type=Path, help="also write the comparison as a page here")
    cli.add_argument(
        "--lang", choices=LANGUAGES, help="the comparison's language (default: report A's)"
    )
    args = cli.parse_args(argv)
    try:
        a, b = load(args.a), load(args.b)
    except ReportError as error:
        why = text_in(args.lang or "en", message_of(error))
        print(clean(f"compare: {why}", None), file=sys.stderr)
        return 2
    lang = args.lang or language(a.report)
    text = render_text(a, b, lang)
    sys.stdout.write(clean(text, None))  # the paths as given: the reports are clean
    if args.html:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(clean(render_html(a, b, lang), None), encoding="utf-8")
        print(clean("\n" + tr(lang, "compare_page", path=args.html), None))
    return 0
