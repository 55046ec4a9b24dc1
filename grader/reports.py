"""The grade's files: the report itself, two pages for people, and two formats for CI and LMS tools.

`write_all` writes, into one folder and always all five:
- `report.json`: the report dict as it is (the contract's report, see SPEC.md);
- `report.md` and `report.html` (`report_html.py`): the same for a person to read;
- `results.json`: Gradescope's autograder format;
- `junit.xml`: JUnit XML, one test suite per part.

Messages carry the candidate's exception text and file names: each format escapes them its own way.
"""

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html import escape
from pathlib import Path

from grader.report_html import (
    duration,
    origin,
    part_score,
    points,
    render_html,
    shown,
    tally,
    verdict,
)


def write_all(report: dict, out: Path) -> None:
    """Create `out` and write the five report files into it, `report.json` first."""
    writers: dict[str, Callable[[dict], str]] = {
        "report.json": report_json,
        "report.md": render_markdown,
        "report.html": render_html,
        "results.json": gradescope_json,
        "junit.xml": junit_xml,
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, render in writers.items():
        # errors="replace": a lone surrogate in a candidate's message must not lose the report.
        (out / name).write_text(render(report), encoding="utf-8", errors="replace")


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


# -- report.md --------------------------------------------------------------------------------


def render_markdown(report: dict) -> str:
    """The report as Markdown: score, grader errors, parts, failures, timings, provenance."""
    sections = [
        md_header(report),
        md_errors(report["errors"]),
        md_parts_table(report["parts"]),
        *(md_part(part) for part in report["parts"].values()),
        md_benchmarks(report["benchmarks"]),
        md_integrity(report["integrity"]),
        md_list("Ignored files", [code_span(name) for name in report["ignored_files"]]),
        md_environment(report),
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def md_header(report: dict) -> str:
    score = f"{points(report['score'])} / {points(report['max_score'])}"
    return (
        f"# Grade report: {plain(report['submission']['name'])}\n\n"
        f"**Score: {score}** (graded {report['started_at']}, {report['seconds']:g} s)"
    )


def md_errors(messages: list[str]) -> str:
    """The grader's own failures, before anything else: the score may be incomplete."""
    if not messages:
        return ""
    blocks = "\n\n".join(fence(message) for message in messages)
    return f"## The grader failed\n\nThe score may be missing points because of this.\n\n{blocks}"


def md_parts_table(parts: dict[str, dict]) -> str:
    rows = [
        f"| {part_id} | {plain(part['title'])} | {part_score(part)} | {plain(tally(part))} |"
        for part_id, part in parts.items()
    ]
    header = ["## Parts", "", "| id | part | score | checks |", "| --- | --- | --- | --- |"]
    return "\n".join(header + rows)


def md_part(part: dict) -> str:
    """A part's checks that did not pass, each in full, then the passed ones by name."""
    if "note" in part:
        return f"## {plain(part['title'])}\n\n{plain(part['note'])}"
    lines = [f"## {plain(part['title'])} ({part_score(part)})"]
    lines += [md_check(check) for check in part["checks"] if check["status"] != "passed"]
    passed = [code_span(check["name"]) for check in part["checks"] if check["status"] == "passed"]
    if passed:
        lines.append(f"Passed: {', '.join(passed)}.")
    return "\n\n".join(lines)


def md_check(check: dict) -> str:
    score = f"{points(check['points'])} / {points(check['max_points'])}"
    lines = [
        f"### {code_span(check['name'])}: {check['status']}, {score} points",
        fence(check["message"]),
    ]
    labelled = (
        ("Counterexample, as runnable Python:", check["counterexample"], "python"),
        ("Hypothesis notes:", check["hypothesis"], ""),
        ("Traceback:", check["traceback"], ""),
    )
    lines += [f"{label}\n\n{fence(text, language)}" for label, text, language in labelled if text]
    return "\n\n".join(lines)


def md_benchmarks(rows: list[dict]) -> str:
    if not rows:
        return ""
    lines = [
        "## Timings",
        "",
        "| benchmark | part | candidate | reference | ratio | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {plain(row['name'])} | {row['part']} | {duration(row['candidate_seconds'])} | "
        f"{duration(row['reference_seconds'])} | {row['ratio']:.2f}x | {verdict(row)} |"
        for row in rows
    ]
    return "\n".join(lines)


def md_integrity(flags: list[dict]) -> str:
    return md_list(
        "Integrity flags", [f"{plain(origin(flag))}: {plain(flag['message'])}" for flag in flags]
    )


def md_list(title: str, items: list[str]) -> str:
    """A titled bullet list; nothing at all when there are no items."""
    if not items:
        return ""
    return "\n".join([f"## {title}", "", *(f"- {item}" for item in items)])


def md_environment(report: dict) -> str:
    """Where the grade ran, and the hashes of the files it graded."""
    env = [f"- {key}: {plain(shown(value))}" for key, value in report["environment"].items()]
    files = [
        f"- {code_span(name)}: `{digest}`" for name, digest in report["submission"]["files"].items()
    ]
    return "\n".join(["## Environment", "", *env, "", "## Submission files (sha256)", "", *files])


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
    lines = [f"Score: {points(report['score'])} / {points(report['max_score'])}"]
    lines += [
        f"{part_id}: {part_score(part)} ({tally(part)})"
        for part_id, part in report["parts"].items()
    ]
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
