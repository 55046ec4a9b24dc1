# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""A report's diagnosis (`grader/report/diagnosis.py`): every check's failure has a phrase in each
language, the Chinese with no English word left; files that do not compile and parts whose code
never ran come before the failed checks, and those come most serious first; the grader's own
failure is not the submission's, and is not in it."""

import pytest

from grader.parts import PARTS
from grader.report.diagnosis import SHOWN, diagnosis, phrases
from grader.report.i18n import LANGUAGES
from grader.scoring.plugin import check_names
from tests.grader.report.english import english_words


def test_every_check_has_a_phrase_in_each_language_and_no_other_is_kept() -> None:
    checks = {
        f"{part.id}/{name}" for part in PARTS.values() for module in part.checks
        for name in check_names(module)
    }  # fmt: skip
    assert set(phrases()) == checks
    lacking = {check: set(LANGUAGES) - set(said) for check, said in phrases().items()}
    assert not {check: missing for check, missing in lacking.items() if missing}


def test_no_english_word_is_left_in_a_chinese_phrase() -> None:
    left = {check: english_words(said["zh"]) for check, said in phrases().items()}
    assert not {check: words for check, words in left.items() if words}


def failed(check_id: str, severity: str | None, message: str = "wrong", status="failed") -> dict:
    check = {"id": check_id, "name": check_id.split("/")[1], "status": status, "message": message}
    return check if severity is None else check | {"severity": severity}


def graded(*checks: dict, **fields) -> dict:
    """A report of `checks`, its parts in the kit's order, as the grader writes them."""
    parts = {
        part: {"checks": [c for c in checks if c["id"].startswith(f"{part}/")]} for part in PARTS
    }
    return {"parts": {part: graded for part, graded in parts.items() if graded["checks"]},
            "errors": [], **fields}  # fmt: skip


def test_full_marks_have_no_diagnosis() -> None:
    report = graded(failed("allocator/random_allocate_and_free", "safety", status="passed"))
    assert diagnosis(report, "en") == []


def test_failures_come_most_serious_first_then_the_rest_is_counted() -> None:
    report = graded(
        failed("allocator/allocate_and_free_speed", "speed"),
        failed("decode/new_manager_and_request", "safety", status="passed"),
        failed("scheduler/no_deadlock", "contract"),
        failed("sharing/copy_on_write", "safety"),
        failed("allocator/bad_frees_raise_and_free_nothing", "safety"),
    )
    assert diagnosis(report, "en") == [
        "a double free or a free of an unknown id is accepted, or half done (safety)",
        "a write to a shared block is not copied first (safety)",
        "the scheduler stalls with work left (contract)",
        "and 1 more",
    ]
    assert diagnosis(report, "zh")[0] == "重复释放或释放未知 id 被接受，或只执行了一半（安全）"
    assert len(diagnosis(report, "zh")) == SHOWN + 1


def test_what_never_ran_is_said_per_part_and_file_before_any_check() -> None:
    report = graded(
        failed("sharing/copy_on_write", "safety"),
        failed("scheduler/no_deadlock", "contract", "not implemented: Scheduler.step"),
        failed("kernel/scale", "safety", "import failed: NameError: name 'tl' is not defined"),
        failed("decode/free_returns_every_block", "safety", "import failed: SyntaxError"),
        errors=["the grader failed in part gather"],
        syntax_errors=[
            {"file": "kv_cache_manager.py", "checks": ["decode/free_returns_every_block"]}
        ],
    )
    assert diagnosis(report, "en") == [
        "kv_cache_manager.py does not compile",
        "kernel: its code does not import",
        "scheduler: not implemented",
        "and 1 more",  # the copy-on-write failure
    ]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_report_written_before_severities_says_each_failure_without_one(lang: str) -> None:
    report = graded(failed("sharing/copy_on_write", None))
    assert diagnosis(report, lang) == [phrases()["sharing/copy_on_write"][lang]]
