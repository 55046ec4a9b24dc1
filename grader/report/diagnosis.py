"""A submission's diagnosis: what is most wrong with it, one plain sentence each, most serious
first. It is the first line of its report, above the score, and the start of its row's note on
the leaderboard; a report with nothing wrong has none.

In this order: each file that does not compile; each part none of whose checks got to run the
candidate's code (not implemented, not submitted, or its code does not import); then each check that
failed having run it, by severity (`grader/severity.py`) and, within one, in the parts' order, as
`diagnoses.toml` words it, with its severity. The grader's own failures are not the submission's:
the report and the row's note say them apart. `SHOWN` sentences at most, then how many more the
report holds. The diagnosis is read from the report in English, as written, and said in `lang`: a
report written before severities gives its failures in their order, without one.
"""

import tomllib
from functools import cache
from pathlib import Path

from grader.report.formats import NOT_RUN, severity_rank, severity_word, syntax_failures
from grader.report.i18n import tr

PHRASES = Path(__file__).resolve().parent / "diagnoses.toml"
SHOWN = 3  # sentences; the others are counted
IMPORT_FAILED = "import failed:"  # the message of a check whose file raised on import


@cache
def phrases() -> dict[str, dict[str, str]]:
    """What each check's failure means, by check id, then by language."""
    with PHRASES.open("rb") as file:
        return tomllib.load(file)


def diagnosis(report: dict, lang: str) -> list[str]:
    """The diagnosis of `report` (`report.json` as written), in `lang`."""
    sentences = [
        tr(lang, "diagnosis_syntax", file=error["file"])
        for error in report.get("syntax_errors", [])
    ]
    explained, failed = syntax_failures(report), []
    for part_id, part in report["parts"].items():
        ran = [
            check
            for check in part["checks"]
            if check.get("status") != "skipped" and check.get("id") not in explained
        ]
        if ran and all(never_ran(check) for check in ran):
            imported = not any(check["message"].startswith(IMPORT_FAILED) for check in ran)
            key = "diagnosis_not_implemented" if imported else "diagnosis_no_import"
            sentences.append(tr(lang, key, part=part_id))
        else:
            failed += [c for c in ran if c.get("status") == "failed" and not never_ran(c)]
    sentences += [said(check, lang) for check in sorted(failed, key=severity_rank)]
    if len(sentences) <= SHOWN:
        return sentences
    return [*sentences[:SHOWN], tr(lang, "diagnosis_more", count=len(sentences) - SHOWN)]


def never_ran(check: dict) -> bool:
    """Whether a check failed before the candidate's code ran: a stub, a missing file, an import."""
    return check.get("message", "").startswith(NOT_RUN)


def said(check: dict, lang: str) -> str:
    """A failed check as the diagnosis says it: what its failure means, and its severity."""
    phrase = phrases().get(check["id"], {}).get(lang, check["name"])
    severity = check.get("severity")
    if severity is None:
        return phrase
    return f"{phrase}{tr(lang, 'open')}{severity_word(lang, severity)}{tr(lang, 'close')}"
