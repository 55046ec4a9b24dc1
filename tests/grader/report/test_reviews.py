# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The reviewer's notes (`reviews.py`): a good file read, each malformed one refused with the line
at fault before anything is graded or copied (grade-all and --merge exit 2), and the leaderboard
showing each note and verdict without changing a score, a rank or any other column."""

import argparse
import csv
import io
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.drive import command
from grader.drive.names import submissions
from grader.report import leaderboard
from grader.report.leaderboard import Outcome
from grader.report.reviews import Flag, Review, ReviewsError, load_reviews
from tests.grader.report.english import english_words, html_text
from tests.grader.report.punctuation import slips
from tests.grader.report.test_writers import HOSTILE, failing_report, full_marks_report
from tests.grading import CLI_TIMEOUT, KIT_ROOT

GOOD = """\
# reviews.toml: the reviewer's notes
[submissions."alice"]
note = "Strong kernel; ask about GQA."
[[submissions."alice".flags]]
about = "similar: bob"
verdict = "dismissed"
reason = "pair programming was allowed in round 1"
[[submissions."alice".flags]]
about = "imports os"
verdict = "confirmed"
reason = "it forks"

[submissions.bob]
note = "=1+2"
"""
ALICE = Review(
    "Strong kernel; ask about GQA.",
    (
        Flag("similar: bob", "dismissed", "pair programming was allowed in round 1"),
        Flag("imports os", "confirmed", "it forks"),
    ),
)


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "reviews.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_is_read_by_submission_name(tmp_path: Path) -> None:
    assert load_reviews(written(tmp_path, GOOD)) == {"alice": ALICE, "bob": Review("=1+2", ())}
    assert load_reviews(written(tmp_path, "")) == {}


BAD_VERDICT = GOOD.replace('verdict = "confirmed"', 'verdict = "maybe"')
FLAG = 'about = "x"\nverdict = "{}"\nreason = "r"\n'
INTERLEAVED = (
    '[submissions.alice]\nnote = "a"\n[[submissions.bob.flags]]\n' + FLAG.format("confirmed")
    + "[[submissions.alice.flags]]\n" + FLAG.format("confirmed")
    + "[[submissions.alice.flags]]\n" + FLAG.format("maybe")
)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "line", "said"),
    [
        (GOOD.replace('"it forks"', '"it forks'), "(at line 11, ", "not TOML: "),  # tomllib's
        (GOOD.replace('note = "=1+2"', "notes = 'x'"), "line 14: ", 'unknown key "notes"'),
        (GOOD.replace('reason = "it forks"', 'reasons = "x"'), "line 11: ", 'key "reasons"'),
        ("owner = 'me'\n" + GOOD, "line 1: ", 'the file has an unknown key "owner"'),
        (BAD_VERDICT, "line 10: ", 'verdict must be "confirmed" or "dismissed", not "maybe"'),
        (GOOD.replace('reason = "it forks"\n', ""), "line 8: ", 'flag 2 of submissions."alice" '
         "has no reason"),  # the line of the flag's table
        (GOOD.replace('note = "=1+2"', "note = 5"), "line 14: ", "note must be a string (in "
         "quotes), not 5"),
        (GOOD.replace('reason = "it forks"', "reason = ''"), "line 11: ", "reason must be a "
         "string (in quotes) that says it, not \"\""),
        ("[submissions]\nalice = 3\n", "line 2: ", 'submissions."alice" must be a table'),
        (INTERLEAVED, "line 13: ", 'not "maybe"'),  # alice's flags, bob's between them
    ],
)  # fmt: skip
def test_a_malformed_file_is_refused_with_the_line_at_fault(
    tmp_path: Path, text: str, line: str, said: str
) -> None:
    with pytest.raises(ReviewsError) as refused:
        load_reviews(written(tmp_path, text))
    message = str(refused.value)
    assert message.startswith(str(tmp_path / "reviews.toml")), message
    assert said in message, message
    assert line in message, message


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReviewsError, match=r"nowhere\.toml: cannot be read: No such file"):
        load_reviews(tmp_path / "nowhere.toml")


# -- the leaderboard -----------------------------------------------------------------------------


def drive() -> list[Outcome]:
    return [
        Outcome("alice", "subs/alice.zip", failing_report(), "", [], 3.0),
        Outcome("bob", "subs/bob", full_marks_report(), "", [], 2.0),
        Outcome("carol", "subs/carol.zip", None, "exit status 2", ["not a zip"], 0.5),
    ]


REVIEWS = {
    "alice": ALICE,
    "bob": Review("=1+2", ()),
    "carol": Review(f"look again {HOSTILE}\x1b[31m", ()),
    "dave": Review("not in this drive", ()),
}


def without_reviews(row: dict) -> dict:
    return {key: value for key, value in row.items() if not key.startswith("review_")}


def csv_rows(reviews: dict[str, Review] | None) -> list[dict]:
    return list(csv.DictReader(io.StringIO(leaderboard.render_csv(drive(), (), reviews))))


def test_the_csv_has_each_note_and_verdict_and_nothing_else_changes() -> None:
    before, after = csv_rows(None), csv_rows(REVIEWS)
    assert [row["candidate"] for row in after] == ["bob", "alice", "carol"]  # no row for dave
    for old, new in zip(before, after, strict=True):
        assert without_reviews(new) == without_reviews(old)
    bob, alice, carol = after
    assert alice["review_note"] == "Strong kernel; ask about GQA."
    assert alice["review_flags"] == (
        "dismissed: similar: bob (pair programming was allowed in round 1); "
        "confirmed: imports os (it forks)"
    )
    assert (bob["review_note"], bob["review_flags"]) == ("'=1+2", "")  # formula-safe
    assert carol["review_note"] == f"look again {HOSTILE}[31m"  # cleaned
    assert before[0]["review_note"] == before[0]["review_flags"] == ""
    (long,) = [row for row in csv_rows({"bob": Review("x" * 5000, ())}) if row["review_note"]]
    assert long["review_note"].endswith("... [3000 more characters cut]")  # bounded


def page(lang: str, reviews: dict[str, Review] | None) -> str:
    return leaderboard.render_html(drive(), {"folder": "subs", "lang": lang}, (), reviews)


def test_the_page_shows_each_note_and_strikes_a_dismissed_flag_through() -> None:
    html = page("en", REVIEWS)
    assert (
        "reviewer: Strong kernel; ask about GQA.; <del>similar: bob</del> dismissed: pair "
        "programming was allowed in round 1; confirmed: imports os (it forks)</div></td>"
    ) in html
    assert ">reviewer: =1+2</div></td>" in html  # a row with no note of its own
    assert "look again &lt;script&gt;alert(1)&lt;/script&gt; &amp; co[31m</div></td>" in html
    assert "not in this drive" not in html  # a note for a name with no row: only named
    assert "name dave, which this drive has no row for" in html
    assert "<script>" not in html


class Cells(HTMLParser):
    """The text of each cell of a page's first table: per submission (a `tbody` of its own), a
    list per row (its scores, then its note's row where it has one)."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[list[list[str]]] = []
        self.tables = 0
        self.in_cell = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tables += tag == "table"
        if self.tables != 1:
            return
        if tag == "tbody":
            self.entries.append([])
        elif tag == "tr" and self.entries:
            self.entries[-1].append([])
        elif tag == "td":
            self.entries[-1][-1].append("")
            self.in_cell = True

    def handle_endtag(self, tag: str) -> None:
        self.in_cell = self.in_cell and tag != "td"

    def handle_data(self, data: str) -> None:
        if self.in_cell:
            self.entries[-1][-1][-1] += data


def cells(html: str) -> list[list[list[str]]]:
    parser = Cells()
    parser.feed(html)
    return [[[cell.strip() for cell in row] for row in entry] for entry in parser.entries]


def note(entry: list[list[str]]) -> str:
    """A submission's note: its note row's text, "" where it has none."""
    return entry[1][-1] if len(entry) > 1 else ""


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_page_adds_the_notes_after_each_rows_own_and_changes_nothing_else(lang: str) -> None:
    before, after = cells(page(lang, None)), cells(page(lang, REVIEWS))
    assert len(before) == len(after) == 3  # bob, alice, carol: no row for dave
    for old, new in zip(before, after, strict=True):
        assert new[0] == old[0]  # the rank, the name, the scores, ...
        assert note(new).startswith(note(old))  # the note: its own first
        assert len(note(new)) > len(note(old))
    ranks = [["1", "bob"], ["2", "alice (alice.zip)"], ["", "carol (carol.zip)"]]
    assert [entry[0][:2] for entry in after] == ranks


def test_a_chinese_page_says_the_reviewers_words_in_chinese() -> None:
    reviews = {
        "alice": Review(
            "内核写得好",
            (Flag("similar: bob", "dismissed", "允许结对"), Flag("x", "confirmed", "是")),
        )
    }
    html = page("zh", reviews)
    assert "审阅者：内核写得好；<del>similar: bob</del>已排除：允许结对；已确认：x（是）" in html
    text = html_text(html)
    added = Counter(english_words(text)) - Counter(english_words(html_text(page("zh", None))))
    assert set(added) <= {"similar", "bob"}, added  # the reviewer's own text
    assert slips(text) == []


# -- grade-all and --merge -----------------------------------------------------------------------


def test_reviews_toml_in_the_drive_folder_is_no_submission(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    written(tmp_path, GOOD)
    (tmp_path / "a.zip").write_bytes(b"PK\x03\x04junk")
    assert list(submissions(tmp_path, tmp_path / "out")) == ["a"]
    assert "reviews.toml" not in capsys.readouterr().err


def test_a_malformed_reviews_toml_makes_grade_all_exit_2_grading_nothing(tmp_path: Path) -> None:
    folder, out = tmp_path / "subs", tmp_path / "board"
    folder.mkdir()
    (folder / "a.zip").write_bytes(b"PK\x03\x04junk")
    written(folder, BAD_VERDICT)
    done = subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", str(folder), "--out", str(out),
         "--parts", "allocator", "--allow-unisolated"],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert (
        f'grade-all: {folder / "reviews.toml"}, line 10: verdict must be "confirmed" or '
        '"dismissed", not "maybe"'
    ) in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()


def test_a_reviews_file_given_that_is_not_there_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "a.zip").write_bytes(b"PK\x03\x04junk")
    given = [str(tmp_path), "--out", str(tmp_path / "board"), "--reviews", "nowhere.toml"]
    assert command.main(given) == 2
    assert "nowhere.toml: cannot be read" in capsys.readouterr().err
    assert not (tmp_path / "board").exists()


def test_the_drives_leaderboard_has_the_notes_and_a_name_of_no_row_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = argparse.Namespace(
        lang="en", out=tmp_path / "out", folder="subs", profile="quick", seed=None,
        reviews=Path("subs/reviews.toml"),
    )  # fmt: skip
    assert command.finish(drive()[:2], {}, args, REVIEWS) == 0
    rows = list(csv.DictReader((tmp_path / "out" / "leaderboard.csv").open(encoding="utf-8")))
    assert [row["review_note"] for row in rows] == ["'=1+2", ALICE.note]
    err = capsys.readouterr().err
    assert "grade-all: subs/reviews.toml names carol, which this drive has no row for" in err
    assert "names dave, which" in err
    assert "names alice" not in err
