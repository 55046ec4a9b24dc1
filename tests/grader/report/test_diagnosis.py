# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""A report's diagnosis (`grader/report/diagnosis.py`): every check's failure has a phrase in each
language, the Chinese with no English word left; files that do not compile and parts whose code
never ran come before the failed checks, and those come most serious first; the grader's own
failure is not the submission's, and is not in it."""

import pytest

from grader.checks.support import rules
from grader.parts import PARTS
from grader.report.diagnosis import SHOWN, diagnosis, phrases
from grader.report.i18n import LANGUAGES
from grader.scoring.plugin import check_names
from tests.grader.report.english import english_words


def test_every_check_and_cause_has_a_phrase_in_each_language_and_no_other_is_kept() -> None:
    checks = {
        f"{part.id}/{name}" for part in PARTS.values() for module in part.checks
        for name in check_names(module)
    }  # fmt: skip
    assert set(phrases()) == checks | set(rules.HARMS) | {rules.TIMED_RESULTS}
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


def test_each_parts_most_serious_failure_comes_first_then_the_rest_is_counted() -> None:
    report = graded(
        failed("allocator/allocate_and_free_speed", "speed"),
        failed("allocator/random_allocate_and_free", "safety"),
        failed("decode/new_manager_and_request", "safety", status="passed"),
        failed("scheduler/no_deadlock", "contract"),
        failed("allocator/bad_frees_raise_and_free_nothing", "safety"),
        failed("sharing/copy_on_write", "safety"),
    )
    assert diagnosis(report, "en") == [
        "random allocate and free calls corrupt the pool (safety)",  # part 1's first safety one
        "a write to a shared block is not copied first (safety)",
        "the scheduler stalls with work left (contract)",  # before part 1's second safety one
        "and 2 more",
    ]
    assert diagnosis(report, "zh")[0] == "随机的 allocate 与 free 调用破坏了块池（安全）"
    assert len(diagnosis(report, "zh")) == SHOWN + 1


def test_a_check_run_on_several_cases_is_said_once() -> None:
    report = graded(
        failed("kernel/every_head_dim[32]", "safety"),
        failed("kernel/every_head_dim[64]", "safety"),
        failed("kernel/scale", "safety"),
    )
    assert diagnosis(report, "en") == [
        "wrong attention output for a head_dim (safety)",
        "the attention scale is not applied as given (safety)",
    ]


def test_failures_with_one_cause_are_said_once_by_their_rule() -> None:
    """A decode that takes its block a token late fails every check that decodes: one
    sentence, the rule's, before the part's other failures. A cause the kit does not know (a
    report of another version) is said by its check."""
    late = {"cause": "decode:decode_block"}
    report = graded(
        failed("decode/decode_with_block_size_one", "safety") | late,
        failed("decode/decode_adds_a_block_exactly_when_a_token_starts_one", "safety") | late,
        failed("decode/free_returns_every_block", "safety") | late,
        failed("decode/bad_prefills_are_refused", "contract"),
        failed("caching/random_prompts_decodes_and_frees", "contract") | {"cause": "caching:new"},
    )
    assert diagnosis(report, "en") == [
        "decode does not take a block exactly when a token starts one (safety)",
        "random prompts, decodes and frees corrupt the prefix cache (contract)",
        "a bad prefill is accepted, or still changes the request or the pool (contract)",
    ]
    assert diagnosis(report, "zh")[0] == "decode 没有恰好在 token 开启新块时取一个块（安全）"


def test_a_kernel_that_launches_no_triton_kernel_is_said_so_once() -> None:
    launched_none = "paged_attention_decode launched no @triton.jit kernel: the work must be ..."
    report = graded(
        failed("kernel/launches_a_triton_kernel", "contract", launched_none),
        failed("kernel/every_head_dim[32]", "safety", launched_none),
        failed("kernel/scale", "safety", launched_none),
    )
    assert diagnosis(report, "en") == ["kernel: no Triton kernel is launched"]


def test_a_file_the_grader_refuses_to_run_is_said_so_once() -> None:
    refused = (
        "import failed: ImportError: paged_attention.py is not run: line 9 calls torch.softmax"
    )
    report = graded(
        failed("kernel/launches_a_triton_kernel", "contract", refused),
        failed("kernel/scale", "safety", refused),
    )
    assert diagnosis(report, "en") == [
        "kernel: not run, the grader refuses its file (see the report)"
    ]


def test_a_part_partly_implemented_or_not_submitted_says_so() -> None:
    report = graded(
        failed("decode/free_returns_every_block", "safety", "not implemented: free"),
        failed("decode/decode_with_block_size_one", "safety"),
        failed("scheduler/no_deadlock", "contract", "not submitted: scheduler.py is missing"),
    )
    assert diagnosis(report, "en") == [
        "decode: partly not implemented",
        "scheduler: its file is not submitted",
        "decode is wrong with block_size 1 (safety)",
    ]


def test_checks_without_a_message_or_an_id_are_said_by_what_they_have() -> None:
    report = graded(failed("gather/gather_is_bit_exact", "safety", None))
    report["parts"]["gather"]["checks"].append({"status": "failed", "message": None})
    assert diagnosis(report, "en") == ["the gather returns wrong rows or values (safety)"]


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
