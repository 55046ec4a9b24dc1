"""The interviewer's debrief (`grader/report/debrief.py`) and where the report shows it: a
question per failed check whose code ran and per part with full marks; none in a kit without
the texts (the candidate kit). The page opens with the answer: the score, what it is out of,
the diagnosis, the debrief, then the parts; how the report was made comes last."""

import pytest

from grader.report import debrief as debrief_module
from grader.report.debrief import debrief
from grader.report.render import report_html, report_markdown
from tests.grader.report.test_diagnosis import failed, graded
from tests.grader.report.test_writers import check, full_marks_report, part, report


def text(word: str) -> dict:
    return {
        lang: {"ask": f"{word} ask {lang}?", "answer": f"{word} answer {lang}"}
        for lang in ("en", "zh")
    }


TEXTS = {
    "checks": {
        "allocator/bad_frees_raise_and_free_nothing": text("double free"),
        "allocator/allocate_and_free_speed": text("speed"),
        "kernel/every_head_dim": text("head dim"),
        "decode/new_manager_and_request": text("new manager"),
    },
    "parts": {
        "decode": text("decode depth"),
        "allocator": text("allocator depth"),
        "sharing": text("sharing depth"),
    },
    "causes": {
        "decode:pool_dtype": "decode/new_manager_and_request",
        "decode:free_count": "decode/new_manager_and_request",
    },
}


@pytest.fixture
def texts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debrief_module, "debriefs", lambda: TEXTS)


def asked(report: dict, lang: str = "en") -> dict[str, list[str]]:
    return {item["part"]: [q["ask"] for q in item["questions"]] for item in debrief(report, lang)}


def test_failed_checks_are_asked_most_serious_first_and_full_marks_get_depth(texts) -> None:
    report = graded(
        failed("allocator/allocate_and_free_speed", "speed"),
        failed("allocator/bad_frees_raise_and_free_nothing", "safety"),
        failed("decode/new_manager_and_request", "safety", status="passed"),
        failed("kernel/every_head_dim[32]", "safety"),
        failed("kernel/every_head_dim[64]", "safety"),  # one check, asked once
    )
    assert asked(report) == {
        "allocator": ["double free ask en?", "speed ask en?"],
        "decode": ["decode depth ask en?"],
        "kernel": ["head dim ask en?"],
    }
    assert asked(report, "zh")["decode"] == ["decode depth ask zh?"]
    kernel = debrief(report, "en")[2]["questions"][0]
    assert kernel["check"]["id"] == "kernel/every_head_dim[32]"
    assert kernel["answer"] == "head dim answer en"


def test_failures_with_one_cause_are_asked_once_with_the_question_of_its_rule(texts) -> None:
    """The question of the check that asks about the rule, linked to the most serious of the
    failures, and no question twice; a cause the texts do not name is asked as its check, and a
    timing's results that differ from the contract, which no question fits, not at all."""
    pool = {"cause": "decode:pool_dtype"}
    report = graded(
        failed("decode/new_manager_and_request", "contract", status="passed"),
        failed("decode/random_prefill_decode_and_free", "contract") | pool,
        failed("decode/free_returns_every_block", "contract") | pool,
        failed("decode/prefill_takes_ceil_seq_len_over_block_size_blocks", "contract")
        | {"cause": "decode:free_count"},  # another cause, asked with the same question: once
        failed("allocator/bad_frees_raise_and_free_nothing", "safety") | {"cause": "other"},
        failed("allocator/allocate_and_free_speed", "contract") | {"cause": "timed_results"},
    )
    assert asked(report) == {
        "allocator": ["double free ask en?"],
        "decode": ["new manager ask en?"],
    }
    question = debrief(report, "en")[1]["questions"][0]
    assert question["check"]["id"] == "decode/random_prefill_decode_and_free"


def test_checks_that_never_ran_the_candidates_code_are_not_asked(texts) -> None:
    report = graded(
        failed("allocator/bad_frees_raise_and_free_nothing", "safety", "not implemented: a stub"),
        failed("decode/new_manager_and_request", "safety", "does not compile"),
        failed("sharing/fork", "safety", status="skipped"),
        syntax_errors=[
            {"file": "kv_cache_manager.py", "checks": ["decode/new_manager_and_request"]}
        ],
    )
    assert asked(report) == {}  # and a part all skipped has no full marks


def test_a_kit_without_the_texts_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(debrief_module, "debriefs", lambda: {})
    report = graded(failed("allocator/bad_frees_raise_and_free_nothing", "safety"))
    assert debrief(report, "en") == []
    assert 'id="interviewer"' not in report_html(full_marks_report())


def positions(page: str, *marks: str) -> list[int]:
    return [page.index(mark) for mark in marks]


def test_the_page_opens_with_the_answer_and_ends_with_the_method(texts) -> None:
    allocator = [
        check("allocator", "bad_frees_raise_and_free_nothing", "failed", 0, 5)
        | {"severity": "safety", "message": "a double free was accepted"},
        check("allocator", "ok", "passed", 10, 10),
    ]
    decode = [check("decode", "grows", "passed", 20, 20)]
    cuda = [{"reason": "needs a CUDA device", "points": 5.0}]
    shown = report(
        {
            "allocator": part("Part 1", allocator, 15),
            "decode": part("Part 2", decode, 20, ungraded=cuda),
        }
    )
    page = report_html(shown)
    order = positions(
        page,
        'id="total"',
        'id="out-of"',
        'id="diagnosis"',
        'id="interviewer"',
        'id="parts"',
        'id="method"',
        'id="environment"',
    )
    assert order == sorted(order)
    assert "30 of 35 points graded here; out of 40 with a CUDA device" in page
    assert "double free ask en?" in page
    assert "A good answer mentions: double free answer en" in page
    assert "decode depth ask en?" in page
    markdown = report_markdown(shown)
    order = positions(
        markdown,
        "**Total",
        "out of 40",
        "**Diagnosis",
        "## For the interviewer",
        "## Parts",
        "## How this report",
    )
    assert order == sorted(order)
    assert "decode depth answer en" in markdown
    assert "graded here" not in report_html(full_marks_report())  # every point graded here


def test_a_kernel_that_launches_no_triton_kernel_is_asked_that_once(texts, monkeypatch) -> None:
    launched_none = "paged_attention_decode launched no @triton.jit kernel: the work must be done"
    checks = {**TEXTS["checks"], "kernel/launches_a_triton_kernel": text("no triton")}
    monkeypatch.setattr(debrief_module, "debriefs", lambda: {**TEXTS, "checks": checks})
    report = graded(
        failed("kernel/every_head_dim[32]", "safety", launched_none),
        failed("kernel/launches_a_triton_kernel", "contract", launched_none),
    )
    assert asked(report) == {"kernel": ["no triton ask en?"]}
