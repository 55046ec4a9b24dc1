"""`python -m grader grade-all FOLDER`: every submission gets its row, the one the grader refuses
included, and the leaderboard's two files parse, sorted by score, with links that resolve; a
wrong option stops the drive before anything is graded, and a failed drive (none graded,
Ctrl-C) leaves the earlier leaderboard as it was; the exit status says whether all were graded."""

import argparse
import contextlib
import csv
import io
import json
import math
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.drive import command, outputs, resume
from grader.parts import PARTS, SUBMISSION_FILES
from grader.report import leaderboard
from grader.report.i18n import tr
from grader.report.leaderboard import (
    FORMULA_START,
    Outcome,
    kernel_ratio,
    render_csv,
    render_html,
)
from grader.sandbox import isolation
from grader.sandbox.process import INTERPRETED, may_not_fork, surely_no_gpu
from grader.sandbox.zygotes import children, grading_sides
from tests.grader.report.english import english_words
from tests.grader.report.punctuation import slips
from tests.grading import CLI_TIMEOUT, EXERCISES, KIT_ROOT, SOLUTIONS

PARTS_ALLOCATOR = ("--parts", "allocator")


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
    assert done.returncode == 1, done.stderr  # one submission could not be graded
    rows = list(csv.DictReader((out / "leaderboard.csv").open()))
    assert [row["candidate"] for row in rows] == ["answer_key", "stubs", "escape"], rows
    entries = [Path(row["entry"]).name for row in rows]
    assert entries == ["answer_key.zip", "stubs", "escape.tar.gz"], rows
    key, stubs, escape = rows
    assert (key["rank"], key["status"], key["allocator"]) == ("1", "graded", key["max_score"])
    assert key["max_score"] == "42"  # the rubric reached the grading
    assert (stubs["rank"], stubs["score"], stubs["allocator"]) == ("2", "0", "0")
    assert key["kernel_ratio"] == "n/a: not graded"
    # A verbatim copy of the answer key: each of its files flagged, said first; its most similar
    # code is the answer key, marked as a known implementation.
    assert key["integrity_flags"] == str(len(SUBMISSION_FILES))
    assert key["first_flag"] == "similarity, block_allocator.py: matches the answer key: 100%"
    similar = (key["similarity"], key["similar_to"], key["similar_kind"])
    assert similar == ("1", "answer key", "known")
    assert (stubs["integrity_flags"], stubs["similar_to"], stubs["similar_kind"]) == ("0", "", "")
    assert (escape["rank"], escape["status"]) == ("", "not graded")
    assert "exit status 2" in escape["note"]
    assert "unsafe path '../block_allocator.py'" in escape["note"]
    for row in rows:
        assert (out / row["report"]).is_file(), row
    assert escape["report"].endswith("grade.log")
    report = json.loads((out / "answer_key" / "report.json").read_text())
    assert report["submission"]["path"] == str(Path(key["entry"]).resolve())
    flagged = {flag["file"]: flag["message"] for flag in report["integrity"]}
    assert flagged == dict.fromkeys(SUBMISSION_FILES, "matches the answer key: 100%")


def test_the_drive_ends_naming_what_could_not_be_graded_and_where_its_log_is(batch) -> None:
    done, out = batch
    closing = done.stderr.strip().splitlines()[-1]
    assert closing == (
        f"grade-all: 1 of 3 submissions could not be graded (escape): their rows say why; each "
        f"one's log is {out}/<name>/grade.log."
    )
    assert (out / "escape" / "grade.log").is_file()


def test_progress_names_each_submission_and_what_it_skipped(batch) -> None:
    done, _ = batch
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == 3, done.stderr
    assert "[3/3]" in progress[-1]
    assert "escape: NOT GRADED (exit status 2)" in done.stderr
    assert "skipping notes.txt" in done.stderr


def test_a_running_count_comes_before_the_first_finish_and_after_each(batch) -> None:
    """Not a terminal: plain lines, the first before any grading ends, then one per finish but
    the last, each with an estimate of the time left once there is one."""
    done, _ = batch
    counts = [line for line in done.stderr.splitlines() if " under way, " in line]
    assert counts[0] == ("0 of 3 done, 2 under way, 0:00 elapsed, estimating the time left..."), (
        done.stderr
    )
    assert [line.split(" done")[0] for line in counts[1:]] == ["1 of 3", "2 of 3"], done.stderr
    assert all(re.search(r"about \d+:\d\d left|taking longer", line) for line in counts[1:])


def test_the_page_lists_every_candidate_with_a_link_that_resolves(batch) -> None:
    _, out = batch
    page = Links()
    page.feed((out / "leaderboard.html").read_text())
    assert page.hrefs[0] == "items.html"
    reports = [href for href in page.hrefs[1:] if not href.startswith("similarity/")]
    assert reports == ["answer_key/report.html", "stubs/report.html", "escape/grade.log"]
    assert all((out / href).is_file() for href in page.hrefs)  # the similar pairs' pages too
    assert "Not graded (exit status 2)" in "".join(page.text)


def test_the_item_analysis_has_a_row_per_check_of_the_reports(batch) -> None:
    _, out = batch
    rows = list(csv.DictReader((out / "items.csv").open()))
    reports = [
        json.loads((out / name / "report.json").read_text()) for name in ("answer_key", "stubs")
    ]
    ids = {check["id"] for r in reports for part in r["parts"].values() for check in part["checks"]}
    assert sorted(row["check"] for row in rows) == sorted(ids)
    assert {row["part"] for row in rows} == {"allocator"}
    assert all(0 <= float(row["pass_share"]) <= 1 for row in rows)
    # The answer key passes every check; the stubs are no attempt, counted apart (the escape is
    # not graded): one attempt, too few to correlate.
    said = {(row["submissions"], row["passed"], row["discrimination"], row["not_attempted"])
            for row in rows}  # fmt: skip
    assert said == {("1", "1", "", "1")}
    page = (out / "items.html").read_text()
    assert "Item analysis: " in page
    assert 'id="indicative"' in page


ITEMS = ("items.csv", "items.html")  # the item analysis, written beside the leaderboard
EARLIER = {"leaderboard.csv": "rank,candidate\n1,earlier\n", "leaderboard.html": "<p>earlier</p>"}


def earlier_drive(root: Path, entries: list[str]) -> tuple[Path, Path]:
    """A folder of `entries` (junk archives, which the grader refuses in a second) and an OUT
    holding an earlier drive's leaderboard."""
    folder, out = root / "submissions", root / "board"
    folder.mkdir()
    out.mkdir()
    for name in entries:
        (folder / name).write_bytes(b"PK\x03\x04junk")
    for name, text in EARLIER.items():
        (out / name).write_text(text)
    return folder, out


def untouched(out: Path) -> bool:
    """OUT holds the earlier leaderboard, as it was, and nothing else."""
    return {path.name: path.read_text() for path in out.iterdir()} == EARLIER


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--rubric", "{root}/missing.toml"], "give a TOML file with the [weights]"),
        (["--rubric", "{root}/submissions"], "give a TOML file with the [weights]"),
        (["--rubric", "{root}/board/leaderboard.csv"], "give a TOML file with the [weights]"),
        (["--sed", "3"], "unrecognized arguments: --sed 3: grade-all passes this on"),
        (["--memory-limit-gb", "lots"], "--memory-limit-gb: 'lots': give a number above 0"),
        (["--call-timeout", "0"], "--call-timeout: '0': give a number above 0"),
        (["--part-timeout=-5"], "--part-timeout: '-5': give a number above 0"),
        (["--timeout", "0"], "--timeout 0: give the seconds one grading may take"),
        (["--timeout", "nan"], "--timeout nan: give the seconds one grading may take"),
        (["--jobs", "0"], "--jobs 0: give 1 or more"),
        (["{root}/second_folder"], "unrecognized arguments:"),
    ],
)
def test_a_wrong_option_exits_2_before_anything_is_graded_or_written(
    tmp_path: Path, capsys: pytest.CaptureFixture, options: list[str], said: str
) -> None:
    folder, out = earlier_drive(tmp_path, ["a.zip", "b.zip"])
    given = [option.format(root=tmp_path) for option in options]
    assert command.main([str(folder), "--out", str(out), *PARTS_ALLOCATOR, *given]) == 2
    err = capsys.readouterr().err
    assert said in err, err
    assert err.startswith("grade-all: ")
    assert "Traceback" not in err
    assert untouched(out)


def test_out_as_a_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder, out = earlier_drive(tmp_path, ["a.zip"])
    board = out / "leaderboard.csv"
    assert command.main([str(folder), "--out", str(board)]) == 2
    assert f"--out {board} is a file: give a folder" in capsys.readouterr().err
    assert untouched(out)


def test_a_wrong_option_is_said_in_the_drives_language(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Each problem grade-all finds in its own options, a line in the drive's language (but the
    command's name, and a suffix: .zip)."""
    _, out = earlier_drive(tmp_path, ["a.zip"])
    board = out / "leaderboard.csv"
    wrong = ["--out", str(board), "--jobs", "0", "--timeout", "0", "--lang", "zh"]
    assert command.main([str(tmp_path / "nowhere"), *wrong]) == 2
    err = capsys.readouterr().err
    problems = [
        tr("zh", "drive_not_a_folder", folder=tmp_path / "nowhere"),
        tr("zh", "drive_out_is_file", out=board),
        tr("zh", "drive_jobs", jobs=0),
        tr("zh", "drive_timeout", timeout=0),
    ]
    assert err.splitlines() == [tr("zh", "drive_error", error=problem) for problem in problems]
    assert [word for word in english_words(err) if word not in ("grade-all", "zip")] == [], err
    assert slips(err) == [], err
    assert untouched(out)


def test_a_drive_with_nothing_graded_keeps_the_earlier_leaderboard_and_exits_1(
    tmp_path: Path,
) -> None:
    folder, out = earlier_drive(tmp_path, ["a.zip", "b.zip"])
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(folder), "--out", str(out),
         *PARTS_ALLOCATOR, "--jobs", "2"],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"grade-all: none of the 2 submissions could be graded (a, b), so no leaderboard was "
        f"written (an earlier one stays as it was); each one's log is {out}/<name>/grade.log."
    )
    assert "Leaderboard:" not in done.stdout
    for name, text in EARLIER.items():
        assert (out / name).read_text() == text
    assert "a.zip is not a readable .zip" in (out / "a" / "grade.log").read_text()


def test_ctrl_c_before_the_gradings_start_exits_130_with_the_earlier_leaderboard(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while grade-all reads the earlier reports (or lists, or compares the code): the
    same exit as during the gradings, not a traceback."""

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(resume, "kept", interrupted)
    folder, out = earlier_drive(tmp_path, ["a.zip"])
    given = [str(folder), "--out", str(out), "--allow-unisolated"]
    assert command.main(given) == 130
    assert "grade-all: interrupted" in capsys.readouterr().err
    assert untouched(out)


def drive_args(out: Path) -> argparse.Namespace:
    return argparse.Namespace(
        lang="en", out=out, folder="subs", profile="quick", seed=None, reviews=None
    )


def test_the_leaderboard_is_written_unless_none_was_graded_and_the_status_says_if_all_were(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`finish`, the decision: all graded, 0; some not, the leaderboard with their rows and 1;
    none graded, no leaderboard and 1."""
    cases = {
        "all": ([graded("a"), graded("b")], 0),
        "some": ([graded("a"), failed("b")], 1),
        "none": ([failed("a"), failed("b")], 1),
    }
    for case, (outcomes, status) in cases.items():
        out = tmp_path / case
        assert command.finish(outcomes, {}, drive_args(out)) == status, case
        written = (out / "leaderboard.csv").is_file()
        assert written == (case != "none"), case
    err = capsys.readouterr().err
    assert "1 of 2 submissions could not be graded (b)" in err
    assert "none of the 2 submissions could be graded (a, b)" in err
    assert len(list(csv.DictReader((tmp_path / "some" / "leaderboard.csv").open()))) == 2


def test_a_leaderboard_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or a failure) while the page is drawn leaves both earlier files as they were."""
    _, out = earlier_drive(tmp_path, [])

    def interrupted(*args: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(leaderboard, "render_html", interrupted)
    with pytest.raises(KeyboardInterrupt):
        outputs.write_all([graded("a")], out, {})
    assert untouched(out)
    monkeypatch.undo()
    outputs.write_all([graded("a")], out, {})
    assert sorted(path.name for path in out.iterdir()) == sorted([*EARLIER, *ITEMS])


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


def failed(name: str) -> Outcome:
    return Outcome(name, f"subs/{name}.zip", None, "exit status 2", ["not a zip"], 0.5)


PROVISIONAL = {"kernel": {"score": 10.0, "max_score": 30.0, "checks": [{}], "provisional": "x"}}
SHARED = "provisional (kernel): checks skipped, see the report"


def test_a_note_every_graded_row_shares_is_said_once_above_the_page_s_table() -> None:
    outcomes = [
        graded("a", parts=PROVISIONAL),
        graded("b", parts=PROVISIONAL, score=20.0),
        Outcome("c", "c", graded("c", parts=PROVISIONAL).report, "", [], 1.0, ("kept",)),
        failed("d"),
    ]
    html = render_html(outcomes, {"folder": "subs"})
    assert html.count(SHARED) == 1
    assert html.index(SHARED) < html.index("<table")
    assert ">kept</div></td>" in html  # what differs stays on its row
    rows = list(csv.DictReader(io.StringIO(render_csv(outcomes))))
    assert [row["note"] for row in rows[:3]] == [SHARED, SHARED, f"kept; {SHARED}"]


def test_a_note_on_some_rows_only_or_on_one_graded_row_stays_on_its_row() -> None:
    some = render_html([graded("a", parts=PROVISIONAL), graded("b")], {"folder": "subs"})
    assert "Every graded submission" not in some
    assert f">{SHARED}</div></td>" in some
    one = render_html([graded("a", parts=PROVISIONAL), failed("b")], {"folder": "subs"})
    assert "Every graded submission" not in one
    assert f">{SHARED}</div></td>" in one


def test_each_row_says_which_entry_it_was_graded_from() -> None:
    """The CSV's entry column; on the page, the entry's path as the name's tooltip, and its own
    name beside the row's where they differ (`a` graded from `a.zip`)."""
    outcomes = [Outcome("a", "subs/a.zip", graded("a").report, "", [], 1.0), failed("b.zip")]
    rows = list(csv.DictReader(io.StringIO(render_csv(outcomes))))
    assert [row["entry"] for row in rows] == ["subs/a.zip", "subs/b.zip.zip"]
    html = render_html(outcomes, {"folder": "subs"})
    assert (
        '<a href="a/report.html" title="subs/a.zip">a</a> <span class="muted">(a.zip)</span>'
        in (html)
    )
    assert '<a href="b.zip/grade.log" title="subs/b.zip.zip">b.zip</a> <span' in html


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


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_no_cell_is_a_formula_whatever_delimiter_a_spreadsheet_assumes(delimiter: str) -> None:
    """Every field is quoted, and each stretch of text that a reader splitting on `,`, `;` (Excel
    in most of Europe) or tab would take for a cell, and that starts a formula, gets a `'`: one
    past blanks or a quote, or after a line break within a field, included."""
    flag = {"source": "worker", "message": "ok;=HYPERLINK(2)"}
    names = ["zz;=HYPERLINK(CHAR(104))", "  =1+1", "+cmd", "zz\n=1+1;", 'zz;"=1+1"']
    outcomes = [graded(names[0], integrity=[flag]), graded(names[1], score=20.0)]
    outcomes += [failed(name) for name in names[2:]]
    text = render_csv(outcomes)
    assert text.startswith('"rank","candidate",'), text
    cells = [cell for row in csv.reader(io.StringIO(text), delimiter=delimiter) for cell in row]
    formulas = [cell for cell in cells if cell.lstrip(' "').startswith(FORMULA_START)]
    assert not formulas, text
    shown = [row["candidate"] for row in csv.DictReader(io.StringIO(text))]
    quoted = ["zz;'=HYPERLINK(CHAR(104))", "  '=1+1", "'+cmd", "zz\n'=1+1;", 'zz;"\'=1+1"']
    assert sorted(shown) == sorted(quoted)


def test_a_drive_lends_its_zygotes_to_every_grading(tmp_path: Path) -> None:
    """Where each grading would start the same zygotes (every part, no GPU, sandboxed workers),
    the drive starts them once, and its gradings fork their workers from those: one zygote per
    side for the whole drive, where each grading would otherwise start its own."""
    if not (surely_no_gpu() and may_not_fork(INTERPRETED) and isolation.probe().isolated):
        pytest.skip("zygotes are lent only where gradings fork sandboxed workers, without a GPU")
    folder = tmp_path / "submissions"
    for name in ("first", "second"):
        shutil.copytree(EXERCISES, folder / name)
    started = set()  # the zygotes the drive and its gradings started
    deadline = time.monotonic() + CLI_TIMEOUT  # a safety net, not a speed goal
    with (tmp_path / "drive.log").open("w") as log:
        drive = subprocess.Popen(
            [sys.executable, "-m", "grader", "grade-all", str(folder), "--out",
             str(tmp_path / "out"), "--jobs", "2"],
            cwd=KIT_ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            while drive.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(OSError, ValueError):  # a grading that ended meanwhile
                    started |= zygotes_of(drive.pid)
                time.sleep(0.05)
        finally:
            drive.kill()  # where it still runs; its gradings die with it
            drive.wait()
    assert drive.returncode == 0, (tmp_path / "drive.log").read_text()
    assert len(started) == len(grading_sides()), started


def test_a_drive_run_from_any_folder_prepares_its_gradings_in_the_kits_root(tmp_path: Path) -> None:
    """A drive started in a folder that holds a `torch.py` and a `triton.py`, modules its
    gradings import: its gradings are prepared and run in the kit's root, and import neither."""
    folder = tmp_path / "submissions"
    shutil.copytree(EXERCISES, folder / "stubs")
    for name in ("torch", "triton"):
        marker = tmp_path / f"{name}.imported"
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(folder), "--out", str(tmp_path / "out"),
         "--parts", "allocator"],
        cwd=tmp_path, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not sorted(tmp_path.glob("*.imported")), done.stderr


def zygotes_of(drive: int) -> set[int]:
    """The zygotes that `drive` and its gradings started and that still run: the processes
    that run the kit's zygote in bubblewrap, found among the descendants of `drive` outside
    any sandbox."""
    found, pending = set(), [drive]
    while pending:
        for pid in children(pending.pop()):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"bwrap"):
                pending.append(pid)  # a grading, or the process beside one
            elif any(arg.endswith(b"/zygote.py") for arg in argv):
                found.add(pid)
    return found
