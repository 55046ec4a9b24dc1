"""A submission's diagnosis: what is most wrong with it, one plain sentence each, most serious
first. It is the first line of its report, above the score, and the start of its row's note on
the leaderboard; a report with nothing wrong has none.

First what stops a part as a whole: each file that does not compile; each part some of whose
checks never ran the candidate's code (its file not submitted, refused by the grader's rules, not
importable, or not implemented, in whole or in part); each part whose failures share one cause
(`PART_CAUSES`: a kernel that launches no Triton kernel). Then the failures, as
`diagnoses.toml` words them, with their severity (`grader/severity.py`): each part's most serious
failure, most serious first, so that one part's many failures cannot hide another's; then the
others. Failures with one cause, a rule of their part that they all break (a check's `cause`:
a decode that takes its block a token late, met by every check that decodes), are one failure,
said by the rule; a check run on several cases (`every_head_dim[32]`) is said once. `SHOWN`
sentences at most, then how many more the report holds.

The grader's own failures (the report's errors, a check it could not run) are not the
submission's: the report shows them apart, and the row's note on the leaderboard says them. The
diagnosis is read from the report in English, as written, and said in `lang`; a report written
before severities gives its failures without one.
"""

import tomllib
from functools import cache
from pathlib import Path

from grader.report.formats import (
    IMPORT_FAILED,
    NOT_SUBMITTED,
    message_of,
    never_ran,
    ran_and_failed,
    severity_rank,
    severity_word,
    syntax_failures,
)
from grader.report.i18n import tr

PHRASES = Path(__file__).resolve().parent / "diagnoses.toml"
SHOWN = 3  # sentences; the others are counted
# A failed check's message that names one cause for its whole part, and what the part says then.
PART_CAUSES = {"launched no @triton.jit kernel": "diagnosis_no_triton"}
# In the message of a check whose file the grader refused to run (the kernel rule, decoded code).
REFUSED = " is not run: "


@cache
def phrases() -> dict[str, dict[str, str]]:
    """What each check's failure, and each cause's, means: by check id or rule id, then by
    language."""
    with PHRASES.open("rb") as file:
        return tomllib.load(file)


def diagnosis(report: dict, lang: str) -> list[str]:
    """The diagnosis of `report` (`report.json` as written), in `lang`."""
    sentences = [
        tr(lang, "diagnosis_syntax", file=error.get("file", "?"))
        for error in report.get("syntax_errors", [])
    ]
    explained, failures = syntax_failures(report), []
    for part_id, part in report["parts"].items():
        graded = [
            check
            for check in part["checks"]
            if check.get("status") != "skipped" and check.get("id") not in explained
        ]
        unrun = [check for check in graded if never_ran(check)]
        if unrun:
            sentences.append(
                tr(lang, unrun_key(unrun, whole=len(unrun) == len(graded)), part=part_id)
            )
        caused = [check for check in graded if cause(check) and check not in unrun]
        for key in dict.fromkeys(cause(check) for check in caused):
            sentences.append(tr(lang, key, part=part_id))
        failed = [
            check for check in graded if ran_and_failed(check, explained) and check not in caused
        ]
        failures.append(once_per_cause(sorted(failed, key=severity_rank)))
    firsts = [failed[0] for failed in failures if failed]
    others = [check for failed in failures for check in failed[1:]]
    for check in sorted(firsts, key=severity_rank) + sorted(others, key=severity_rank):
        sentences.append(said(check, lang))
    if len(sentences) <= SHOWN:
        return sentences
    return [*sentences[:SHOWN], tr(lang, "diagnosis_more", count=len(sentences) - SHOWN)]


def unrun_key(unrun: list[dict], whole: bool) -> str:
    """What a part says of its checks that never ran the candidate's code, all of it or not."""
    messages = [message_of(check) for check in unrun]
    if all(message.startswith(NOT_SUBMITTED) for message in messages):
        return "diagnosis_not_submitted"
    if any(REFUSED in message for message in messages):
        return "diagnosis_refused"
    if any(message.startswith(IMPORT_FAILED) for message in messages):
        return "diagnosis_no_import"
    return "diagnosis_not_implemented" if whole else "diagnosis_partly_implemented"


def cause(check: dict) -> str | None:
    """The `PART_CAUSES` sentence key of a failed check whose message names one, else None."""
    message = message_of(check)
    return next((key for marker, key in PART_CAUSES.items() if marker in message), None)


def once_per_cause(checks: list[dict]) -> list[dict]:
    """`checks`, the first of each cause kept (`cause_of`): one failure per rule broken, and
    each check run on several cases (`every_head_dim[32]`) once."""
    return list({cause_of(check): check for check in reversed(checks)}.values())[::-1]


def cause_of(check: dict) -> str:
    """What a failed check is said by: the rule it breaks (its `cause`), else its own id without
    its case."""
    return str(check.get("cause") or base_id(check))


def base_id(check: dict) -> str:
    """A check's id without its case: `kernel/every_head_dim[32]` is `kernel/every_head_dim`."""
    return str(check.get("id", "")).partition("[")[0]


def said(check: dict, lang: str) -> str:
    """A failure as the diagnosis says it: what breaking its rule, or failing its check, means
    (a cause the kit does not know, by the check), and its severity."""
    said_as = phrases().get(cause_of(check)) or phrases().get(base_id(check), {})
    phrase = said_as.get(lang, check.get("name") or base_id(check))
    severity = check.get("severity")
    if severity is None:
        return phrase
    return f"{phrase}{tr(lang, 'open')}{severity_word(lang, severity)}{tr(lang, 'close')}"
