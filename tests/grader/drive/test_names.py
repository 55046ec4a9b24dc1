"""grade-all's report folders: one per submission, none shared and none one of grade-all's own
outputs, whatever the candidates named their entries (`leaderboard.html.zip`, `a.zip` beside
`a/`), by the rule of `grader/drive/names.py`."""

import csv
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.drive import command, outputs
from grader.drive.command import similar_pairs
from grader.drive.names import OWN_OUTPUTS, report_name, submissions, unique_key
from grader.report.leaderboard import Outcome
from tests.grading import CLI_TIMEOUT, EXERCISES, KIT_ROOT

TAKEN = {unique_key(own) for own in OWN_OUTPUTS}


def test_own_outputs_are_what_grade_all_writes_beside_the_reports(tmp_path: Path) -> None:
    """`OWN_OUTPUTS` is the list report names avoid: it must name every file and folder grade-all
    writes in OUT beside the reports (the leaderboard, the similar pairs' pages)."""
    outputs.write_all([Outcome("a", "a.zip", None, "exit status 2", [], 1.0)], tmp_path, {})
    similar_pairs({}, tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(OWN_OUTPUTS)


@pytest.mark.parametrize(
    ("entry", "taken", "name"),
    [
        ("alice.zip", set(), "alice"),
        ("alice.tar.gz", set(), "alice"),
        ("alice.tgz", set(), "alice"),
        ("alice", set(), "alice"),
        ("alice.zip", {"alice"}, "alice.zip"),
        ("Alice.zip", {"alice"}, "Alice.zip"),  # one folder on a case-insensitive file system
        ("alice.zip", {"alice", "alice.zip"}, "alice.zip-2"),
        ("alice.zip", {"alice", "alice.zip", "alice.zip-2"}, "alice.zip-3"),
        ("leaderboard.html.zip", TAKEN, "leaderboard.html.zip"),
        ("Leaderboard.CSV.tgz", TAKEN, "Leaderboard.CSV.tgz"),
        ("leaderboard.html", TAKEN, "leaderboard.html-2"),  # a folder named like the page
        ("Items.CSV", TAKEN, "Items.CSV-2"),  # like the item analysis
        ("leaderboard.tgz", TAKEN, "leaderboard"),  # no clash: a folder beside the files
        ("e\u0301t\u00e9.zip", {unique_key("\u00e9t\u00e9")}, "e\u0301t\u00e9.zip"),  # NFD
    ],
)
def test_report_name_is_the_first_free_of_stem_whole_name_and_numbered(
    entry: str, taken: set[str], name: str
) -> None:
    assert report_name(entry, taken) == name


def make_entries(folder: Path, names: list[str]) -> None:
    for name in names:
        if name.endswith("/"):
            (folder / name).mkdir()
        else:
            (folder / name).write_bytes(b"PK\x03\x04junk")  # refused by the grader: cheap


# A row's name -> its entry's, where they differ.
ENTRIES = {"b": "b.tar.gz", "b.tar.gz": "b.tar.gz.zip", "leaderboard.html-2": "leaderboard.html"}
CLASHING = ["a/", "a.tgz", "a.zip", "b.tar.gz", "b.tar.gz.zip", "leaderboard.csv.tgz",
            "leaderboard.html.zip", "leaderboard.html/", "Leaderboard.html.tar.gz"]  # fmt: skip


def test_no_two_submissions_and_no_own_output_share_a_name(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    folder = tmp_path / "submissions"
    folder.mkdir()
    make_entries(folder, [*CLASHING, "notes.txt", ".hidden.zip", "holds-out/"])
    found = submissions(folder, folder / "holds-out" / "board")
    assert {name: entry.name for name, entry in found.items()} == {
        "a": "a",
        "a.tgz": "a.tgz",
        "a.zip": "a.zip",
        "b": "b.tar.gz",
        "b.tar.gz": "b.tar.gz.zip",
        "leaderboard.csv.tgz": "leaderboard.csv.tgz",
        "leaderboard.html.zip": "leaderboard.html.zip",
        "leaderboard.html-2": "leaderboard.html",
        "Leaderboard.html.tar.gz": "Leaderboard.html.tar.gz",
    }
    keys = [unique_key(name) for name in [*found, *OWN_OUTPUTS]]
    assert len(set(keys)) == len(keys)
    assert "skipping notes.txt" in capsys.readouterr().err


def test_out_as_the_submissions_folder_exits_2(tmp_path: Path) -> None:
    make_entries(tmp_path, ["a.zip"])
    assert command.main([str(tmp_path), "--out", str(tmp_path)]) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.zip"]


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.hrefs += [value for name, value in attrs if tag == "a" and name == "href"]


def test_clashing_names_each_get_a_row_and_a_log_end_to_end(tmp_path: Path) -> None:
    """Every clashing entry is refused at intake (junk archives, folders holding a link), so the
    batch costs little more than starting the gradings; the stubs are graded (in seconds), so
    that the leaderboard is written (grade-all writes none where nothing could be graded)."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    make_entries(folder, CLASHING)
    shutil.copytree(EXERCISES, folder / "stubs", ignore=shutil.ignore_patterns("*.md"))
    for kept in ("a", "leaderboard.html"):
        (folder / kept / "scheduler.py").symlink_to("/etc/passwd")
    out = tmp_path / "board"
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(folder), "--out", str(out),
         "--parts", "allocator", "--jobs", "2"],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the clashing entries could not be graded
    assert all((out / own).exists() for own in OWN_OUTPUTS)
    rows = list(csv.DictReader((out / "leaderboard.csv").open(encoding="utf-8")))
    assert sorted(row["candidate"] for row in rows) == sorted(
        ["a", "a.tgz", "a.zip", "b", "b.tar.gz", "leaderboard.csv.tgz", "leaderboard.html.zip",
         "leaderboard.html-2", "Leaderboard.html.tar.gz", "stubs"]
    )  # fmt: skip
    for row in rows:
        assert row["status"] == ("graded" if row["candidate"] == "stubs" else "not graded"), row
        assert (out / row["report"]).is_file(), row
        assert row["entry"] == str(folder / ENTRIES.get(row["candidate"], row["candidate"]))
    page = Links()
    page.feed((out / "leaderboard.html").read_text(encoding="utf-8"))
    assert page.hrefs[0] == "items.html"  # the item analysis, then a link per row
    assert len(page.hrefs) == 1 + len(rows)
    assert all((out / href).is_file() for href in page.hrefs)
    logs = {row["candidate"]: (out / row["report"]).read_text() for row in rows}
    assert "is a symbolic link" in logs["a"]
    assert "a.zip is not a readable .zip" in logs["a.zip"]
    assert "a.tgz is not a readable .tar.gz" in logs["a.tgz"]
