"""`--lang zh` end to end: mutants of the answer key graded in Chinese leave no English in their
report.md, their summary or their progress lines, but code, identifiers and the candidate's own
text (its exception messages); and report.json stays in English, as the grader wrote it."""

from concurrent.futures import Future
from pathlib import Path

import pytest

from grader.report.i18n import tr
from tests.end_to_end.test_buggy import MUTANTS_BY_ID
from tests.end_to_end.test_golden_reports import CASES
from tests.grader.report.english import english_words, markdown_kit_words, summary_kit_words
from tests.grader.report.punctuation import slips
from tests.grading import Graded, build_submission, concurrently, grade

# Mutants that break one part's rules each, whose other parts grade again on the kit's allocator
# (part 1: the duplicate ids cost decode points), or on the kit's manager (part 5), which their
# notes and progress lines say. The second joins two golden ones (`test_golden_reports.CASES`),
# for more kinds of message in one report.
MUTANTS = {
    "duplicate_ids": (MUTANTS_BY_ID["allocate_returns_a_duplicate"].edits, "allocator,decode"),
    "decode_and_fork": (
        CASES["tutorial_decode_rule"][0] + CASES["fork_without_incref"][0],
        "decode,scheduler,sharing",
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future[Graded]]:
    root = tmp_path_factory.mktemp("zh")

    def job(name: str) -> Graded:
        edits, parts = MUTANTS[name]
        folder = build_submission(root / name / "mutant_1", edits=edits)
        options = ("--parts", parts, "--lang", "zh", "--seed", "7")
        return grade(folder, *options, out=root / name / "report")

    return concurrently({name: lambda name=name: job(name) for name in MUTANTS})


def report_md(graded: Graded) -> str:
    return (Path(graded.report["submission"]["path"]).parent / "report" / "report.md").read_text()


def test_the_kit_allocator_note_and_line_are_in_the_graded_text(
    graded: dict[str, Future[Graded]],
) -> None:
    """The duplicate ids cost decode points on the candidate's allocator: decode is graded again
    on the kit's, which its note and a progress line say (checked above for English words)."""
    result = graded["duplicate_ids"].result()
    assert result.report["rescored"]["decode"]["kept"] == "kit", result.report["rescored"]
    again = tr("zh", "progress_again", parts="decode", file="block_allocator.py")
    assert again in result.stderr, result.stderr


@pytest.mark.parametrize("name", MUTANTS)
def test_a_chinese_report_has_no_english_words(
    name: str, graded: dict[str, Future[Graded]]
) -> None:
    result = graded[name].result()
    failed = [
        check
        for part in result.report["parts"].values()
        for check in part["checks"]
        if check["status"] == "failed"
    ]
    assert failed, result.stdout
    exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
    text = markdown_kit_words(report_md(result), tr("zh", "environment_heading"), exempt)
    sources = {flag["source"] for flag in result.report["integrity"]}  # ids, shown as code
    assert [word for word in english_words(text) if word not in sources] == [], text
    assert slips(text) == [], text
    assert all(english_words(check["message"]) for check in failed)  # report.json: English


@pytest.mark.parametrize("name", MUTANTS)
def test_the_chinese_summary_and_progress_lines_have_no_english_words(
    name: str, graded: dict[str, Future[Graded]]
) -> None:
    result = graded[name].result()
    summary = summary_kit_words(result.stdout, tr("zh", "see_counterexample"))
    assert english_words(summary) == [], summary
    assert english_words(result.stderr) == [], result.stderr
    assert slips(summary) == [], summary
    assert slips(result.stderr) == [], result.stderr
