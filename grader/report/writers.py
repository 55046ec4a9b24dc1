"""The grade's files: the report itself, two pages for people, and two formats for CI and LMS tools.

`write_all` writes, into one folder and always all five, each from the report `bounded`:
- `report.json`: the report dict as it is (the contract's report, see exercises/README.md);
- `report.md` and `report.html`: the same for a person to read, drawn from templates
  (`render.py`);
- `results.json`: Gradescope's autograder format;
- `junit.xml`: JUnit XML, one test suite per part.

A report holding the kit's simulation (the same in every report) also gets `simulation.html`, the
simulation's own page, which `report.html` and `report.md` link to instead of repeating it.
"""

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

from grader.provenance import sealed
from grader.report.formats import (
    part_score,
    points,
    provisional_note,
    tally,
    total_ungraded,
    ungraded_notes,
)
from grader.report.i18n import language
from grader.report.model import bounded
from grader.report.render import SIMULATION_PAGE, report_html, report_markdown, simulation_html


def write_all(report: dict, out: Path, key: bytes | None = None) -> None:
    """Create `out` and write the five report files into it, `report.json` first, then the
    simulation's page (`write_simulation`), all from the report `bounded`: clean text of a
    bounded length, and `sealed` with `key` (`provenance.py`; unsealed without one)."""
    report = sealed(bounded(report), key)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(report_json(report), encoding="utf-8", errors="replace")
    write_pages(report, out)


def write_pages(report: dict, out: Path, lang: str | None = None) -> None:
    """Draw again, from `report` (a report.json read back and verified by its seal, `bounded`),
    every file `write_all` writes beside it: so that a page changed after grading never outlives
    a report kept or merged (the seal covers report.json only). The pages (`PAGES`, the
    simulation's) are in `lang`, by default the report's own (`i18n.language`): a drive draws a
    report it keeps or merges in its own `--lang`, while report.json's `language` stays the one
    it was graded in, under the seal."""
    lang = lang or language(report)
    for name, render in WRITERS.items():
        if name != "report.json":
            text = render(report, lang) if name in PAGES else render(report)
            (out / name).write_text(text, encoding="utf-8", errors="replace")
    write_simulation(report, out, lang)


def write_simulation(report: dict, out: Path, lang: str) -> None:
    """`simulation.html` in `out`, in `lang`, for a report with the kit's simulation; for one
    without, none (an earlier grading's is removed: no page outlives the report that links to
    it)."""
    page = out / SIMULATION_PAGE
    if "simulation" in report:
        page.write_text(simulation_html(report, lang), encoding="utf-8", errors="replace")
    else:
        page.unlink(missing_ok=True)


def replace_whole(path: Path, text: str) -> None:
    """Write `text` to `path` whole: beside it first, then moved there, so that an interrupted
    write (Ctrl-C, a full disk) leaves the file as it was, never half-written."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8", errors="replace")
    partial.replace(path)


def report_json(report: dict) -> str:
    return json.dumps(report, indent=2, sort_keys=False) + "\n"


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
        provisional = provisional_note(part) if part.get("provisional") else None
        notes = [tally(part), *ungraded_notes(part), provisional]
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


# Each file of a grade, in the order `write_all` writes them; those of `PAGES` drawn in a language
# (`write_pages`), the formats for tools the same in any.
PAGES = ("report.md", "report.html")
WRITERS: dict[str, Callable[..., str]] = {
    "report.json": report_json,
    "report.md": report_markdown,
    "report.html": report_html,
    "results.json": gradescope_json,
    "junit.xml": junit_xml,
}
