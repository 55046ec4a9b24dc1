"""The report writers: all five files, hostile strings kept inert, formats that tools can read."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.reports import fence, write_all

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
    score = sum(check["points"] for check in checks)
    return {
        "title": title,
        "score": score,
        "max_score": max_score,
        "seconds": 1.0,
        "checks": checks,
        **extra,
    }


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
            counterexample=COUNTEREXAMPLE,
            hypothesis="@reproduce_failure('6.170.17', b'AXicY2BgAAAABAAB')",
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
    return report(
        {
            "allocator": part("Part 1: the allocator", allocator, 15),
            "decode": part("Part 2: decode", [check("decode", "grows", "passed", 20, 20)], 20),
            "kernel": part("Part 4: the kernel", [], 0, note="not graded by this version"),
        },
        benchmarks=[
            {
                "name": "free_100k",
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


def written(report: dict, folder: Path) -> dict[str, str]:
    write_all(report, folder)
    return {name: (folder / name).read_text(encoding="utf-8") for name in FILES}


@pytest.mark.parametrize("make_report", [failing_report, full_marks_report])
def test_writes_all_five_files_into_a_new_folder(tmp_path: Path, make_report) -> None:
    write_all(make_report(), tmp_path / "out" / "nested")
    assert sorted(path.name for path in (tmp_path / "out" / "nested").iterdir()) == sorted(FILES)


@pytest.mark.parametrize("make_report", [failing_report, full_marks_report])
def test_report_json_round_trips(tmp_path: Path, make_report) -> None:
    assert json.loads(written(make_report(), tmp_path)["report.json"]) == make_report()


def test_html_escapes_every_string_from_the_report(tmp_path: Path) -> None:
    html = written(failing_report(), tmp_path)["report.html"]
    assert "<script" not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in html
    assert "candidate&lt;i&gt;" in html
    assert "notes&lt;b&gt;.txt" in html


@pytest.mark.parametrize("make_report", [failing_report, full_marks_report])
def test_html_is_self_contained(tmp_path: Path, make_report) -> None:
    html = written(make_report(), tmp_path)["report.html"]
    for reference in ("http://", "https://", "<link", "<img", "<script", "url(", "@import"):
        assert reference not in html


def test_html_puts_grader_errors_first_and_notes_in_place_of_bars(tmp_path: Path) -> None:
    html = written(failing_report(), tmp_path)["report.html"]
    assert 'class="errors"' in html
    assert html.index("RuntimeError: pytest broke") < html.index('id="part-allocator"')
    assert html.count('class="bar') == 2  # allocator and decode; the kernel part has a note
    assert "not graded by this version" in html
    assert html.count('<article class="check') == 3  # failed, error, skipped; not the passed ones


def test_html_of_full_marks_has_full_bars_and_no_failures(tmp_path: Path) -> None:
    html = written(full_marks_report(), tmp_path)["report.html"]
    assert html.count('class="bar full"') == 2
    assert "<article" not in html
    assert 'class="errors"' not in html


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


def test_markdown_shows_the_counterexample_in_a_python_fence(tmp_path: Path) -> None:
    markdown = written(failing_report(), tmp_path)["report.md"]
    assert f"```python\n{COUNTEREXAMPLE}\n```" in markdown
    assert markdown.index("RuntimeError: pytest broke") < markdown.index("## Parts")
    assert "not graded by this version" in markdown
    assert "allocate_gives_distinct_ids" in markdown  # the passed check, listed by name


def test_full_marks_markdown_lists_no_failure(tmp_path: Path) -> None:
    markdown = written(full_marks_report(), tmp_path)["report.md"]
    assert "```python" not in markdown
    assert "**Score: 35 / 35**" in markdown


def test_fence_outlasts_backticks_in_the_text() -> None:
    assert fence("x = 1\n# ```\n", "python") == "````python\nx = 1\n# ```\n````"
