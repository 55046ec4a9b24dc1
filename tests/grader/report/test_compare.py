"""`python -m grader compare A B`: scores side by side with their change, only the checks that
changed (with both messages), the timings, an escaped page; exit 2 on what is not a report."""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.report import compare


def check(name: str, status: str = "passed", points: float = 5.0, message: str = "") -> dict:
    return {
        "id": f"allocator/{name}",
        "name": name,
        "status": status,
        "points": points if status == "passed" else 0.0,
        "max_points": points,
        "message": message,
    }


BEFORE = {
    "score": 15.0,
    "max_score": 15.0,
    "parts": {
        "allocator": {
            "score": 15.0,
            "max_score": 15.0,
            "checks": [check("distinct_ids"), check("errors_change_nothing", points=10.0)],
        },
        "kernel": {"score": 0.0, "max_score": 0.0, "checks": [], "note": "not graded"},
    },
    "benchmarks": [{"name": "allocate/free", "part": "allocator", "ratio": 1.1}],
    "integrity": [],
    "environment": {"device": "cpu", "torch": "2.13.0+cpu", "profile": "quick", "seed": None},
    "submission": {"name": "alice", "files": {"block_allocator.py": "a" * 64}},
    "started_at": "2025-01-01T10:00:00+0000",
}


def after() -> dict:
    """The same submission edited, graded with a seed on a GPU: one check now fails."""
    report = copy.deepcopy(BEFORE)
    report["parts"]["allocator"]["checks"][1] = check(
        "errors_change_nothing", "failed", 10.0, "allocate(9) raised <OutOfBlocks> but freed 2"
    )
    report["parts"]["allocator"]["score"] = report["score"] = 5.0
    report["benchmarks"][0]["ratio"] = 2.5
    report["environment"].update(device="NVIDIA H100", seed=12345, profile="full")
    report["submission"]["files"]["block_allocator.py"] = "b" * 64
    return report


def write(folder: Path, report: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report))
    return folder


def test_the_command_shows_deltas_and_only_the_changed_checks(tmp_path: Path) -> None:
    a = write(tmp_path / "a", BEFORE) / "report.json"
    b = write(tmp_path / "b", after())  # a folder holding its report.json
    done = subprocess.run(
        [sys.executable, "-m", "grader", "compare", str(a), str(b)],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    shown = [
        "15 / 15",
        "5 / 15",
        "-10",
        "not graded",  # the kernel part, in both
        "allocator/errors_change_nothing",
        "allocate(9) raised <OutOfBlocks> but freed 2",
        "Checks that changed: 1 of 2",
        "1.10x",
        "2.50x",
        "seed 12345",
        "device: cpu vs NVIDIA H100",
    ]
    assert [text for text in shown if text not in out] == [], out
    assert "allocator/distinct_ids" not in out  # unchanged
    assert "block_allocator.py (aaaaaaaaaaaa vs bbbbbbbbbbbb)" in out


def test_the_page_has_the_same_and_escapes_it(tmp_path: Path, capsys) -> None:
    a, b = write(tmp_path / "a", BEFORE), write(tmp_path / "b", after())
    page = tmp_path / "compare.html"
    assert compare.main([str(a), str(b), "--html", str(page)]) == 0
    html = page.read_text()
    assert "allocator/errors_change_nothing" in html
    assert "&lt;OutOfBlocks&gt;" in html
    assert "<OutOfBlocks>" not in html
    assert "<script" not in html
    assert str(page) in capsys.readouterr().out


def test_identical_reports_have_no_changed_check(tmp_path: Path, capsys) -> None:
    a, b = write(tmp_path / "a", BEFORE), write(tmp_path / "b", BEFORE)
    assert compare.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "Checks that changed: 0 of 2" in out
    assert "the same files" in out


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda folder: folder / "missing.json", "does not exist"),
        (lambda folder: write(folder, {}).joinpath("report.json").unlink() or folder, "give a"),
        (lambda folder: write(folder, "not json") / "report.json", "not a grade report"),
        (lambda folder: write(folder, {"score": 1}), "no parts with checks"),
        (lambda folder: write(folder, {**BEFORE, "score": "high"}), "no score"),
    ],
    ids=["missing file", "empty folder", "a string", "no parts", "no score"],
)
def test_what_is_not_a_report_exits_2_with_a_message(tmp_path: Path, capsys, make, reason) -> None:
    bad = make(tmp_path / "bad")
    good = write(tmp_path / "good", BEFORE)
    assert compare.main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert reason in err, err
    assert str(tmp_path / "bad") in err, err


def test_a_file_that_is_not_json_exits_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "report.json"
    bad.write_text("{ half a report")
    assert compare.main([str(bad), str(bad)]) == 2
    assert "is not a readable JSON report" in capsys.readouterr().err


def with_kit(report: dict, kit: str) -> dict:
    made = copy.deepcopy(report)
    made["environment"]["kit"] = kit
    return made


def test_each_side_says_which_kit_made_it_and_a_difference_is_warned(tmp_path: Path) -> None:
    a = compare.Side(tmp_path / "a", with_kit(BEFORE, "candidate"))
    b = compare.Side(tmp_path / "b", with_kit(after(), "full"))
    text, html = compare.render_text(a, b), compare.render_html(a, b)
    lines = text.splitlines()
    assert lines[1].endswith(", by the candidate kit")
    assert lines[2].endswith(", by the full kit")
    assert lines[3].startswith("  WARNING: A was made by the candidate kit and B by the full kit:")
    assert "by the candidate kit" in html
    assert "<strong>Warning:</strong> A was made by the candidate kit and B by the full" in html


def test_the_same_kit_is_not_warned_and_an_older_report_says_its_kit_is_unrecorded(
    tmp_path: Path,
) -> None:
    full = compare.Side(tmp_path / "a", with_kit(BEFORE, "full"))
    assert "WARNING" not in compare.render_text(full, full)
    assert "Warning" not in compare.render_html(full, full)
    older = compare.Side(tmp_path / "b", BEFORE)  # from before the field
    assert compare.provenance(older).endswith(", by an unrecorded kit")


def test_the_timings_columns_are_labelled_a_and_b(tmp_path: Path) -> None:
    a, b = compare.Side(tmp_path / "a", BEFORE), compare.Side(tmp_path / "b", after())
    lines = compare.render_text(a, b).splitlines()
    timings = lines.index("Timings (candidate time / reference time; lower is faster)")
    assert lines[timings + 1].split() == ["A", "B", "benchmark"]
    assert lines[timings + 2].split() == ["1.10x", "2.50x", "allocate/free"]
    head = compare.render_html(a, b).split("<h2>Timings")[1].split("</tr>")[0]
    assert re.findall(r"<th[^>]*>([^<]*)</th>", head) == ["benchmark", "A", "B"]
