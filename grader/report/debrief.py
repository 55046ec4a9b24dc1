"""The interviewer's debrief: what to ask a candidate about their graded submission.

Per part, in the report's order: for each failed check whose code ran (not a stub, a missing or
unimportable file, or one that does not compile: those say nothing to reason about), once per
check run on several cases, most serious first, and once for a cause that fails the whole part
(a kernel that launches no Triton kernel), a question that asks the candidate to reason
about the failure and what a good answer mentions; failures with one cause, a rule they all break
(a check's `cause`), are asked about once, with the question of the check that asks about that
rule (`causes` in `DEBRIEFS`), and no question is asked twice. For a part passed with full marks,
one question that probes depth. The texts are the hiring team's, in `DEBRIEFS`, which only the
full kit has: the candidate kit's reports have no debrief.
"""

import tomllib
from functools import cache

from grader import KIT_ROOT
from grader.checks.support.rules import TIMED_RESULTS
from grader.report.diagnosis import base_id, cause
from grader.report.formats import ran_and_failed, severity_rank, syntax_failures

DEBRIEFS = KIT_ROOT / "full_kit" / "debriefs.toml"
# The checks that name a cause failing a whole part (`diagnosis.PART_CAUSES`): where one does,
# its question is the only one asked of the checks that cause failed.
CAUSED = {"kernel/launches_a_triton_kernel"}


@cache
def debriefs() -> dict[str, dict]:
    """`{"checks": {check id: text}, "parts": {part id: text}, "causes": {rule id: check id}}`,
    a text being `{lang: {"ask", "answer"}}`; empty where the kit has no `DEBRIEFS` (the
    candidate kit)."""
    if not DEBRIEFS.is_file():
        return {}
    with DEBRIEFS.open("rb") as file:
        return tomllib.load(file)


def debrief(report: dict, lang: str) -> list[dict]:
    """The questions for `report` (`report.json` as written) in `lang`, by part:
    `[{"part": id, "questions": [{"ask", "answer", "check": dict | None}]}]`, the parts with
    none left out; `check` is the failed check asked about, None for the depth question."""
    texts = debriefs()
    if not texts:
        return []
    explained = syntax_failures(report)
    asked = []
    for part_id, part in report["parts"].items():
        graded = [check for check in part["checks"] if check.get("status") != "skipped"]
        failed = [check for check in graded if ran_and_failed(check, explained)]
        if any(cause(check) for check in failed):  # one cause fails the part: asked once
            failed = [check for check in failed if not cause(check) or base_id(check) in CAUSED]
        asked_with = {}  # each question once, with the most serious failure it asks about
        for check in sorted(failed, key=severity_rank):
            asked_with.setdefault(asked_as(texts, check), check)
        questions = [
            {**text[lang], "check": check}
            for asked, check in asked_with.items()
            if (text := texts["checks"].get(asked))
        ]
        full_marks = graded and all(check.get("status") == "passed" for check in graded)
        if full_marks and (text := texts["parts"].get(part_id)):
            questions.append({**text[lang], "check": None})
        if questions:
            asked.append({"part": part_id, "questions": questions})
    return asked


def asked_as(texts: dict[str, dict], check: dict) -> str:
    """The check whose question a failed check is asked with: the one that asks about its cause,
    where it has one the kit knows; none for a timing's results that differ from the contract
    (`TIMED_RESULTS`: no question fits them all); else itself (without its case)."""
    cause = check.get("cause", "")
    if cause == TIMED_RESULTS:
        return ""
    return texts.get("causes", {}).get(cause, base_id(check))
