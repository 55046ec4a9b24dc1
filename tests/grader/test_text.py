"""A candidate's text on its way out: terminal escapes, lone surrogates, NULs and huge strings in a
report reach no file, terminal or page as they were (`text.py`, `reports.bounded`).

The attacks measured: escapes in an exception message drew a fake "15/15" on the terminal; a lone
surrogate crashed the summary on a strict UTF-8 stdout; a 128 MiB message made five report files
of 256 MB each. Each test below writes what the kit writes from such a report and reads it back
as bytes: small, no ESC, no NUL, valid UTF-8.
"""

import copy
import csv
import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import quote

import pytest

from grader.drive import outputs
from grader.report import compare
from grader.report.leaderboard import Outcome
from grader.report.model import LIMITS, LONG_CHARS, bounded
from grader.report.summary import print_summary
from grader.report.writers import write_all
from grader.text import MESSAGE_CHARS, clean, clean_all

FIXTURE = Path(__file__).parent / "report" / "fixtures" / "partial.json"
FAKE_SCORE = "\x1b[2J\x1b[H15/15"  # clear the screen, cursor home, then a score of its own
BIG = "y" * 5_000_000
HOSTILE = f"{FAKE_SCORE} \udcff a\x00b \u202eevil\n{BIG}"
HOSTILE_NAME = f"{FAKE_SCORE}\udcff"
FILE_BYTES = 1_500_000  # a bound on any file written from the hostile report (BIG alone is 5 MB)
TERMINAL_BYTES = 100_000


def hostile_report() -> dict:
    """A real report (the fixture) with the hostile text in every string a candidate reaches."""
    report = json.loads(FIXTURE.read_text(encoding="utf-8"))
    for part in report["parts"].values():
        for check in part["checks"]:
            check["message"] = HOSTILE
            if check["status"] in ("failed", "error"):
                check.update(counterexample=HOSTILE, traceback=HOSTILE, hypothesis=HOSTILE)
    report["errors"] = [f"the grader failed: {HOSTILE}"]
    report["integrity"] = [{"source": "scan", "file": HOSTILE_NAME, "line": 1, "message": HOSTILE}]
    report["submission"]["name"] = HOSTILE_NAME
    report["integration"]["message"] = HOSTILE
    return report


def assert_safe(data: bytes, limit: int = FILE_BYTES) -> str:
    """`data` is small, has no ESC and no NUL, and is UTF-8 (strict): its text."""
    assert len(data) < limit
    assert b"\x1b" not in data
    assert b"\x00" not in data
    text = data.decode("utf-8")  # strict: raises on an encoded surrogate
    for escaped in ("\\u001b", "\\u0000", "\\udcff", "\\u202e", "\u202e"):
        assert escaped not in text
    return text


def strict_stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")


def written(stream: io.TextIOWrapper) -> bytes:
    stream.flush()
    return stream.buffer.getvalue()


# -- text.clean ---------------------------------------------------------------------------------


def test_clean_removes_control_characters_but_newline_and_tab() -> None:
    assert clean(FAKE_SCORE) == "[2J[H15/15"
    assert clean("a\x00b\rc\x7fd\x85e\x9bf\u2028g\u202eh\u2066i") == "abcdefghi"
    assert clean("one\ntwo\tthree") == "one\ntwo\tthree"
    assert clean("日本語 ✓ \U0001f600") == "日本語 ✓ \U0001f600"


def test_clean_replaces_lone_surrogates() -> None:
    assert clean("a\udcffb\ud800") == "a\ufffdb\ufffd"
    clean("\udcff" * 10).encode("utf-8")  # strict: no surrogate is left


def test_clean_bounds_the_length_with_a_note_of_what_was_cut() -> None:
    assert clean("x" * 10, 10) == "x" * 10
    assert clean("x" * 25, 10) == "x" * 10 + "... [15 more characters cut]"
    assert clean("x" * 3000) == "x" * MESSAGE_CHARS + "... [1000 more characters cut]"
    assert clean("x" * 3000, None) == "x" * 3000
    assert clean("\x00" * 30 + "abc", 10) == "abc"  # what was removed leaves room
    # Only what may be kept is cleaned: the count is of what was not, control characters too.
    assert clean("ab\x1b" * 10, 5).startswith("ababa... [")
    assert clean(12345, 3) == "123... [2 more characters cut]"  # not a string: its str()


def test_clean_of_a_huge_string_keeps_only_the_bound() -> None:
    huge = "\x1b" + "z" * 50_000_000 + "\udcff"
    shown = clean(huge)
    assert shown.startswith("z" * MESSAGE_CHARS + "... [")
    assert len(shown) < MESSAGE_CHARS + 50


def test_clean_all_cleans_every_string_and_key_and_leaves_the_rest() -> None:
    value = {"a\x1b": ["\x00b", ("c\udcff", 1.5)], "n": None, "t": True, "i": 3, "s": "x" * 9999}
    assert clean_all(value) == {
        "a": ["b", ["c\ufffd", 1.5]],
        "n": None,
        "t": True,
        "i": 3,
        "s": "x" * 9999,
    }


def test_bounded_cuts_messages_shorter_than_other_strings_and_copies() -> None:
    report = hostile_report()
    kept = copy.deepcopy(report["errors"])
    safe = bounded(report)
    check = safe["parts"]["decode"]["checks"][4]
    assert check["message"].startswith("[2J[H15/15 \ufffd ab evil\nyyy")
    assert len(check["message"]) < LIMITS["message"] + 50
    assert LIMITS["message"] < len(check["counterexample"]) < LONG_CHARS + 50
    assert len(safe["errors"][0]) < LONG_CHARS + 50
    assert len(safe["integrity"][0]["message"]) < LIMITS["message"] + 50
    assert report["errors"] == kept  # the report given is left as it was
    assert bounded(safe) == safe  # once is enough


# -- the report's five files --------------------------------------------------------------------


def test_every_report_file_is_small_clean_utf8(tmp_path: Path) -> None:
    write_all(hostile_report(), tmp_path)
    files = sorted(tmp_path.iterdir())
    assert len(files) == 5
    texts = {path.name: assert_safe(path.read_bytes()) for path in files}
    report = json.loads(texts["report.json"])
    message = report["parts"]["decode"]["checks"][4]["message"]
    assert message.startswith("[2J[H15/15 \ufffd ab evil")
    assert message.endswith("more characters cut]")
    json.loads(texts["results.json"])
    ET.fromstring(texts["junit.xml"].encode())
    assert "[2J[H15/15" in texts["report.html"]  # shown, inert


# -- the summary on the terminal ----------------------------------------------------------------


def test_the_summary_prints_on_a_strict_utf8_stream_without_escapes(tmp_path: Path) -> None:
    stream = strict_stream()
    print_summary(hostile_report(), tmp_path, stream)
    text = assert_safe(written(stream), TERMINAL_BYTES)
    assert "[2J[H15/15 \ufffd ab evil" in text  # the message, inert
    assert "decode       9.57 / 20.00" in text


def test_the_summary_replaces_what_an_ascii_stream_cannot_encode(tmp_path: Path) -> None:
    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    print_summary({**hostile_report(), "language": "zh"}, tmp_path, stream)
    assert b"?" in assert_safe(written(stream), TERMINAL_BYTES).encode()


# -- the leaderboard ----------------------------------------------------------------------------


def test_the_leaderboard_is_small_clean_utf8_and_links_the_name_on_disk(tmp_path: Path) -> None:
    outcomes = [
        Outcome(HOSTILE_NAME, HOSTILE_NAME, hostile_report(), "", [], 12.0),
        Outcome(f"={HOSTILE_NAME}2", "x", None, f"exit status 1 {FAKE_SCORE}", [HOSTILE], 3.0),
    ]
    page = outputs.write_all(outcomes, tmp_path, {"folder": f"subs{FAKE_SCORE}"})
    html = assert_safe(page.read_bytes())
    table = assert_safe((tmp_path / "leaderboard.csv").read_bytes())
    assert f'href="{quote(HOSTILE_NAME, errors="surrogateescape")}/report.html"' in html
    assert "%1B%5B2J%1B%5BH15/15%FF" in html  # the bytes of the folder's name
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [row["candidate"] for row in rows] == ["[2J[H15/15\ufffd", "'=[2J[H15/15\ufffd2"]


# -- compare ------------------------------------------------------------------------------------


def test_compare_prints_and_writes_clean_text(tmp_path: Path, monkeypatch) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(hostile_report()), encoding="utf-8")
    other = json.loads(FIXTURE.read_text(encoding="utf-8"))
    (tmp_path / "b.json").write_text(json.dumps(other), encoding="utf-8")
    side = compare.load(folder)
    assert len(side.report["parts"]["decode"]["checks"][4]["message"]) < LIMITS["message"] + 50
    stream = strict_stream()
    monkeypatch.setattr(sys, "stdout", stream)
    page = tmp_path / "compare.html"
    assert compare.main([str(folder), str(tmp_path / "b.json"), "--html", str(page)]) == 0
    out = assert_safe(written(stream), TERMINAL_BYTES)
    assert "[2J[H15/15" in out
    html = assert_safe(page.read_bytes())
    assert "[2J[H15/15" in html


@pytest.mark.parametrize("path", ["a\x1b[2Jb", "a\udcffb"])
def test_compare_cleans_a_path_it_names(tmp_path: Path, monkeypatch, capsys, path) -> None:
    assert compare.main([str(tmp_path / path), str(tmp_path / path)]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "\udcff" not in err
