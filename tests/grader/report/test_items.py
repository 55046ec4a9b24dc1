# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The item analysis of a drive (`items.py`): per check, the submissions it ran in, its pass share,
its discrimination (the point-biserial correlation with the rest score) and its flag, over the
submissions that attempted its part (`attempts.py`: a stub, a missing file or a file that does not
compile is counted apart); the CSV quoted and in English, the page in the drive's language, saying
who attempted each part and, under 20 attempts, that its figures are indicative only; linked from
the leaderboard and back."""

import csv
import dataclasses
import io
from hashlib import sha256
from pathlib import Path

import pytest

from grader import ANSWER_KEY, KIT_ROOT
from grader.drive import outputs
from grader.parts import SUBMISSION_FILES
from grader.report import attempts, items, leaderboard
from grader.report.items import Attempts, Item
from grader.report.leaderboard import Outcome
from tests.grader.report.english import english_words, html_text
from tests.grader.report.punctuation import slips

CSP = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src'
# Each check's status in submissions a, b, c, d, and its points when passed; "-" where absent.
DRIVE = {
    "allocator/x": ("safety", 1, "PPFF"),
    "allocator/y": ("contract", 2, "PFFF"),
    "allocator/all": ("contract", 1, "PPPP"),
    "allocator/z": ("speed", 1, "FFFP"),
    "allocator/s": ("contract", 1, "SPFE"),  # skipped in a, could not run in d
    "allocator/once": ("contract", 1, "F---"),
    "decode/none": ("safety", 1, "FFFF"),
}
STATUS = {"P": "passed", "F": "failed", "S": "skipped", "E": "error"}
FOLDER = "/tmp/batch_1"


def report(checks: list[dict]) -> dict:
    """A minimal report of `checks`, the decode part listed before the allocator's."""
    parts = {"decode": [], "allocator": []}
    for check in checks:
        parts[check["id"].partition("/")[0]].append(check)
    return {
        "score": sum(check["points"] for check in checks),
        "max_score": sum(check["max_points"] for check in checks),
        "parts": {
            part_id: {"score": 0, "max_score": 0, "checks": part_checks}
            for part_id, part_checks in parts.items()
        },
        "integrity": [],
        "benchmarks": [],
    }


def submission(index: int) -> Outcome:
    """Submission `index` (0 for a) of `DRIVE`: a's total is 4, b's 3, c's 1, d's 2."""
    checks = [
        {"id": check_id, "name": check_id.partition("/")[2], "status": STATUS[said[index]],
         "points": worth if said[index] == "P" else 0, "max_points": worth, "severity": severity}
        for check_id, (severity, worth, said) in DRIVE.items()
        if said[index] != "-"
    ]  # fmt: skip
    name = "abcd"[index]
    return Outcome(name, f"{name}.zip", report(checks), "", [], 1.0)


def drive() -> list[Outcome]:
    """The four graded submissions of `DRIVE` and one the grader could not grade."""
    ungraded = Outcome("e", "e.zip", None, "exit status 2", ["not a zip"], 1.0)
    return [*(submission(index) for index in range(4)), ungraded]


def by_check() -> dict[str, Item]:
    return {item.check: item for item in items.items(drive())}


def test_rows_follow_the_parts_then_the_reports_order() -> None:
    assert [item.check for item in items.items(drive())] == [*DRIVE]
    assert [item.part for item in items.items(drive())][-1] == "decode"


def test_pass_share_and_discrimination_computed_by_hand() -> None:
    """x: passed by a and b (rest 3 and 2), failed by c and d (rest 1 and 2): the rests' mean is
    2, their deviations 1, 0, -1, 0; passing's +-1/2: r = 1 / sqrt(1 * 2) = 0.707."""
    x = by_check()["allocator/x"]
    assert (x.part, x.severity, x.submissions, x.passed) == ("allocator", "safety", 4, 2)
    assert (x.pass_share, x.discrimination, x.flag) == (0.5, 0.707, "")


def test_a_check_the_weakest_passes_alone_has_negative_discrimination() -> None:
    """z: passed by d alone (rest 1), the others' rests 4, 3, 1: r = -1.25 / sqrt(0.75 * 6.75)."""
    z = by_check()["allocator/z"]
    assert (z.submissions, z.passed, z.pass_share) == (4, 1, 0.25)
    assert (z.discrimination, z.flag) == (-0.556, "negative discrimination")


def test_all_passed_and_all_failed_are_flagged_and_have_no_discrimination() -> None:
    rows = by_check()
    assert rows["allocator/all"] == Item(
        "allocator/all", "allocator", "contract", 4, 4, 1.0, None, "all passed", 0
    )
    assert rows["decode/none"] == Item(
        "decode/none", "decode", "safety", 4, 0, 0.0, None, "all failed", 0
    )


def test_a_skipped_errored_or_absent_check_leaves_that_submission_out() -> None:
    rows = by_check()
    s = rows["allocator/s"]  # ran in b (passed, rest 2) and c (failed, rest 1)
    assert (s.submissions, s.passed, s.pass_share, s.discrimination) == (2, 1, 0.5, 1.0)
    once = rows["allocator/once"]  # one submission: no correlation
    assert (once.submissions, once.discrimination, once.flag) == (1, None, "all failed")


def test_an_ungraded_submission_is_left_out() -> None:
    assert items.items(drive()) == items.items(drive()[:4])
    assert items.items([drive()[4]]) == []


def test_a_check_that_never_ran_has_a_row_without_statistics() -> None:
    check = {"id": "allocator/x", "status": "skipped", "points": 0, "max_points": 1}
    only = Outcome("a", "a", report([check]), "", [], 1.0)
    assert items.items([only]) == [Item("allocator/x", "allocator", "", 0, 0, None, None, "", 0)]


# -- what is no attempt ----------------------------------------------------------------------------

OWN = {name: "0" * 64 for name in SUBMISSION_FILES}  # the sha256 of files the candidate wrote
STUB = "5" * 64  # the allocator's stub's, as these tests have the kit know it (`stubs`)
ALLOCATOR_STUB = {"block_allocator.py": STUB}
KITS_STUB_DIGESTS = attempts.stub_digests


@pytest.fixture(autouse=True)
def stubs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit knows the allocator's stub by `STUB`, in either kit (the candidate kit, none)."""
    monkeypatch.setattr(attempts, "stub_digests", lambda: {"block_allocator.py": STUB})


@pytest.mark.both_kits  # only the full kit has an answer key
def test_the_kit_knows_its_stubs_by_their_digests_where_it_has_the_answer_key() -> None:
    """In the full kit, each stub's sha256 as `exercises/` holds it; in the candidate kit, whose
    `exercises/` is the candidate's own work, none."""
    if not ANSWER_KEY.is_dir():
        assert KITS_STUB_DIGESTS() == {}
        return
    stub = KIT_ROOT / "exercises" / "block_allocator.py"
    assert KITS_STUB_DIGESTS()["block_allocator.py"] == sha256(stub.read_bytes()).hexdigest()


NOT_IMPLEMENTED = "not implemented: allocator.allocate raises NotImplementedError"


def failing(
    name: str, files: dict[str, str], syntax: tuple[str, ...] = (), message: str = "failed: 1 != 2"
) -> Outcome:
    """A graded submission that fails every check of `DRIVE` with `message`, its files as
    `files` (name: sha256), those of `syntax` not compiling (no check blamed on them)."""
    checks = [
        {"id": check_id, "name": check_id.partition("/")[2], "status": "failed", "points": 0,
         "max_points": worth, "severity": severity, "message": message}
        for check_id, (severity, worth, _) in DRIVE.items()
    ]  # fmt: skip
    failed = report(checks) | {
        "submission": {"files": files},
        "syntax_errors": [{"file": file, "line": 1, "checks": []} for file in syntax],
    }
    return Outcome(name, name, failed, "", [], 1.0)


def unattempted() -> list[Outcome]:
    """Submissions that fail every check without attempting the allocator part: its file the
    kit's stub (their failures say nothing of it); its checks all stopped at a method not
    implemented; its file missing; its file not compiling."""
    return [
        failing("stub", OWN | ALLOCATOR_STUB),
        failing("stubbed", OWN, message=NOT_IMPLEMENTED),
        failing("missing", {k: v for k, v in OWN.items() if k != "block_allocator.py"}),
        failing("broken", OWN, syntax=("block_allocator.py",)),
    ]


def test_a_stub_a_missing_file_or_one_that_does_not_compile_is_counted_apart() -> None:
    rows = {item.check: item for item in items.items(drive() + unattempted())}
    for check_id, alone in by_check().items():
        if alone.part == "allocator":  # the same figures as without them, the four counted apart
            assert rows[check_id] == dataclasses.replace(alone, not_attempted=4), check_id
    # decode was attempted by all but "stubbed": their failures count
    assert rows["decode/none"] == Item("decode/none", "decode", "safety", 7, 0, 0.0, None,
                                       "all failed", 1)  # fmt: skip


def test_each_part_says_who_attempted_it_and_why_the_others_did_not() -> None:
    assert items.attempts(drive() + unattempted()) == [
        Attempts("allocator", graded=8, attempted=4, missing=1, syntax=1, stub=2),
        Attempts("decode", graded=8, attempted=7, missing=0, syntax=0, stub=1),
    ]
    assert [attempts.left_out(outcome.report) for outcome in unattempted()] == [
        {"allocator": "stub"},
        {"allocator": "stub", "decode": "stub"},
        {"allocator": "missing"},
        {"allocator": "syntax"},
    ]


def checked(*said: tuple[str, str]) -> dict:
    """A report of allocator checks with (status, message) each, its files the candidate's."""
    checks = [
        {"id": f"allocator/{index}", "status": status, "points": 0, "max_points": 1,
         "message": message}
        for index, (status, message) in enumerate(said)
    ]  # fmt: skip
    return report(checks) | {"submission": {"files": OWN}}


@pytest.mark.parametrize(
    ("said", "reason"),
    [
        ((("failed", NOT_IMPLEMENTED), ("passed", "")), None),  # partly implemented: an attempt
        ((("failed", NOT_IMPLEMENTED), ("failed", "failed: 1 != 2")), None),
        ((("failed", NOT_IMPLEMENTED), ("skipped", "needs a CUDA device")), "stub"),
        ((("failed", "not submitted: block_allocator.py"),), "missing"),
        ((("failed", "import failed: block_allocator.py: ImportError"),), "syntax"),
        ((("failed", NOT_IMPLEMENTED), ("failed", "import failed: ...")), "syntax"),
        ((("skipped", "needs a CUDA device"),), None),  # nothing ran, its files are its own
    ],
)
def test_a_part_is_no_attempt_where_every_check_that_ran_stopped_before_its_code(
    said: tuple[tuple[str, str], ...], reason: str | None
) -> None:
    assert attempts.not_attempted(checked(*said), "allocator") == reason


def test_a_file_that_does_not_compile_is_no_attempt_at_its_own_part_only() -> None:
    """A syntax error in another part's file leaves this one attempted; one that every check of
    this part failed on (`syntax_errors` blames them) does not."""
    passed = checked(("passed", ""))
    other = passed | {"syntax_errors": [{"file": "scheduler.py", "checks": []}]}
    assert attempts.not_attempted(other, "allocator") is None
    blamed = checked(("failed", "failed: SyntaxError")) | {
        "syntax_errors": [{"file": "scheduler.py", "checks": ["allocator/0"]}]
    }
    assert attempts.not_attempted(blamed, "allocator") == "syntax"


def test_the_csv_quotes_every_field_and_leaves_undefined_cells_empty() -> None:
    text = items.render_csv(drive())
    lines = text.splitlines()
    assert lines[0] == (
        '"check","part","severity","submissions","passed","pass_share","discrimination","flag",'
        '"not_attempted"'
    )
    assert lines[1] == '"allocator/x","allocator","safety","4","2","0.5","0.707","","0"'
    assert all(line.startswith('"') and line.endswith('"') for line in lines)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(DRIVE)
    assert (rows[2]["discrimination"], rows[2]["flag"]) == ("", "all passed")
    counted_apart = list(csv.DictReader(io.StringIO(items.render_csv(drive() + unattempted()))))
    assert [row["not_attempted"] for row in counted_apart] == ["4"] * 6 + ["1"]


def test_no_csv_cell_is_a_formula() -> None:
    check = {"id": "=HYPERLINK(1)", "status": "passed", "points": 1, "max_points": 1}
    hostile = report([])
    hostile["parts"]["allocator"]["checks"] = [check]
    text = items.render_csv([Outcome("a", "a", hostile, "", [], 1.0)])
    assert list(csv.reader(io.StringIO(text)))[1][0] == "'=HYPERLINK(1)"


def page(lang: str) -> str:
    return items.render_html(drive() + unattempted(), {"folder": FOLDER, "lang": lang})


def test_the_english_page_shows_each_check_and_links_back() -> None:
    html = page("en")
    text = html_text(html)
    assert html.count(CSP) == 1
    assert "<script" not in html
    assert '<a href="leaderboard.html">' in html
    assert "Item analysis: /tmp/batch_1" in text
    assert "Discrimination is the point-biserial correlation" in text
    assert "<code>allocator/x</code>" in html
    for said in ("50%", "0.707", "-0.556", "negative discrimination", "all failed"):
        assert said in text, said
    assert "Who attempted each part" in text
    assert "does not compile or import" in text
    attempted = '<tr><td>allocator</td><td class="num">8</td><td class="num">4</td>'
    assert attempted + '<td class="num">2</td><td class="num">1</td><td class="num">1</td>' in html


def test_the_chinese_page_has_no_english_words() -> None:
    html = page("zh")
    text = html_text(html)
    assert '<html lang="zh-CN">' in html
    assert '<a href="leaderboard.html">' in html
    for said in ("逐项分析：/tmp/batch_1", "区分度", "全部通过", "全部未通过", "区分度为负"):
        assert said in text, said
    for said in ("各部分的尝试情况", "桩代码", "无法编译或导入", "仅供参考"):
        assert said in text, said
    assert english_words(text) == [], text
    assert slips(text) == [], text


@pytest.mark.parametrize(("lang", "said"), [("en", "Indicative only"), ("zh", "仅供参考")])
def test_under_20_attempts_the_page_says_its_figures_are_indicative_only(
    lang: str, said: str
) -> None:
    """19 attempts of a part (and however many not attempts) are too few; 20 are not."""
    twenty = [submission(index % 4) for index in range(20)]
    few = items.render_html(twenty[:19] + unattempted(), {"lang": lang})
    assert 'id="indicative"' in few
    assert said in html_text(few)
    enough = items.render_html(twenty + unattempted(), {"lang": lang})
    assert 'id="indicative"' not in enough
    assert said not in html_text(enough)


def test_the_indicative_note_names_the_parts_under_20_attempts() -> None:
    twenty = [submission(index % 4) for index in range(20)]
    decode_only = [failing(f"s{index}", OWN, message=NOT_IMPLEMENTED) for index in range(2)]
    for outcome in decode_only:  # allocator not attempted; decode attempted, and failed
        for check in outcome.report["parts"]["decode"]["checks"]:
            check["message"] = "failed: 1 != 2"
    text = html_text(items.render_html(twenty[:18] + decode_only, {"lang": "en"}))
    assert "these parts, so one more submission can move" in text
    assert "a long way: allocator. Read" in text  # 18 attempts; decode's 20 are enough


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_leaderboard_links_to_the_item_analysis(lang: str) -> None:
    html = leaderboard.render_html(drive(), {"folder": FOLDER, "lang": lang})
    assert '<a href="items.html">' in html


def test_write_all_writes_the_item_analysis_beside_the_leaderboard(tmp_path: Path) -> None:
    outputs.write_all(drive(), tmp_path, {"folder": FOLDER})
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "items.csv", "items.html", "leaderboard.csv", "leaderboard.html"
    ]  # fmt: skip
    assert (tmp_path / "items.csv").read_text() == items.render_csv(drive())


def test_the_page_escapes_a_check_id() -> None:
    check = {"id": "<script>alert(1)</script>", "status": "passed", "points": 1, "max_points": 1}
    hostile = report([])
    hostile["parts"]["allocator"]["checks"] = [check]
    html = items.render_html([Outcome("a", "a", hostile, "", [], 1.0)], {})
    assert "<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>" in html
    assert "<script" not in html
