# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The grader's own words in Chinese (`messages.py`, the catalog `checks.po`): every message the
checks write has a template; a message is translated part by part, the candidate's text left as
it is; a counterexample's comments are translated, its code not; and a Chinese report or summary
of real gradings (the golden reports) holds no English but code, identifiers and the candidate's
text."""

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
from grader.report.messages import (
    entries,
    in_language,
    templates,
    translated_counterexample,
    translated_message,
)
from grader.report.render import report_html, report_markdown
from grader.report.summary import summary_lines
from grader.sandbox.transcript import ASSERTS
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
MESSAGES, COMMENTS = entries("zh", None), entries("zh", "comment")  # checks.po's, by English
ASSERT_FSTRINGS = entries("zh", "assert")
NOT_MESSAGES = {  # strings of the checks that read as prose but that no message shows
    *("bad id", "free blocks"),  # labels of values hypothesis draws, in its own notes
    *("candidate small", "candidate large", "reference small", "reference large"),  # keys
}


def written_strings(source: str) -> list[str]:
    """Each string literal and f-string of `source` that is not a docstring, an f-string's parts
    each as `SAMPLE`."""
    tree = ast.parse(source)
    skipped = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
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
    """The messages `source` writes that the catalog leaves in English, whole or in part."""
    written = written_strings(source)
    messages = [text for text in written if PROSE.search(text) and not is_code(text)]
    return [
        text
        for text in messages
        if text not in NOT_MESSAGES
        and (
            translated_message("zh", text) == text or english_words(translated_message("zh", text))
        )
    ]


@pytest.mark.parametrize(
    "path", sorted(CHECKS.rglob("*.py")), ids=lambda path: str(path.relative_to(CHECKS))
)
def test_every_message_of_the_checks_has_a_chinese_template(path: Path) -> None:
    assert untranslated(path.read_text()) == []


def test_a_new_message_without_a_template_is_found() -> None:
    source = 'def check(x):\n    assert x, f"the pool lost {x} blocks on the way"\n'
    assert untranslated(source) == ["the pool lost v7 blocks on the way"]
    known = 'def check(x):\n    assert x, f"allocate({x}) returned an id twice: {x}"\n'
    assert untranslated(known) == []


def fields(template: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(template) if name is not None}


@pytest.mark.parametrize("english", [*MESSAGES, *COMMENTS])
def test_each_template_has_the_same_parts_in_chinese_and_its_own_text(english: str) -> None:
    chinese = {**MESSAGES, **COMMENTS}[english]
    assert fields(chinese) == fields(english)
    assert "".join(text for text, *_ in Formatter().parse(english))  # never all parts
    assert not english_words(chinese.format(**dict.fromkeys(fields(english), SAMPLE)))


def test_a_message_is_translated_part_by_part_and_the_candidates_text_kept() -> None:
    message = (
        "free([3, 8]), with an id out of range (8), must raise ValueError, but raised "
        "RuntimeError: the same id twice"
    )
    assert translated_message("zh", message) == (
        "free([3, 8])（含越界的 id 8）应抛出 ValueError，实际抛出了 RuntimeError: the same id twice"
    )
    assert translated_message("en", message) == message
    assert translated_message("zh", "the same id twice") == "同一个 id 出现两次"
    assert translated_message("zh", "free([3, 3]) freed block 3 twice") == (
        "free([3, 3]) freed block 3 twice"  # no template: as written
    )


def test_the_most_specific_template_wins_and_lists_are_translated_item_by_item() -> None:
    message = (
        "after manager.free(req) (which raised), len(manager.free_blocks) is 3, expected 2: "
        "num_blocks (5) minus the 3 blocks the live requests hold (a call that raises must "
        "leave everything as it was)"
    )
    assert translated_message("zh", message) == (
        "执行 manager.free(req)（抛出了异常）之后，len(manager.free_blocks) 是 3，应为 2：即 "
        "num_blocks（5）减去存活请求持有的 3 个块（抛出异常的调用不得改变任何状态）"
    )
    flagged = "timing flagged for review, not rewarded: b1: 12x faster than the reference; b2: zz"
    assert translated_message("zh", flagged) == (
        "计时结果已标记待人工复核，不计分：b1：比参考实现快 12 倍；b2: zz"
    )
    chosen = templates("zh", None)
    assert chosen[0].literal_chars >= chosen[-1].literal_chars


def test_a_counterexample_keeps_its_code_and_translates_its_comments() -> None:
    code = "\n".join(
        [
            "allocator = BlockAllocator(4)",
            "allocator.allocate(2)  # -> [0, 1]",
            "with suppress(ValueError): allocator.free([9])  # raises ValueError: bad id 9",
            "out = scheduler.step()  # scheduled [0], preempted [], finished []",
            "# fails: allocate(0) must return []",
        ]
    )
    assert translated_counterexample("zh", code).split("\n") == [
        "allocator = BlockAllocator(4)",
        "allocator.allocate(2)  # -> [0, 1]",
        "with suppress(ValueError): allocator.free([9])  # 抛出 ValueError: bad id 9",
        "out = scheduler.step()  # 调度 [0]，抢占 []，完成 []",
        "# 失败：allocate(0) 应返回 []",
    ]
    assert translated_counterexample("en", code) == code


def test_a_counterexamples_last_assert_says_its_message_in_chinese() -> None:
    code = "\n".join(
        [
            "got = len(ids)",
            "expected = 3",
            'assert got == expected, f"expected {expected!r}, got {got!r}"',
            'assert raises(ValueError, lambda: allocator.free([8])), "expected ValueError, got no '
            'exception"',
            "assert False, 'allocate(0) must return []'",
        ]
    )
    assert translated_counterexample("zh", code).split("\n")[2:] == [
        'assert got == expected, f"应为 {expected!r}，实际为 {got!r}"',
        "assert raises(ValueError, lambda: allocator.free([8])), "
        "'应抛出 ValueError，实际没有抛出异常'",
        "assert False, 'allocate(0) 应返回 []'",
    ]


@pytest.mark.parametrize("op", sorted(ASSERTS))
def test_every_assert_message_of_a_counterexample_has_its_chinese(op: str) -> None:
    _, message = ASSERTS[op]
    assert message in ASSERT_FSTRINGS
    assert fields(ASSERT_FSTRINGS[message]) == fields(message)


def golden(name: str) -> dict:
    """A golden report (`tests/end_to_end/golden`), in Chinese, with what it leaves out (times,
    machine facts, Hypothesis' notes) filled in."""
    report = json.loads((GOLDEN / name).read_text())
    for part in report["parts"].values():
        part["seconds"] = 1.0
        for check in part["checks"]:
            check |= {"seconds": 0.5, "hypothesis": ""}  # its notes are Hypothesis' own words
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
    markdown = report_markdown(golden(name))
    exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
    text = markdown_kit_words(markdown, tr("zh", "environment_heading"), exempt)
    assert english_words(text) == [], text


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
    report = golden("answer_key.json") | {
        "isolation": {"description": "isolated: each worker in its own namespaces (bwrap 0.8)"}
    }
    report["environment"]["seed"] = None
    line = how_it_ran(report, "zh")
    assert "快速模式" in line
    assert "随机种子：未指定" in line
    assert line.endswith("已隔离：每个工作进程都在各自的命名空间中运行（bwrap 0.8）。")
    assert "profile quick, seed none" in how_it_ran(report, "en")
