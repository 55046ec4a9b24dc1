"""`python -m grader grade-all FOLDER`: every submission gets its row, the one the grader refuses
included, and the leaderboard's two files parse, sorted by score, with links that resolve."""

import csv
import io
import math
import shutil
import subprocess
import sys
import tarfile
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.parts import PARTS
from grader.report.leaderboard import Outcome, kernel_ratio, render_csv, render_html
from tests.grading import CLI_TIMEOUT, EXERCISES, KIT_ROOT, SOLUTIONS


class Links(HTMLParser):
    """The page's links and its text, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.hrefs += [value for name, value in attrs if tag == "a" and name == "href"]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """The answer key as a .zip, the stubs as a folder and a .tar.gz escaping its folder."""
    root: Path = tmp_path_factory.mktemp("batch")
    folder = root / "submissions"
    folder.mkdir()
    with zipfile.ZipFile(folder / "answer_key.zip", "w") as bundle:
        for path in sorted(SOLUTIONS.glob("*.py")):
            bundle.write(path, f"answer_key/{path.name}")
    shutil.copytree(EXERCISES, folder / "stubs")
    with tarfile.open(folder / "escape.tar.gz", "w:gz") as bundle:
        entry = tarfile.TarInfo("../block_allocator.py")
        entry.size = 4
        bundle.addfile(entry, io.BytesIO(b"x=1\n"))
    (folder / "notes.txt").write_text("not a submission\n")
    rubric = root / "rubric.toml"  # an option of the grader's own, passed on to each grading
    weights = {part: 42 if part == "allocator" else 1 for part in PARTS}
    rubric.write_text("[weights]\n" + "".join(f"{p} = {w}\n" for p, w in weights.items()))
    out = root / "board"
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(folder), "--out", str(out),
         "--parts", "allocator", "--jobs", "2", "--rubric", str(rubric)],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    return done, out


def test_each_submission_has_its_row_sorted_by_score(batch) -> None:
    done, out = batch
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert [row["candidate"] for row in rows] == ["answer_key", "stubs", "escape"], rows
    key, stubs, escape = rows
    assert (key["rank"], key["status"], key["allocator"]) == ("1", "graded", key["max_score"])
    assert key["max_score"] == "42"  # the rubric reached the grading
    assert (stubs["rank"], stubs["score"], stubs["allocator"]) == ("2", "0", "0")
    assert key["kernel_ratio"] == "n/a: not graded"
    assert key["integrity_flags"] == "0"
    assert (escape["rank"], escape["status"]) == ("", "not graded")
    assert "exit status 2" in escape["note"]
    assert "unsafe path '../block_allocator.py'" in escape["note"]
    for row in rows:
        assert (out / row["report"]).is_file(), row
    assert escape["report"].endswith("grade.log")


def test_progress_names_each_submission_and_what_it_skipped(batch) -> None:
    done, _ = batch
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 3, done.stderr
    assert "[3/3]" in progress[-1]
    assert "escape: NOT GRADED (exit status 2)" in done.stderr
    assert "skipping notes.txt" in done.stderr


def test_the_page_lists_every_candidate_with_a_link_that_resolves(batch) -> None:
    _, out = batch
    page = Links()
    page.feed((out / "leaderboard.html").read_text())
    reports = [href for href in page.hrefs if not href.startswith("similarity/")]
    assert reports == ["answer_key/report.html", "stubs/report.html", "escape/grade.log"]
    assert all((out / href).is_file() for href in page.hrefs)  # the similar pairs' pages too
    assert "Not graded (exit status 2)" in "".join(page.text)


def test_a_folder_that_is_not_there_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(tmp_path / "nothing")],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is not a folder" in done.stderr
    assert "Traceback" not in done.stderr


def graded(name: str, **report) -> Outcome:
    base = {
        "score": 10.0,
        "max_score": 100.0,
        "parts": {"kernel": {"score": 10.0, "max_score": 30.0, "checks": [{}]}},
        "benchmarks": [],
        "integrity": [],
        "errors": [],
        "environment": {"device": "NVIDIA H100"},
    }
    return Outcome(name, name, {**base, **report}, "", [], 12.0)


def test_the_kernel_ratio_is_the_geometric_mean_or_says_why_not() -> None:
    timed = [{"part": "kernel", "ratio": 2.0}, {"part": "kernel", "ratio": 8.0}]
    assert kernel_ratio(graded("a", benchmarks=timed).report) == f"{math.sqrt(16):.2f}"
    assert kernel_ratio(graded("b", environment={"device": "cpu"}).report) == "n/a: no GPU"
    assert kernel_ratio(graded("c", parts={}).report) == "n/a: not graded"


def test_names_and_flags_are_escaped_and_no_cell_is_a_formula() -> None:
    flag = {"source": "scan", "file": "scheduler.py", "line": 3, "message": "imports <ctypes>"}
    outcomes = [graded("=HYPERLINK(1)", integrity=[flag]), graded("<b>bob</b>", score=20.0)]
    html = render_html(outcomes, {"folder": "subs"})
    assert "&lt;b&gt;bob&lt;/b&gt;" in html
    assert "<b>bob" not in html
    assert "imports &lt;ctypes&gt;" in html
    rows = list(csv.DictReader(io.StringIO(render_csv(outcomes))))
    assert [row["candidate"] for row in rows] == ["<b>bob</b>", "'=HYPERLINK(1)"]
    assert rows[1]["integrity_flags"] == "1"
