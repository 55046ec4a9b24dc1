"""The report writers and the summary: all five files, hostile strings kept inert, formats that
tools can read, the sections that only some reports have, both languages, what to look at first."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader import scan
from grader.report.formats import code_anchor, run_in, score_line
from grader.report.i18n import LANGUAGES, tr
from grader.report.markdown import fence
from grader.report.model import bounded
from grader.report.summary import summary_lines
from grader.report.writers import write_all
from grader.ungraded import REASONS

FILES = ("report.json", "report.md", "report.html", "results.json", "junit.xml")
HOSTILE = "<script>alert(1)</script> & co"
COUNTEREXAMPLE = f"allocator = BlockAllocator(4)\nallocator.free([3, 3])  # {HOSTILE}"
GRADER_ERROR = "the grader failed: Traceback (most recent call last):\nRuntimeError: pytest broke"


def check(part: str, name: str, status: str, points: float, max_points: float, **fields) -> dict:
    empty = {"message": "", "counterexample": "", "hypothesis": "", "traceback": ""}
    return {
        "id": f"{part}/{name}",
        "part": part,
        "name": name,
        "status": status,
        "points": points,
        "max_points": max_points,
        "seconds": 0.25,
        **empty,
        **fields,
    }


def part(title: str, checks: list[dict], max_score: float, **extra) -> dict:
    """A part as `grade.score_parts` writes it; `ungraded` (its points not graded here, by
    reason) goes in `extra` and sums to `ungraded_points`."""
    score = sum(check["points"] for check in checks)
    ungraded = extra.pop("ungraded", [])
    return {
        "title": title,
        "score": score,
        "max_score": max_score,
        "ungraded_points": sum(item["points"] for item in ungraded),
        "ungraded": ungraded,
        "seconds": 1.0,
        "checks": checks,
        **extra,
    }


FULL_KIT = "graded by the hiring team's kit"


def report(parts: dict[str, dict], **fields) -> dict:
    return {
        "score": sum(part["score"] for part in parts.values()),
        "max_score": sum(part["max_score"] for part in parts.values()),
        "parts": parts,
        "benchmarks": [],
        "integrity": [],
        "ignored_files": [],
        "errors": [],
        "environment": {
            "device": "cpu",
            "python": "3.11.9",
            "platform": "Linux",
            "cpu_count": 2,
            "torch": "2.13.0",
            "triton": None,
            "hypothesis": "6.170.17",
            "pytest": "9.2.0",
            "profile": "quick",
            "seed": 7,
            "parts": list(parts),
        },
        "submission": {
            "name": "candidate<i>",
            "path": "/tmp/candidate",
            "files": {"block_allocator.py": "ab" * 32},
        },
        "started_at": "2025-01-01T12:00:00+0000",
        "seconds": 12.5,
        **fields,
    }


def failing_report() -> dict:
    allocator = [
        check("allocator", "allocate_gives_distinct_ids", "passed", 5, 5),
        check(
            "allocator",
            "free_is_atomic",
            "failed",
            0,
            5,
            message="free([3, 3]) freed block 3 twice",
            severity="safety",
            counterexample=COUNTEREXAMPLE,
            hypothesis="@reproduce_failure('6.170.17', b'AXicY2BgAAAABAAB')",
            raised_at={
                "file": "block_allocator.py",
                "line": 2,
                "function": "free",
                "code": f"x = 1  # {HOSTILE}",
            },
        ),
        check(
            "allocator",
            "bad_ids_raise",
            "error",
            0,
            3,
            message="the grader failed in this check: KeyError: '\x1b[31m<b>\udcff'",
            traceback="Traceback (most recent call last):\nKeyError: '<b>'",
        ),
        check(
            "allocator",
            "timed_against_reference",
            "skipped",
            0,
            2,
            message="runs only in the full kit",
        ),
    ]
    raised_in = {  # the candidate's file, as `report.code` shows it
        "file": "block_allocator.py",
        "excerpts": [[1, f"def free(self, ids):\n    x = 1  # {HOSTILE}\n    return x"]],
        "marks": [[2, ["allocator/free_is_atomic"]]],
    }
    return report(
        {
            "allocator": part(
                "Part 1: the allocator",
                allocator,
                13,
                ungraded=[{"reason": FULL_KIT, "points": 2}],
                provisional="checks skipped (runs only in the full kit)",
            ),
            "decode": part("Part 2: decode", [check("decode", "grows", "passed", 20, 20)], 20),
            "kernel": part("Part 4: the kernel", [], 0, note="not graded by this version"),
        },
        benchmarks=[
            {
                "name": f"free_100k {HOSTILE}",
                "part": "allocator",
                "candidate_seconds": 0.0042,
                "reference_seconds": 0.001,
                "ratio": 4.2,
                "limit": 3.0,
                "rounds": 5,
                "passed": False,
            }
        ],
        integrity=[
            {
                "source": "scan",
                "file": "<img src=x onerror=alert(2)>.py",
                "line": 3,
                "message": "imports os",
            }
        ],
        ignored_files=["notes<b>.txt"],
        errors=[GRADER_ERROR],
        code=[raised_in],
    )


def full_marks_report() -> dict:
    return report(
        {
            "allocator": part(
                "Part 1: the allocator", [check("allocator", "a", "passed", 15, 15)], 15
            ),
            "decode": part("Part 2: decode", [check("decode", "grows", "passed", 20, 20)], 20),
        }
    )


def new_sections_report(language: str = "en") -> dict:
    """A report with every section that only some reports have: GPU kernel timings, a graded
    part with a note, a provisional part, the engine check, the scheduling comparison."""
    kernel = [
        check("kernel", "matches_the_reference", "passed", 17, 17),
        check("kernel", "decode_speed", "failed", 0, 8, message="4.7x the reference's time"),
        check("kernel", "long_context_speed", "skipped", 0, 5, message="needs a CUDA device"),
    ]
    scheduler = [check("scheduler", "matches_the_reference", "passed", 10, 10)]
    cuda = [{"reason": "needs a CUDA device", "points": 5}]
    return report(
        {
            "kernel": part("Part 4: the kernel", kernel, 25, ungraded=cuda, provisional="x"),
            "scheduler": part("Part 5: the scheduler", scheduler, 10, note=f"note {HOSTILE}"),
        },
        language=language,
        benchmarks=[
            {
                "name": f"paged_attention_decode, float16, head_dim {size}",
                "part": "kernel",
                "candidate_seconds": 4.7e-4,
                "reference_seconds": 1e-4,
                "ratio": 4.7,
                "limit": 3.0,
                "rounds": 20,
                "passed": False,
            }
            for size in (64, 128)
        ],
        integration={
            "status": "failed",
            "message": f"tokens differ at step 9 {HOSTILE}",
            "figures": {"steps": 41, HOSTILE: "0.5"},
        },
        sections={
            "scheduling": {
                "trace": [[0, 5, 3], [1, 4, 2]],
                "num_blocks": 8,
                "block_size": 4,
                "max_num_seqs": 2,
                "tokens_per_step": [1, 2, 2, 1],
                "static_tokens_per_step": [1, 1, 1, 1, 1],
            }
        },
    )


def written(report: dict, folder: Path) -> dict[str, str]:
    write_all(report, folder)
    return {name: (folder / name).read_text(encoding="utf-8") for name in FILES}


@pytest.mark.parametrize("make_report", [failing_report, full_marks_report])
def test_writes_all_five_files_into_a_new_folder(tmp_path: Path, make_report) -> None:
    write_all(make_report(), tmp_path / "out" / "nested")
    files = list((tmp_path / "out" / "nested").iterdir())
    assert sorted(path.name for path in files) == sorted(FILES)
    for path in files:  # the failing report's message has an escape and a lone surrogate
        assert b"\x1b" not in path.read_bytes()
        path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("make_report", [failing_report, full_marks_report])
def test_report_json_round_trips(tmp_path: Path, make_report) -> None:
    """As `bounded` leaves it: the failing report's escape and surrogate do not come back."""
    report = json.loads(written(make_report(), tmp_path)["report.json"])
    assert report == bounded(make_report())
    assert bounded(report) == report
    if make_report is failing_report:
        message = report["parts"]["allocator"]["checks"][2]["message"]
        assert message.endswith("KeyError: '[31m<b>\ufffd'")


def test_html_escapes_every_string_from_the_report(tmp_path: Path) -> None:
    html = written(failing_report(), tmp_path)["report.html"]
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in html
    assert "candidate&lt;i&gt;" in html
    assert "notes&lt;b&gt;.txt" in html


@pytest.mark.parametrize("make_report", [failing_report, full_marks_report, new_sections_report])
def test_html_is_self_contained(tmp_path: Path, make_report) -> None:
    html = written(make_report(), tmp_path)["report.html"]
    assert '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';' in html
    html = html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # a name, never fetched
    for reference in ("http://", "https://", "<link", "<img", "<script", "url(", "@import"):
        assert reference not in html


def test_html_puts_grader_errors_first_and_notes_in_place_of_bars(tmp_path: Path) -> None:
    html = written(failing_report(), tmp_path)["report.html"]
    assert 'class="box errors"' in html
    assert html.index("RuntimeError: pytest broke") < html.index('id="part-allocator"')
    # The total's two (at the top, in the table), allocator's and decode's; the kernel part was
    # not graded: its note stands in place of its bar.
    assert html.count('class="bar') == 4
    assert "not graded by this version" in html
    assert html.count('<article class="check') == 2  # failed and error; not skipped, not passed
    assert "runs only in the full kit" in html  # the skipped check, listed with its reason
    assert 'id="check-allocator-free_is_atomic"' in html  # the summary points there


def test_html_of_full_marks_has_full_bars_and_no_failures(tmp_path: Path) -> None:
    html = written(full_marks_report(), tmp_path)["report.html"]
    assert html.count('class="bar full') == 4  # the total's two, and one per part
    assert "<article" not in html
    assert 'class="box errors"' not in html
    assert 'id="diagnosis"' not in html


def test_each_report_opens_with_the_score_the_diagnosis_then_the_safety_failures(
    tmp_path: Path,
) -> None:
    files = written(failing_report(), tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    said = "free_is_atomic (safety)"
    assert f"<strong>Diagnosis: </strong>{said}</p>" in html
    assert html.index('id="total"') < html.index('id="diagnosis"') < html.index('id="safety"')
    title, total, out_of, diagnosis = markdown.split("\n\n")[:4]
    assert title.startswith("# Grade report: ")
    assert total.startswith("**Total: 25 / 33**")
    assert out_of == "25 of 33 points graded here; out of 35 in the hiring team's kit"
    assert diagnosis == f"**Diagnosis:** {said}"
    assert markdown.index("## Safety failures (1)") < markdown.index("## Parts")


def test_junit_parses_with_one_suite_per_part_and_the_right_counts(tmp_path: Path) -> None:
    root = ET.fromstring(written(failing_report(), tmp_path)["junit.xml"].encode())
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert list(suites) == ["allocator", "decode", "kernel"]
    counts = {
        key: suites["allocator"].get(key) for key in ("tests", "failures", "errors", "skipped")
    }
    assert counts == {"tests": "4", "failures": "1", "errors": "1", "skipped": "1"}
    assert suites["kernel"].get("tests") == "0"
    failure = suites["allocator"].find("testcase[@name='free_is_atomic']/failure")
    assert failure.get("message") == "free([3, 3]) freed block 3 twice"
    assert COUNTEREXAMPLE in failure.text
    assert "reproduce_failure" in failure.text
    error = suites["allocator"].find("testcase[@name='bad_ids_raise']/error")
    assert "KeyError: '<b>'" in error.text
    assert suites["allocator"].find("testcase[@name='timed_against_reference']/skipped") is not None
    assert {case.get("classname") for case in root.iter("testcase")} == {
        "grader.allocator",
        "grader.decode",
    }


def test_results_json_has_the_total_and_each_checks_score(tmp_path: Path) -> None:
    results = json.loads(written(failing_report(), tmp_path)["results.json"])
    assert results["score"] == 25
    assert results["execution_time"] == 12.5
    tests = {test["name"]: test for test in results["tests"]}
    assert list(tests) == [
        "allocator/allocate_gives_distinct_ids",
        "allocator/free_is_atomic",
        "allocator/bad_ids_raise",
        "allocator/timed_against_reference",
        "decode/grows",
    ]
    scores = {
        name: (test["score"], test["max_score"], test.get("status")) for name, test in tests.items()
    }
    assert scores == {
        "allocator/allocate_gives_distinct_ids": (5, 5, "passed"),
        "allocator/free_is_atomic": (0, 5, "failed"),
        "allocator/bad_ids_raise": (0, 3, "failed"),
        "allocator/timed_against_reference": (0, 0, None),
        "decode/grows": (20, 20, "passed"),
    }
    assert COUNTEREXAMPLE in tests["allocator/free_is_atomic"]["output"]
    assert tests["allocator/timed_against_reference"]["output"] == "runs only in the full kit"
    assert "RuntimeError: pytest broke" in results["output"]
    assert results["output"].startswith(f"Score: 25 / 33 (2 more {FULL_KIT})\n")
    assert (
        f"allocator: 5 / 13 (1 of 3 checks passed, 1 skipped; 2 more {FULL_KIT}; provisional:"
        in (results["output"])
    )


def test_markdown_shows_the_counterexample_in_a_python_fence(tmp_path: Path) -> None:
    markdown = written(failing_report(), tmp_path)["report.md"]
    assert f"```python\n{COUNTEREXAMPLE}\n```" in markdown
    assert markdown.index("RuntimeError: pytest broke") < markdown.index("## Parts")
    assert "not graded by this version" in markdown
    assert "allocate_gives_distinct_ids" in markdown  # the passed check, listed by name


def test_points_not_graded_here_show_beside_the_score_in_every_report(tmp_path: Path) -> None:
    """A skipped check keeps its points; the part, the total and the check's line say where
    they are graded, in the page, the Markdown and the summary alike."""
    files = written(failing_report(), tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    assert (
        "**Total: 25 / 33** `████████░░` 76%\n\n25 of 33 points graded here; out of 35 in "
        in markdown
    )
    assert "## Part 1: the allocator (5 / 13)\n\n*A block allocator" in markdown
    assert f"\n\n*2 more {FULL_KIT}*\n\n" in markdown
    assert f"1 of 3 checks passed, 1 skipped; 2 more {FULL_KIT}; provisional:" in markdown
    line = f"- `timed_against_reference` (2 points, {FULL_KIT}): runs only in the full kit"
    assert line in markdown
    escaped = FULL_KIT.replace("'", "&#39;")  # as autoescape writes it
    assert html.count(f'class="ungraded">2 more {escaped}<') == 3  # row, total, part
    assert (
        'id="out-of">25 of 33 points graded here; out of 35 in the hiring team&#39;s kit<' in html
    )
    assert f"<code>timed_against_reference</code> (2 points, {escaped}): runs only" in html
    decode = html.split('id="part-decode"')[1].split("</section>")[0]
    assert 'class="ungraded"' not in decode  # a part with nothing skipped says nothing


def test_points_that_need_cuda_say_so_once(tmp_path: Path) -> None:
    files = written(new_sections_report(), tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    for text in (html, markdown):
        assert "5 more not graded here: needs a CUDA device" in text
    assert "<code>long_context_speed</code> (5 points, needs a CUDA device)</li>" in html
    assert "- `long_context_speed` (5 points, needs a CUDA device)\n" in markdown
    lines = summary_lines(new_sections_report(), tmp_path)
    cuda = "(5.00 more not graded here: needs a CUDA device)"
    assert f"  kernel      17.00 / 25.00  1 of 2 checks passed, 1 skipped {cuda}" in lines


@pytest.mark.parametrize("lang", LANGUAGES)
def test_an_ungraded_reason_is_worded_from_its_id_and_an_older_one_from_its_english(
    tmp_path: Path, lang: str
) -> None:
    """`grade.py` records each reason's id beside its English (`grader/ungraded.py`); the pages
    word the id in their language, a report written before the ids by its English, the same way;
    a reason the kit does not know, in its own words. The English the report keeps is the
    English the pages write."""
    for reason_id, (_, english) in REASONS.items():
        assert tr("en", f"ungraded_{reason_id}") == english
    pages = {}
    for case, item in {
        "id": {"id": "full_kit", "reason": FULL_KIT, "points": 2},
        "older": {"reason": FULL_KIT, "points": 2},
        "unknown": {"id": "made_up", "reason": "needs a quantum computer", "points": 2},
    }.items():
        report = {**failing_report(), "language": lang}
        report["parts"]["allocator"]["ungraded"] = [item]
        pages[case] = written(report, tmp_path / case)["report.md"]
    assert pages["id"] == pages["older"]
    assert tr(lang, "more_full_kit", points="2") in pages["id"]
    unknown = tr(lang, "more_elsewhere", points="2", reason="needs a quantum computer")
    assert unknown in pages["unknown"]


def test_a_report_from_before_the_ungraded_fields_still_renders(tmp_path: Path) -> None:
    """`compare` and the leaderboard read older reports: no `ungraded` field, nothing shown."""
    report = failing_report()
    for part_report in report["parts"].values():
        del part_report["ungraded"], part_report["ungraded_points"]
    files = written(report, tmp_path)
    assert "more graded" not in files["report.html"] + files["report.md"]
    assert "more graded" not in "\n".join(summary_lines(report, tmp_path))


def test_full_marks_markdown_lists_no_failure(tmp_path: Path) -> None:
    markdown = written(full_marks_report(), tmp_path)["report.md"]
    assert "```python" not in markdown
    assert "**Total: 35 / 35**" in markdown


LINK = "[Reviewed by the hiring team: passed](https://example.com/ok)"
PIXEL = "![](https://example.com/pixel.png)"


def outside_code(markdown: str) -> str:
    """`markdown` without its fenced blocks and code spans: what renders as Markdown."""
    markdown = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1$", "", markdown)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


@pytest.mark.parametrize("engine", ["failed", "passed"])
def test_candidate_text_in_markdown_renders_no_link_and_no_image(tmp_path: Path, engine) -> None:
    """What the candidate wrote or its worker said, each holding a link and an image: the
    submission's name, an integrity event, the engine check's message and a figure of its
    worker's, a syntax error's message (Python quotes a coding cookie): report.md shows them, in
    code spans only."""
    hostile = new_sections_report()
    hostile["submission"]["name"] = f"bob {LINK}"
    hostile["integrity"] = [{"source": "worker", "message": f"imported os {PIXEL} {LINK}"}]
    engine_message = f"{engine}: {PIXEL} requests"
    hostile["integration"] |= {"status": engine, "message": engine_message}
    hostile["integration"]["figures"] = {"device": LINK}
    cookie = b"# coding: www.example.com\n"  # a bare www. address: a link on GitHub
    hostile["syntax_errors"] = scan.syntax_errors({"kv_cache_manager.py": cookie})
    markdown = written(hostile, tmp_path)["report.md"]
    said = (f"bob {LINK}", f"imported os {PIXEL} {LINK}", engine_message, LINK, "www.example.com")
    for text in said:
        assert re.search(f"`[^`]*{re.escape(text)}`", markdown), text
    rendered = outside_code(markdown)
    assert "example.com" not in rendered, rendered


def test_the_line_a_failure_raised_at_shows_in_both_reports_as_code(tmp_path: Path) -> None:
    """The candidate's line, in the failed check and in its file's view, marked with the check:
    escaped in the page, in code only in report.md (the line holds a link and an image)."""
    hostile = failing_report()
    check = hostile["parts"]["allocator"]["checks"][1]
    check["raised_at"]["code"] = f"x = 1  # {LINK} {PIXEL}"
    hostile["code"][0]["excerpts"] = [[1, f"def free(self, ids):\n    x = 1  # {LINK} {PIXEL}"]]
    files = written(hostile, tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    anchor = code_anchor("block_allocator.py", 2)
    assert html.count(f'id="{anchor}"') == 1
    assert f'href="#{anchor}"' in html
    assert 'href="#check-allocator-free_is_atomic">allocator/free_is_atomic</a>' in html
    assert "Raised in your code: `block_allocator.py`, line 2, in `free`" in markdown
    assert f"> 2 |     x = 1  # {LINK} {PIXEL}" in markdown
    assert "- 2: `allocator/free_is_atomic`" in markdown
    assert "### `block_allocator.py`: raised at line 2\n" in markdown
    assert "example.com" not in outside_code(markdown)


def test_fence_outlasts_backticks_in_the_text() -> None:
    assert fence("x = 1\n# ```\n", "python") == "````python\nx = 1\n# ```\n````"


def test_new_sections_show_in_both_reports_and_stay_escaped(tmp_path: Path) -> None:
    files = written(new_sections_report(), tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    assert "<script" not in html
    assert html.count("<svg") == 2  # the kernel's timing chart and the scheduling chart
    # The shared ", "-field goes to the chart's title; the bars keep what differs.
    assert "Part 4: the kernel: paged_attention_decode, float16</text>" in html
    assert ">head_dim 64</tspan>" in html
    assert 'class="bar' in html.split('id="part-scheduler"')[0]  # a note does not hide the bar
    assert "note &lt;script&gt;" in html
    assert html.count("provisional: x") == 1  # the parts table; the part's own says it by a tag
    assert '<span class="tag provisional">provisional</span>x</p>' in html
    assert "tokens differ at step 9" in html
    assert "this scheduler: 4 steps, 6 tokens, 1.50 tokens per step" in html
    assert "static batching: 5 steps, 5 tokens, 1.00 tokens per step" in html
    for text in ("tokens differ at step 9", "provisional: x", "note &lt;script&gt;", "4.70x"):
        assert text in markdown
    assert "provisional: provisional" not in html + markdown


def test_a_scheduling_run_alone_is_plotted_alone_and_an_unfinished_one_said(
    tmp_path: Path,
) -> None:
    report = new_sections_report()
    section = report["sections"]["scheduling"]
    del section["static_tokens_per_step"]
    section["drained"] = False
    html = written(report, tmp_path)["report.html"]
    assert html.count("<polyline") == 1
    assert "static batching:" not in html  # no figures line for the missing run
    assert "did not finish every request" in html


def test_a_report_without_the_new_sections_leaves_them_out(tmp_path: Path) -> None:
    files = written(full_marks_report(), tmp_path)
    for section in ('id="integration"', 'id="scheduling"', "<svg"):
        assert section not in files["report.html"]
    assert "No timings in this run." in files["report.html"]


def test_chinese_report_translates_the_kits_words_not_the_checks(tmp_path: Path) -> None:
    fields = {"language": "zh"}
    files = written({**failing_report(), **fields}, tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    assert '<html lang="zh-CN">' in html
    for words in ("各部分", "未通过", "反例", "完整性标记", "运行环境"):
        assert words in html
        assert words in markdown
    assert "free([3, 3]) freed block 3 twice" in html  # the check's own message, as written
    assert "Parts</h2>" not in html
    for text in (html, markdown):
        assert "另有 2 分由招聘团队的完整套件评分" in text
    assert "- `timed_against_reference`（2 分，由招聘团队的完整套件评分）" in markdown  # noqa: RUF001


def test_summary_points_at_the_first_failure_with_its_counterexample(tmp_path: Path) -> None:
    report = failing_report()
    lines = summary_lines(report, tmp_path)
    text = "\n".join(lines)
    assert (
        f"  allocator    5.00 / 13.00  1 of 3 checks passed, 1 skipped (2.00 more {FULL_KIT})"
        in lines
    )
    assert f"  total       25.00 / 33.00 (2.00 more {FULL_KIT})" in lines
    assert "  kernel          -          not graded by this version" in lines
    first = lines.index("What to look at first:")
    assert text.index("RuntimeError: pytest broke") < text.index("What to look at first:")
    assert lines[first + 1] == "  Part 1: the allocator: the check free_is_atomic failed:"
    assert lines[first + 2] == "      free([3, 3]) freed block 3 twice"
    assert "allocator.free([3, 3])  # " + HOSTILE in lines  # as written, to paste into Python
    assert f"{(tmp_path / 'report.html').as_uri()}#check-allocator-free_is_atomic" in text
    assert "  (1 more check did not pass in this part; it is in the report.)" in lines
    assert "  1 integrity flag for a reviewer: see the report." in lines
    assert lines[-1].startswith(f"Report: {tmp_path / 'report.html'}")


def test_summary_points_first_at_the_most_serious_failure_as_the_report_does(
    tmp_path: Path,
) -> None:
    """A safety failure in a later part comes before a contract failure in an earlier one; among
    the most serious, one with a counterexample; among equals, the earliest part."""
    contract = check(
        "allocator",
        "refuses_negative",
        "failed",
        0,
        5,
        severity="contract",
        message="allocate(-1) returned []",
        counterexample="allocator.allocate(-1)",
    )
    safety = [
        check("decode", "grows", "failed", 0, 5, severity="safety", message="no script"),
        check("decode", "keeps_rows", "failed", 0, 5, severity="safety", message="rows lost",
              counterexample="manager.free(req)"),
    ]  # fmt: skip
    report = failing_report()
    report["parts"] = {
        "allocator": part("Part 1: the allocator", [contract], 5),
        "decode": part("Part 2: decode", safety, 10),
    }
    lines = summary_lines(report, tmp_path)
    first = lines.index("What to look at first:")
    assert lines[first + 1] == "  Part 2: decode: the check keeps_rows failed:"
    assert "manager.free(req)" in lines
    report["parts"]["decode"]["checks"] = [dict(safety[1], severity="contract")]
    lines = summary_lines(report, tmp_path)
    assert lines[first + 1] == "  Part 1: the allocator: the check refuses_negative failed:"


def test_summary_lists_unstarted_and_provisional_parts_and_the_engine_check(tmp_path: Path) -> None:
    stub = [
        check("decode", "grows", "failed", 0, 10, message="not implemented: allocate raises"),
        check("decode", "shrinks", "failed", 0, 10, message="not submitted: x.py was not"),
    ]
    report = new_sections_report()
    report["parts"]["decode"] = part("Part 2: decode", stub, 20)
    text = "\n".join(summary_lines(report, tmp_path))
    assert "Part 4: the kernel: the check decode_speed failed:" in text  # not the stub's
    assert "Not implemented yet (a stub or a missing file): decode." in text
    assert "kernel: provisional: x" in text
    assert "provisional: provisional" not in text
    assert "scheduler: note" not in text  # a part's note is for the report, not for this list
    assert "End-to-end engine check (not scored): failed. tokens differ at step 9" in text


def test_summary_of_full_marks_says_so_and_a_long_counterexample_is_left_to_the_report(
    tmp_path: Path,
) -> None:
    """Cut, a counterexample would lose its setup or its failing assert: shown whole, with
    where it runs, or only named, with the report's link."""
    assert "  Every graded check passed." in summary_lines(full_marks_report(), tmp_path)
    report = failing_report()
    lines = summary_lines(report, tmp_path)
    assert f"  {run_in(report, 'en')}" in lines
    script = report["parts"]["allocator"]["checks"][1]["counterexample"].splitlines()
    assert script[-1] in lines
    long = "\n".join(f"step_{i}()" for i in range(60))
    report["parts"]["allocator"]["checks"][1]["counterexample"] = long
    lines = summary_lines(report, tmp_path)
    assert not any("step_" in line for line in lines)
    assert f"  {tr('en', 'counterexample_in_report', count=60)}" in lines
    assert any("report.html#" in line for line in lines)


def test_summary_in_chinese(tmp_path: Path) -> None:
    report = {**failing_report(), "language": "zh"}
    lines = summary_lines(report, tmp_path)
    assert "先看这里：" in lines  # noqa: RUF001
    first = "  第 1 部分：KV cache 块分配器：检查 free_is_atomic 未通过："  # noqa: RUF001
    assert first in lines
    assert "      free([3, 3]) freed block 3 twice" in lines  # the check's message, as written
    assert any(line.startswith("  总分       ") for line in lines)  # two columns per character
    more = "（另有 2.00 分由招聘团队的完整套件评分）"  # noqa: RUF001
    assert f"  allocator    5.00 / 13.00  3 项检查通过了 1 项，1 项跳过{more}" in lines  # noqa: RUF001


def test_points_left_to_another_parts_rule_are_not_counted_in_what_the_score_is_out_of() -> None:
    """Points a fuller kit grades are part of what the score is out of; those of checks left to
    another part's rule, or of timings left to the check of their results, are not (no kit grades
    them), and are said apart, in either language."""
    sharing = {"ungraded": [{"id": "other_part", "reason": "", "points": 3.64}]}
    kernel = {"ungraded": [{"id": "cuda", "reason": "needs a CUDA device", "points": 9}]}
    alone = {"score": 80, "max_score": 96.36, "parts": {"sharing": sharing}}
    assert score_line(alone, "en") == (
        "3.64 points not graded: their checks fail on another part's rule, which that part grades"
    )
    both = {"score": 71, "max_score": 87.36, "parts": {"sharing": sharing, "kernel": kernel}}
    assert score_line(both, "en") == (
        "71 of 87.36 points graded here; out of 96.36 with a CUDA device; 3.64 points not graded: "
        "their checks fail on another part's rule, which that part grades"
    )
    assert score_line(both, "zh").startswith("在此评分 71 / 87.36 分")
    assert "3.64 分不计" in score_line(both, "zh")
    caching = {"ungraded": [{"id": "not_timed", "reason": "", "points": 2.61}]}
    timings = {"score": 90, "max_score": 93.75, "parts": {"sharing": sharing, "caching": caching}}
    assert score_line(timings, "en") == (
        "3.64 points not graded: their checks fail on another part's rule, which that part "
        "grades; 2.61 points not graded: timings whose results differ from the contract, which "
        "another check of their part charges"
    )
