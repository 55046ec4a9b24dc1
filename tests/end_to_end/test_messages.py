# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The grader's own words in Chinese: every message the checks write is recorded by id
(`grader/said.py`) and has its entry in the catalog `checks.po`; a message is shown part by part,
the candidate's text left as it is; a counterexample's comments are shown in Chinese, its code
not; what the worker says crosses the wire by id; and a Chinese report or summary of real gradings
(the golden reports) holds no English but code, identifiers and the candidate's text."""

import ast
import json
import re
import textwrap
from pathlib import Path
from string import Formatter

import pytest

from grader import KIT_ROOT
from grader.report.formats import how_it_ran
from grader.report.i18n import tr
from grader.report.messages import entries, field_in, in_language, said_in, text_in
from grader.report.render import report_html, report_markdown
from grader.report.summary import summary_lines
from grader.said import field_record, from_record, recorded, said
from grader.sandbox.isolation import Isolation
from grader.sandbox.proxy import remote_error
from grader.sandbox.tools.engine import stop
from grader.sandbox.transcript import ASSERTS, Transcript
from tests.grader.report.english import (
    english_words,
    html_text,
    markdown_kit_words,
    summary_kit_words,
)
from tests.grader.report.punctuation import slips

CHECKS = KIT_ROOT / "grader" / "checks"
GOLDEN = KIT_ROOT / "tests" / "end_to_end" / "golden"
PROSE = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")  # two words: a string a person reads
SAMPLE = "v7"  # what each f-string part of a message stands for here: a name, or a word
CHINESE = entries("zh")  # checks.po's, by English
NOT_MESSAGES = {  # strings of the checks that read as prose but that no message shows
    *("bad id", "free blocks"),  # labels of values hypothesis draws, in its own notes
    *(  # the timed calls' keys, each with its pool's state
        f"{who} {pool}, {SAMPLE}"
        for who in ("candidate", "reference")
        for pool in ("small", "large")
    ),
}


def written_strings(source: str) -> list[str]:
    """Each string literal and f-string of `source` that is not a docstring nor a message's id
    (`said`'s first argument), an f-string's parts each as `SAMPLE`."""
    tree = ast.parse(source)
    skipped = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "said" and node.args:
            skipped.add(id(node.args[0]))
    texts = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            texts.append(
                "".join(v.value if isinstance(v, ast.Constant) else SAMPLE for v in node.values)
            )
    return texts


def is_code(text: str) -> bool:
    """Whether `text` is Python (a counterexample's code that a check writes), not a message:
    a block (indented or not, a function's body included), an expression's part (a
    comprehension's) or a statement's head."""
    text = textwrap.dedent(text)
    body = "def body():\n" + textwrap.indent(text, "    ")
    return any(compiles(code) for code in (text, body, f"[{text}]", f"{text}\n    pass"))


def compiles(code: str) -> bool:
    try:
        compile(code, "<string>", "exec")
    except SyntaxError:
        return False
    return True


def untranslated(source: str) -> list[str]:
    """The messages `source` writes as plain text, not by id (`said`): prose that is not code."""
    return [
        text
        for text in written_strings(source)
        if PROSE.search(text) and not is_code(text) and text not in NOT_MESSAGES
    ]


@pytest.mark.parametrize(
    "path", sorted(CHECKS.rglob("*.py")), ids=lambda path: str(path.relative_to(CHECKS))
)
def test_every_message_of_the_checks_is_said_by_id(path: Path) -> None:
    assert untranslated(path.read_text()) == []


def test_a_new_message_written_as_plain_text_is_found() -> None:
    source = 'def check(x):\n    assert x, f"the pool lost {x} blocks on the way"\n'
    assert untranslated(source) == ["the pool lost v7 blocks on the way"]
    known = 'def check(x):\n    assert x, said("allocate({n}) returned an id twice: {ids}")\n'
    assert untranslated(known) == []


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


@pytest.mark.parametrize("english", sorted(CHINESE))
def test_each_entry_has_the_same_parts_in_chinese_and_no_english(english: str) -> None:
    chinese = CHINESE[english]
    assert fields(chinese) == fields(english)
    assert "".join(text for text, *_ in Formatter().parse(english))  # never all parts
    sample = {name: SAMPLE for name in fields(english)}
    assert not english_words(chinese.format(**sample) if "!r" not in chinese else chinese)


def refused_free() -> str:
    """A check's message with a message inside it, and a candidate's text."""
    call = said("{call}, with {what},", call="free([3, 8])", what=said("an id out of range (8)"))
    return said(
        "{call} must raise {kind}, but raised {error}",
        call=call,
        kind="ValueError",
        error="RuntimeError: the same id twice",
    )


def test_a_message_is_shown_part_by_part_and_the_candidates_text_kept() -> None:
    message = refused_free()
    expected = (
        "free([3, 8])（含越界的 id 8）应抛出 ValueError，实际抛出了 RuntimeError: the same id twice"
    )
    assert text_in("zh", message) == expected
    assert (
        text_in("en", message)
        == message
        == (
            "free([3, 8]), with an id out of range (8), must raise ValueError, but raised "
            "RuntimeError: the same id twice"
        )
    )
    assert text_in("zh", "free([3, 3]) freed block 3 twice") == "free([3, 3]) freed block 3 twice"


def test_a_report_keeps_each_message_by_id_beside_its_english() -> None:
    """The record goes through JSON and back, and renders the same message."""
    report = json.loads(json.dumps(recorded({"errors": ["plain", refused_free()], "x": 1})))
    assert report["errors"] == ["plain", refused_free()]
    assert report["said"]["errors"][0] is None
    assert report["said"]["errors"][1]["id"] == "{call} must raise {kind}, but raised {error}"
    assert said_in("zh", report, "errors")[1] == text_in("zh", refused_free())
    assert said_in("en", report, "errors") == report["errors"]
    assert "said" not in recorded({"note": "plain text"})


def test_a_report_written_before_the_records_shows_its_english() -> None:
    check = {"status": "failed", "message": str(refused_free()), "counterexample": "x = 1"}
    assert said_in("zh", check, "message") == str(refused_free())


def test_a_list_part_is_shown_item_by_item() -> None:
    faster = said("{shape}: {speedup}x faster than the reference", shape="b1", speedup=12)
    flagged = said(
        "timing flagged for review, not rewarded: {flag_list}", flag_list=[faster, "b2: zz"]
    )
    assert (
        flagged
        == "timing flagged for review, not rewarded: b1: 12x faster than the reference; b2: zz"
    )
    assert (
        text_in("zh", flagged) == "计时结果已标记待人工复核，不计分：b1：比参考实现快 12 倍；b2: zz"
    )


@pytest.mark.parametrize(
    "record",
    [
        "text",
        {"id": "raises {error}"},
        {"id": "raises {error}", "params": {}},
        {"id": "raises {error}", "params": {"error": 7}},
        {"id": "raises {error.__class__}", "params": {"error.__class__": "x"}},
        {"id": "raises {error!r}", "params": {"error": "x"}},
        {"id": "raises {error", "params": {}},
        {"id": "{0}", "params": {"0": "x"}},
    ],
)
def test_a_record_that_is_not_one_is_refused(record: object) -> None:
    assert from_record(record) is None


def test_a_record_that_would_make_a_huge_message_is_refused_before_it_is_made() -> None:
    """Each level repeats its part 30 times: 30**6 characters from a record of 500 bytes."""
    data: object = "x"
    for _ in range(6):
        data = {"id": "{a}" * 30, "params": {"a": data}}
    assert len(json.dumps(data)) < 1000
    assert from_record(data) is None
    assert from_record(data["params"]["a"]["params"]["a"]["params"]["a"]) == "x" * 27_000


def test_no_line_break_in_a_comments_parts_starts_a_line_of_code() -> None:
    transcript = Transcript("submission")
    transcript.record("allocator.allocate(1)", "-> [0]")
    script = transcript.render(said("allocate(0) must return [], got {got}", got="x\rimport os"))
    assert script.splitlines()[-2:] == [
        "# fails: allocate(0) must return [], got x import os",
        "assert False, 'allocate(0) must return [], got x\\rimport os'",
    ]


def test_a_counterexample_keeps_its_code_and_shows_its_comments_in_chinese() -> None:
    transcript = Transcript("submission")
    transcript.define("allocator = BlockAllocator(4)")
    transcript.record("allocator.allocate(2)", "-> [0, 1]")
    transcript.record("allocator.free([9])", said("raises {error}", error="ValueError: bad id 9"))
    transcript.fail("len(ids)", "3")
    script = transcript.render(said("allocate({n}) must return {count} ids, got {ids}",
                                    n=0, count=0, ids=[1]))  # fmt: skip
    data = json.loads(json.dumps(field_record(script)))
    assert field_in("zh", data, str(script)).split("\n")[-6:] == [
        "allocator.allocate(2)  # -> [0, 1]",
        "allocator.free([9])  # 抛出 ValueError: bad id 9",
        "# 失败：allocate(0) 应返回 0 个 id，实际得到 [1]",
        "got = len(ids)",
        "expected = 3",
        'assert got == expected, f"应为 {expected!r}，实际为 {got!r}"',
    ]
    assert field_in("en", data, str(script)) == str(script)
    assert field_in("zh", data, "other code") == "other code"  # a record that does not fit it


def test_a_counterexamples_last_assert_says_its_message_in_chinese() -> None:
    transcript = Transcript("submission")
    transcript.record("allocator.free([8])", "-> None")
    transcript.fail_to_raise(ValueError)
    missed = transcript.render()
    assert missed.split("\n")[-1] == (
        'assert raises(ValueError, lambda: allocator.free([8])), "expected ValueError, got no '
        'exception"'
    )
    assert field_in("zh", field_record(missed), missed).split("\n")[-1] == (
        "assert raises(ValueError, lambda: allocator.free([8])), "
        '"应抛出 ValueError，实际没有抛出异常"'
    )
    transcript = Transcript("submission")
    transcript.record("allocator.allocate(0)", "-> [1]")
    plain = transcript.render(said("allocate(0) must return []"))
    assert field_in("zh", field_record(plain), plain).split("\n")[-1] == (
        "assert False, 'allocate(0) 应返回 []'"
    )


@pytest.mark.parametrize("op", sorted(ASSERTS))
def test_every_assert_message_of_a_counterexample_has_its_chinese(op: str) -> None:
    _, message = ASSERTS[op]
    assert fields(CHINESE[message]) == fields(message)


def test_the_engines_message_crosses_the_wire_by_id() -> None:
    """The worker sends an `EngineError`'s record beside its text (`worker.error_reply`); the
    grading process keeps it where it says what the text says, and never where it does not."""
    error = stop("the scheduler has not finished the trace after {steps} steps", steps=40)
    info = {"type": "EngineError", "builtin": "Exception", "message": str(error),
            "traceback": "", "said": error.said}  # fmt: skip
    assert text_in("zh", remote_error(info).message) == "调度器在 40 步之后仍没有处理完这组请求"
    forged = remote_error(info | {"message": "something else"})
    assert text_in("zh", forged.message) == "something else"


def golden(name: str) -> dict:
    """A golden report (`tests/end_to_end/golden`), in Chinese, with what it leaves out (times,
    machine facts, Hypothesis' notes, the lines of the candidate's files a failure raised at)
    filled in."""
    report = json.loads((GOLDEN / name).read_text())
    for part in report["parts"].values():
        part["seconds"] = 1.0
        for check in part["checks"]:
            check |= {"seconds": 0.5, "hypothesis": ""}  # its notes are Hypothesis' own words
            if check["raised_at"]:
                check["raised_at"] |= {"line": 1, "code": "return self.free_blocks[0]"}
    report["code"] = [
        {
            "file": file["file"],
            "excerpts": [[1, "    return self.free_blocks[0]  # the candidate's comment"]],
            "marks": [[1, [check for checks in file["checks"] for check in checks]]],
        }
        for file in report["code"]
    ]
    for row in report["benchmarks"]:
        row |= {"candidate_seconds": 1e-3, "reference_seconds": 1e-3, "ratio": 1.0}
    report["environment"] |= {"device": "cpu", "python": "3.11.9"}
    report["submission"] |= {
        "name": "candidate_1",  # the candidate's own name for it
        "path": "/tmp/candidate_1",
        "files": dict.fromkeys(report["submission"]["files"], "ab" * 32),
    }
    return report | {"language": "zh", "started_at": "2025-01-01T12:00:00+0000", "seconds": 9.5}


GOLDEN_REPORTS = sorted(path.name for path in GOLDEN.glob("*.json"))


@pytest.mark.parametrize("name", GOLDEN_REPORTS)
def test_a_chinese_report_of_a_real_grading_has_no_english_words(name: str) -> None:
    """Where a flag comes from (`similarity`: a source's id, which report.html shows as code)
    is no English word."""
    report = golden(name)
    markdown = report_markdown(report)
    exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
    text = markdown_kit_words(markdown, tr("zh", "environment_heading"), exempt)
    sources = {flag["source"] for flag in report["integrity"]}
    assert [word for word in english_words(text) if word not in sources] == [], text


@pytest.mark.parametrize("name", GOLDEN_REPORTS)
def test_a_chinese_summary_of_a_real_grading_has_no_english_words(
    name: str, tmp_path: Path
) -> None:
    summary = "\n".join(summary_lines(golden(name), tmp_path))
    text = summary_kit_words(summary, tr("zh", "see_counterexample"))
    assert english_words(text) == [], text


def candidate_kit_grading(name: str) -> dict:
    """A golden report as the candidate kit would give it: the last check of its first part
    skipped, its points graded by the hiring team's kit."""
    report = golden(name)
    part = next(iter(report["parts"].values()))
    check = part["checks"][-1]
    check |= {"status": "skipped", "message": "runs only in the full kit: the answer key it is "
              "compared with is absent", "points": 0}  # fmt: skip
    part["ungraded"] = [
        {
            "id": "full_kit",
            "reason": "graded by the hiring team's kit",
            "points": check["max_points"],
        }
    ]
    part["ungraded_points"] = check["max_points"]
    return report


@pytest.mark.parametrize("name", GOLDEN_REPORTS)
def test_a_chinese_report_keeps_one_punctuation_style(name: str, tmp_path: Path) -> None:
    """Full-width marks around Chinese words and no space beside them, in report.md, the page
    and the summary, of the full kit's report and of the candidate kit's."""
    for report in (golden(name), candidate_kit_grading(name)):
        exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
        markdown = markdown_kit_words(
            report_markdown(report), tr("zh", "environment_heading"), exempt
        )
        summary = "\n".join(summary_lines(report, tmp_path))
        for text in (markdown, html_text(report_html(report)), summary):
            assert slips(text) == [], text


def test_the_failed_checks_of_a_real_grading_are_all_translated() -> None:
    report = golden("fork_without_incref.json")
    shown = in_language(report, "zh")
    for part_id, part in report["parts"].items():
        for check, translated in zip(
            part["checks"], shown["parts"][part_id]["checks"], strict=True
        ):
            if check["status"] == "failed":
                assert translated["message"] != check["message"]
                assert "失败：" in translated["counterexample"]
    assert shown["parts"]["scheduler"]["note"] == (
        "用套件的参考实现 block_allocator.py 和 kv_cache_manager.py 代替你的来评分"
    )
    assert report["parts"]["scheduler"]["note"].startswith("scored with")  # a copy, untouched


def test_how_it_ran_names_the_profile_and_a_missing_seed_in_chinese() -> None:
    isolation = recorded(Isolation("bwrap", "bwrap 0.8").as_report())
    report = golden("answer_key.json") | {"isolation": isolation}
    report["environment"]["seed"] = None
    line = how_it_ran(report, "zh")
    assert "快速模式" in line
    assert "随机种子：未指定" in line
    assert line.endswith("已隔离：每个工作进程都在各自的命名空间中运行（bwrap 0.8）。")
    assert "profile quick, seed none" in how_it_ran(report, "en")
