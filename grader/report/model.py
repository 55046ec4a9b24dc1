"""The grade's files: the report itself, two pages for people, and two formats for CI and LMS tools.

`write_all` writes, into one folder and always all five:
- `report.json`: the report dict as it is (the contract's report, see exercises/README.md);
- `report.md` and `report.html` (`report_html.py`): the same for a person to read;
- `results.json`: Gradescope's autograder format;
- `junit.xml`: JUnit XML, one test suite per part.

Messages carry the candidate's exception text and file names: `bounded` first cleans every
string (`text.py`: no terminal escapes, no lone surrogates) and cuts it to a bounded length, then
each format escapes them its own way.
"""

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html import escape
from pathlib import Path

from grader.report.html import (
    duration,
    graded,
    how_it_ran,
    origin,
    part_score,
    points,
    render_html,
    scheduling_intro,
    scheduling_runs,
    share,
    shown,
    skipped_label,
    steps_taken,
    tally,
    total_ungraded,
    ungraded_notes,
    verdict,
)
from grader.report.i18n import language, part_asks, part_title, tr
from grader.text import MESSAGE_CHARS, clean

# The most characters of one string in the files (`bounded`): of a message, which the candidate's
# exception text reaches (some room over `MESSAGE_CHARS`, which it was cut to where it entered);
# of any other string, a counterexample, a traceback or an entry of `errors` the longest; of a key.
LIMITS = {"message": 2 * MESSAGE_CHARS}
LONG_CHARS = 20_000
KEY_CHARS = 1_000
NOTE_CHARS = 100  # over a bound, a string is left whole: room for the note of a cut made before


def write_all(report: dict, out: Path) -> None:
    """Create `out` and write the five report files into it, `report.json` first, all from
    the report `bounded`: clean text of a bounded length."""
    report = bounded(report)
    writers: dict[str, Callable[[dict], str]] = {
        "report.json": report_json,
        "report.md": render_markdown,
        "report.html": render_html,
        "results.json": gradescope_json,
        "junit.xml": junit_xml,
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, render in writers.items():
        (out / name).write_text(render(report), encoding="utf-8", errors="replace")


def bounded(value: object, limit: int = LONG_CHARS) -> object:
    """A copy of `value` (a report, or any JSON-like part of one) cleaned as `text.clean_all`
    cleans it, each string also cut: a `message` (a check's, an integrity flag's, the engine
    check's) to `LIMITS["message"]` characters, any other string to `LONG_CHARS`, a key to
    `KEY_CHARS`. Cut as it is cleaned: a candidate's 100 MB string costs no more than a short one.
    A string up to `NOTE_CHARS` over its bound stays whole: `bounded` of a bounded report (one read
    back, as `compare.load` does) is the same report, and no string gets two notes.
    """
    if isinstance(value, str):
        return clean(value, None if len(value) <= limit + NOTE_CHARS else limit)
    if isinstance(value, dict):
        return {
            clean(str(key), KEY_CHARS): bounded(item, LIMITS.get(key, LONG_CHARS))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [bounded(item, limit) for item in value]
    return value


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


# -- report.md --------------------------------------------------------------------------------


def render_markdown(report: dict) -> str:
    """The page's content as Markdown, in the same order: score, grader errors, integrity
    flags, parts, failures, timings, scheduling, the engine check, provenance."""
    lang = language(report)
    sections = [
        md_header(report, lang),
        md_errors(report["errors"], lang),
        md_integrity(report["integrity"], lang),
        md_parts_table(report, lang),
        *(md_part(part_id, part, lang) for part_id, part in report["parts"].items()),
        md_benchmarks(report["benchmarks"], lang),
        md_scheduling(report.get("sections", {}).get("scheduling"), lang),
        md_simulation(report.get("simulation"), lang),
        md_integration(report.get("integration"), lang),
        md_list(tr(lang, "ignored_heading"), [code_span(name) for name in report["ignored_files"]]),
        md_environment(report, lang),
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def md_header(report: dict, lang: str) -> str:
    """The title, the total with its bar and the points not graded here, how the grade ran."""
    score = f"{points(report['score'])} / {points(report['max_score'])}"
    ungraded = md_ungraded(total_ungraded(report), lang)
    return (
        f"# {tr(lang, 'title')}: {plain(report['submission']['name'])}\n\n"
        f"**{tr(lang, 'total')}: {score}** {text_bar(report['score'], report['max_score'])}"
        f"{f' ({ungraded})' if ungraded else ''}"
        f"\n\n{plain(how_it_ran(report, lang))}\n\n{tr(lang, 'intro')}"
    )


def md_ungraded(part: dict, lang: str) -> str:
    """A part's (or the total's) points not graded here, as one plain phrase; "" for none."""
    return plain("; ".join(ungraded_notes(part, lang)))


def text_bar(score: float, max_score: float, cells: int = 10) -> str:
    """A score as a bar of characters, with its percentage: `█████░░░░░ 50%`."""
    fraction = share(score, max_score)
    full = round(fraction * cells)
    return f"`{'█' * full}{'░' * (cells - full)}` {fraction:.0%}"


def md_errors(messages: list[str], lang: str) -> str:
    """The grader's own failures, before anything else: the score may be incomplete."""
    if not messages:
        return ""
    blocks = "\n\n".join(fence(message) for message in messages)
    return f"## {tr(lang, 'errors_heading')}\n\n{tr(lang, 'errors_intro')}\n\n{blocks}"


def md_integrity(flags: list[dict], lang: str) -> str:
    """The integrity flags, near the top when there are any."""
    items = [f"{plain(origin(flag))}: {plain(flag['message'])}" for flag in flags]
    if not items:
        return ""
    heading = f"{tr(lang, 'integrity_heading')} ({len(items)})"
    return md_list(heading, items, intro=tr(lang, "integrity_intro"))


def md_parts_table(report: dict, lang: str) -> str:
    rows = []
    for part_id, part in report["parts"].items():
        title = plain(part_title(lang, part_id, part))
        if graded(part):
            bar = text_bar(part["score"], part["max_score"])
            notes = [plain(note) for note in (part.get("note"), part.get("provisional")) if note]
            ungraded = [md_ungraded(part, lang)] if ungraded_notes(part, lang) else []
            checks = "; ".join([plain(tally(part, lang)), *ungraded, *notes])
        else:
            bar, checks = "", plain(tally(part, lang))
        rows.append(
            f"| {title} | {plain(part_asks(lang, part_id))} | {part_score(part)} | {bar} | "
            f"{checks} |"
        )
    total = f"{points(report['score'])} / {points(report['max_score'])}"
    rows.append(
        f"| **{tr(lang, 'total')}** | | **{total}** | "
        f"{text_bar(report['score'], report['max_score'])} | "
        f"{md_ungraded(total_ungraded(report), lang)} |"
    )
    head = (
        f"| {tr(lang, 'part')} | {tr(lang, 'asks')} | {tr(lang, 'score')} | | "
        f"{tr(lang, 'checks')} |"
    )
    return "\n".join([f"## {tr(lang, 'parts_heading')}", "", head, "| --- " * 5 + "|", *rows])


def md_part(part_id: str, part: dict, lang: str) -> str:
    """A part: what it asks and its notes, the checks that did not pass in full, each with all
    its details, then the skipped and passed ones by name."""
    title = plain(part_title(lang, part_id, part))
    heading = f"## {title} ({part_score(part)})" if graded(part) else f"## {title}"
    lines = [heading, f"*{plain(part_asks(lang, part_id))}*"]
    if not graded(part):
        return "\n\n".join([*lines, plain(tally(part, lang))])
    if ungraded_notes(part, lang):
        lines.append(f"*{md_ungraded(part, lang)}*")
    if part.get("note"):
        lines.append(plain(part["note"]))
    if part.get("provisional"):
        lines.append(f"**{tr(lang, 'provisional')}:** {plain(part['provisional'])}")
    checks = part["checks"]
    lines += [md_check(check, lang) for check in checks if check["status"] in ("failed", "error")]
    skipped = [
        f"- {code_span(check['name'])} {plain(skipped_label(check, lang))}"
        for check in checks
        if check["status"] == "skipped"
    ]
    if skipped:
        lines.append("\n".join([tr(lang, "skipped_list"), "", *skipped]))
    passed = [code_span(check["name"]) for check in checks if check["status"] == "passed"]
    if passed:
        lines.append(f"{tr(lang, 'passed_list')} {', '.join(passed)}")
    return "\n\n".join(lines)


def md_check(check: dict, lang: str) -> str:
    score = f"{points(check['points'])} / {points(check['max_points'])} {tr(lang, 'points')}"
    lines = [
        f"### {code_span(check['name'])}: {tr(lang, check['status'])}, {score}",
        fence(check["message"]),
    ]
    labelled = (
        (tr(lang, "counterexample"), check["counterexample"], "python"),
        (tr(lang, "hypothesis"), check["hypothesis"], ""),
        (tr(lang, "traceback"), check["traceback"], ""),
    )
    lines += [f"{label}\n\n{fence(value, code)}" for label, value, code in labelled if value]
    return "\n\n".join(lines)


def md_benchmarks(rows: list[dict], lang: str) -> str:
    if not rows:
        return ""
    columns = ("benchmark", "part", "candidate", "reference", "ratio", "verdict")
    lines = [
        f"## {tr(lang, 'timings_heading')}",
        "",
        tr(lang, "timings_intro"),
        "",
        "| " + " | ".join(tr(lang, column) for column in columns) + " |",
        "| --- " * len(columns) + "|",
    ]
    lines += [
        f"| {plain(row['name'])} | {row['part']} | {duration(row['candidate_seconds'])} | "
        f"{duration(row['reference_seconds'])} | {row['ratio']:.2f}x | {verdict(row, lang)} |"
        for row in rows
    ]
    return "\n".join(lines)


def md_scheduling(section: dict | None, lang: str) -> str:
    """The scheduling comparison's figures (the page plots them)."""
    if not section:
        return ""
    intro = scheduling_intro(section, lang)
    runs = scheduling_runs(section, lang)
    items = [
        f"{steps_taken(name, counts, lang)}: `{' '.join(map(str, counts))}`"
        for name, counts in runs.items()
    ]
    if section.get("drained") is False:
        items.append(tr(lang, "not_drained"))
    return md_list(tr(lang, "scheduling_heading"), items, intro=intro)


def md_simulation(figures: dict | None, lang: str) -> str:
    """The kit's simulation: its headline and table (the page also plots it)."""
    if not figures:
        return ""
    header, *rows = figures["rows"]
    lines = [
        f"## {tr(lang, 'simulation_heading')}",
        "",
        tr(lang, "simulation_intro"),
        "",
        plain(figures["headline"]),
        "",
        "| " + " | ".join(plain(cell) for cell in header) + " |",
        "| --- " * len(header) + "|",
    ]
    lines += ["| " + " | ".join(plain(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def md_integration(check: dict | None, lang: str) -> str:
    """The end-to-end engine check: status, message, figures."""
    if not check:
        return ""
    status = check.get("status", "skipped")
    shown_status = tr(lang, status) if status in ("passed", "failed", "skipped") else status
    items = [
        f"{plain(str(key))}: {plain(shown(value))}"
        for key, value in check.get("figures", {}).items()
    ]
    said = f"**{plain(shown_status)}**: {plain(check.get('message', ''))}"
    intro = f"{tr(lang, 'integration_intro')}\n\n{said}"
    if not items:
        return f"## {tr(lang, 'integration_heading')}\n\n{intro}"
    return md_list(tr(lang, "integration_heading"), items, intro=intro)


def md_list(title: str, items: list[str], intro: str = "") -> str:
    """A titled bullet list, after an optional paragraph; nothing at all when there are no items."""
    if not items:
        return ""
    head = [f"## {title}", "", *((intro, "") if intro else ())]
    return "\n".join([*head, *(f"- {item}" for item in items)])


def md_environment(report: dict, lang: str) -> str:
    """Where the grade ran, and the hashes of the files it graded."""
    env = [f"- {key}: {plain(shown(value))}" for key, value in report["environment"].items()]
    files = [
        f"- {code_span(name)}: `{digest}`" for name, digest in report["submission"]["files"].items()
    ]
    return "\n".join(
        [
            f"## {tr(lang, 'environment_heading')}",
            "",
            *env,
            "",
            f"## {tr(lang, 'submission_heading')} (sha256)",
            "",
            *files,
        ]
    )


def plain(text: str) -> str:
    """`text` safe in Markdown prose and table cells: one line, no raw HTML, no cell breaks."""
    return escape(" ".join(text.split()), quote=False).replace("|", "\\|")


def code_span(text: str) -> str:
    """Inline code that no backtick in `text` can close early (CommonMark's rule)."""
    ticks = "`" * (longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{' '.join(text.split())}{pad}{ticks}"


def fence(text: str, language: str = "") -> str:
    """A fenced code block that no backtick run in `text` can close early."""
    ticks = "`" * max(3, longest_run(text, "`") + 1)
    return f"{ticks}{language}\n{text.rstrip()}\n{ticks}"


def longest_run(text: str, char: str) -> int:
    return max((len(run) for run in re.findall(f"{re.escape(char)}+", text)), default=0)


# -- results.json (Gradescope) ----------------------------------------------------------------

# Gradescope knows only passed and failed; a skipped check gets no status and zero points of zero.
GRADESCOPE_STATUS = {"passed": "passed", "failed": "failed", "error": "failed"}


def gradescope_json(report: dict) -> str:
    results = {
        "score": report["score"],
        "execution_time": report["seconds"],
        "output": summary(report),
        "tests": [
            gradescope_test(check) for part in report["parts"].values() for check in part["checks"]
        ],
    }
    return json.dumps(results, indent=2) + "\n"


def gradescope_test(check: dict) -> dict:
    status = GRADESCOPE_STATUS.get(check["status"])
    test = {
        "name": check["id"],
        "score": check["points"] if status else 0,
        "max_score": check["max_points"] if status else 0,
        "output": "\n\n".join(text for text in (check["message"], check["counterexample"]) if text),
        "visibility": "visible",
    }
    if status:
        test["status"] = status
    return test


def summary(report: dict) -> str:
    """A few lines: the total, each part's score, and the grader's failures if any."""
    ungraded = "; ".join(ungraded_notes(total_ungraded(report)))
    lines = [f"Score: {points(report['score'])} / {points(report['max_score'])}"]
    lines[0] += f" ({ungraded})" if ungraded else ""
    for part_id, part in report["parts"].items():
        notes = [tally(part), *ungraded_notes(part), part.get("provisional")]
        notes = "; ".join(note for note in notes if note)
        lines.append(f"{part_id}: {part_score(part)} ({notes})")
    lines += [f"The grader failed: {last_line(error)}" for error in report["errors"]]
    return "\n".join(lines)


def last_line(text: str) -> str:
    """A traceback's last line: the exception itself."""
    return text.strip().rpartition("\n")[2]


# -- junit.xml --------------------------------------------------------------------------------

# Characters XML 1.0 cannot hold at all, escaped or not (control characters, lone surrogates).
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def junit_xml(report: dict) -> str:
    """One <testsuite> per part and one <testcase> per check, in the parts' order."""
    suites = ET.Element("testsuites", name="paged-attention-kit grader")
    for part_id, part in report["parts"].items():
        suites.append(junit_suite(part_id, part))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def junit_suite(part_id: str, part: dict) -> ET.Element:
    statuses = [check["status"] for check in part["checks"]]
    suite = ET.Element(
        "testsuite",
        name=part_id,
        tests=str(len(statuses)),
        failures=str(statuses.count("failed")),
        errors=str(statuses.count("error")),
        skipped=str(statuses.count("skipped")),
        time=f"{part['seconds']:.3f}",
    )
    for check in part["checks"]:
        suite.append(junit_case(part_id, check))
    return suite


def junit_case(part_id: str, check: dict) -> ET.Element:
    case = ET.Element(
        "testcase",
        classname=f"grader.{part_id}",
        name=xml_text(check["name"]),
        time=f"{check['seconds']:.3f}",
    )
    tag = {"failed": "failure", "error": "error", "skipped": "skipped"}.get(check["status"])
    if tag:
        outcome = ET.SubElement(case, tag, message=xml_text(check["message"]))
        if tag != "skipped":
            details = (check["counterexample"], check["hypothesis"], check["traceback"])
            outcome.text = xml_text("\n\n".join(text for text in details if text))
    return case


def xml_text(text: str) -> str:
    return NOT_XML.sub("\N{REPLACEMENT CHARACTER}", text)
