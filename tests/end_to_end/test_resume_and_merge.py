"""`grade-all` resumes a drive (a second run keeps every report made with the same settings from
the same files, Ctrl-C included), and `grade-all --merge` builds one leaderboard from report
folders graded apart, refusing mixed settings (unless `--allow-mixed`) and edited reports. A
report forged with all its folder holds is graded again and refused, one copied into another
candidate's folder keeps its own name, and a page edited beside a sealed report is drawn again; a
team's own key seals a drive that only it merges. One language per drive: a `--lang zh` run over an
English drive's OUT draws every page again in Chinese, with no grading, and says every line in
Chinese."""

import argparse
import csv
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import provenance
from grader.drive import merge
from grader.drive import resume as drive_resume
from grader.drive.progress import grading_line
from grader.report.i18n import tr
from grader.report.messages import text_in
from tests.ctrl_c import sigint_at_default
from tests.end_to_end.test_zh_pages import SEAL_KEY, sealed_report
from tests.grader.report.english import english_words, html_text, markdown_kit_words
from tests.grader.report.punctuation import slips
from tests.grader.report.test_reviews import GOOD, written
from tests.grading import EXERCISES, KIT_ROOT, build_submission

PARTS = ("--parts", "allocator")
KEPT = "kept from an earlier run"
EARLIER = {"leaderboard.csv": "rank,candidate\n1,earlier\n", "leaderboard.html": "<p>earlier</p>"}
STOPS_WITHIN = 20.0  # seconds from Ctrl-C to grade-all's exit


def grade_all(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grader", "grade-all", *map(str, args)],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def rows(board: Path) -> dict[str, dict[str, str]]:
    return {row["candidate"]: row for row in csv.DictReader((board / "leaderboard.csv").open())}


def drive_folder(folder: Path) -> Path:
    build_submission(folder / "key")
    shutil.copytree(EXERCISES, folder / "stubs", ignore=shutil.ignore_patterns("*.md"))
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, Path]:
    """A drive of two (the answer key, the stubs), graded once: its folder and its OUT."""
    root = tmp_path_factory.mktemp("drive")
    folder, out = drive_folder(root / "submissions"), root / "out"
    done = grade_all(folder, "--out", out, *PARTS)
    assert done.returncode == 0, done.stderr
    assert KEPT not in done.stderr
    return folder, out


def test_a_second_run_keeps_every_report(graded) -> None:
    folder, out = graded
    before = rows(out)
    done = grade_all(folder, "--out", out, *PARTS)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(KEPT) == 2, done.stderr
    after = rows(out)
    assert {n: r["score"] for n, r in after.items()} == {n: r["score"] for n, r in before.items()}
    assert KEPT in after["key"]["note"]


def test_another_seed_or_a_changed_submission_is_graded_again(graded, tmp_path: Path) -> None:
    folder, out = graded
    seeded = tmp_path / "seeded"
    shutil.copytree(out, seeded)
    done = grade_all(folder, "--out", seeded, "--seed", "3", *PARTS)
    assert done.returncode == 0, done.stderr
    assert KEPT not in done.stderr
    changed, again = tmp_path / "changed", tmp_path / "again"
    shutil.copytree(folder, changed)
    shutil.copytree(out, again)
    (changed / "key" / "block_allocator.py").write_text(
        (changed / "key" / "block_allocator.py").read_text() + "\n# resubmitted\n"
    )
    done = grade_all(changed, "--out", again, *PARTS)
    assert done.returncode == 0, done.stderr
    kept = [line for line in done.stderr.splitlines() if KEPT in line]
    assert len(kept) == 1, done.stderr
    assert "stubs" in kept[0], done.stderr


def test_a_drive_stopped_by_ctrl_c_resumes(graded, tmp_path: Path) -> None:
    """Ctrl-C during a grading stops the drive at once (about 2 s asked; a busy machine given
    ten times that), exit status 130, the earlier leaderboard as it was; the same command again
    keeps the finished grading. The second submission's import waits until its limit, so that
    Ctrl-C, sent once the first is done, finds it running however busy the machine."""
    folder, out = tmp_path / "submissions", tmp_path / "out"
    shutil.copytree(graded[0], folder)
    allocator = folder / "stubs" / "block_allocator.py"
    allocator.write_text(f"import time\n\ntime.sleep(3600)\n{allocator.read_text()}")
    waits = ("--import-timeout", "20")
    out.mkdir()
    for name, text in EARLIER.items():
        (out / name).write_text(text)
    drive = subprocess.Popen(
        [sys.executable, "-m", "grader", "grade-all", str(folder), "--out", str(out), "--jobs",
         "1", *PARTS, *waits],
        cwd=KIT_ROOT, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_at_default,
    )  # fmt: skip
    try:
        for line in drive.stderr:
            if line.startswith("[1/2]"):
                drive.send_signal(signal.SIGINT)
                interrupted = time.monotonic()
                break
        assert drive.wait(timeout=300) == 130
        stopping = time.monotonic() - interrupted
    finally:
        drive.kill()
        drive.wait()
    assert stopping < STOPS_WITHIN, f"grade-all took {stopping:.1f} s to stop"
    assert {name: (out / name).read_text() for name in EARLIER} == EARLIER
    done = grade_all(folder, "--out", out, *PARTS, *waits)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(KEPT) == 1, done.stderr
    assert set(rows(out)) == {"key", "stubs"}


def test_merge_builds_one_leaderboard_and_refuses_mixed_settings(graded, tmp_path: Path) -> None:
    folder, out = graded
    seeded = tmp_path / "seeded"
    assert grade_all(folder, "--out", seeded, "--seed", "3", *PARTS).returncode == 0
    merged = tmp_path / "merged"
    done = grade_all("--merge", out / "key", out / "stubs", "--out", merged)
    assert done.returncode == 0, done.stderr
    assert {n: r["score"] for n, r in rows(merged).items()} == {"key": "15", "stubs": "0"}
    assert all((merged / row["report"]).is_file() for row in rows(merged).values())
    refused = grade_all("--merge", out, seeded, "--out", tmp_path / "refused")
    assert refused.returncode == 2
    assert "graded with other settings: seed 3" in refused.stderr
    assert not (tmp_path / "refused" / "leaderboard.csv").exists()
    mixed = tmp_path / "mixed"
    done = grade_all("--merge", out, seeded, "--out", mixed, "--allow-mixed")
    assert done.returncode == 0, done.stderr
    board = rows(mixed)
    assert set(board) == {"key", "stubs", "key-2", "stubs-2"}
    assert "mixed: seed 3" in board["key-2"]["note"]
    assert "mixed" not in board["key"]["note"]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ("files", "file hashes do not match their recorded checksum"),
        ("score", "changed after grading"),
    ],
)
def test_merge_refuses_a_hand_edited_report(graded, tmp_path: Path, edit: str, why: str) -> None:
    _, out = graded
    edited = tmp_path / "key"
    shutil.copytree(out / "key", edited)
    report = json.loads((edited / "report.json").read_text())
    if edit == "files":
        report["submission"]["files"]["block_allocator.py"] = "0" * 64
    else:
        report["score"] = report["max_score"] = 99.0
    (edited / "report.json").write_text(json.dumps(report, indent=2))
    done = grade_all(
        "--merge", edited, out / "stubs", "--out", tmp_path / "merged", "--allow-mixed"
    )
    assert done.returncode == 2
    assert why in done.stderr


def forge(report_dir: Path) -> None:
    """The report in `report_dir` raised to full marks and re-sealed as a forger can, with all
    the folder holds: the sha256 of the report as written, as the seal was before it had a key
    (`provenance.digest`)."""
    report = json.loads((report_dir / "report.json").read_text())
    for part in report["parts"].values():
        for check in part["checks"]:
            check["status"], check["points"] = "passed", check["max_points"]
        part["score"] = part["max_score"]
    report["score"] = report["max_score"]
    unsealed = {**report, "provenance": {**report["provenance"], "seal": None}}
    report["provenance"]["seal"] = provenance.digest(provenance.canonical(unsealed))
    (report_dir / "report.json").write_text(json.dumps(report, indent=2))


def test_a_forged_report_is_graded_again_and_refused_by_merge(graded, tmp_path: Path) -> None:
    folder, out = graded
    forged = tmp_path / "out"
    shutil.copytree(out, forged)
    forge(forged / "stubs")
    done = grade_all("--merge", forged / "stubs", "--out", tmp_path / "merged")
    assert done.returncode == 2
    assert "stubs: it was changed after grading (its seal does not match)" in done.stderr
    done = grade_all(folder, "--out", forged, *PARTS)
    assert done.returncode == 0, done.stderr
    kept = [line for line in done.stderr.splitlines() if KEPT in line]
    assert len(kept) == 1, done.stderr
    assert "stubs" not in kept[0], done.stderr
    assert rows(forged)["stubs"]["score"] == "0"


def test_a_drive_sealed_with_a_teams_key_merges_only_with_it(graded, tmp_path: Path) -> None:
    """The drive's reports, sealed with the session's default key, are graded again under the
    team's; merging them takes the team's key, and says which key to give without it."""
    folder, out = graded
    team_key = tmp_path / "team.key"
    team_key.write_text("a hiring team's key, 32 characters or more\n")
    again = tmp_path / "out"
    shutil.copytree(out, again)
    done = grade_all(folder, "--out", again, "--seal-key", team_key, *PARTS)
    assert done.returncode == 0, done.stderr
    assert KEPT not in done.stderr
    refused = grade_all("--merge", again, "--out", tmp_path / "merged")
    assert refused.returncode == 2
    assert "it was sealed with another key" in refused.stderr
    assert "give --seal-key FILE" in refused.stderr
    done = grade_all("--merge", again, "--out", tmp_path / "merged", "--seal-key", team_key)
    assert done.returncode == 0, done.stderr
    assert set(rows(tmp_path / "merged")) == {"key", "stubs"}


def test_a_copied_report_keeps_its_name_and_an_edited_page_is_drawn_again(
    graded, tmp_path: Path
) -> None:
    """The key's sealed report copied over the stubs' folder: merged, its row is the key's, not
    the stubs'; merged beside the original, it is refused as a copy. A page edited beside a
    sealed report.json comes out of merge drawn again from it."""
    _, out = graded
    swapped = tmp_path / "stubs"
    shutil.copytree(out / "key", swapped)
    (swapped / "report.html").write_text("<p>15/15, hire</p>")
    done = grade_all("--merge", swapped, "--out", tmp_path / "merged")
    assert done.returncode == 0, done.stderr
    assert set(rows(tmp_path / "merged")) == {"key"}
    assert "hire" not in (tmp_path / "merged" / "key" / "report.html").read_text()
    refused = grade_all("--merge", out / "key", swapped, "--out", tmp_path / "twice")
    assert refused.returncode == 2
    assert f"{swapped}: a copy of the report in {out / 'key'}" in refused.stderr


# -- one language per drive ------------------------------------------------------------------------


def english_left(text: str, names: set[str]) -> list[str]:
    """The English words of `text` but the submissions' `names` (the candidate's own text)."""
    return [word for word in english_words(text) if word not in names]


def chinese_pages(out: Path, names: set[str]) -> dict[str, list[str]]:
    """Each page of the drive in `out` (each report's `report.html` and `report.md`, the
    leaderboard, the item analysis): the English words left on it, or that it is no Chinese
    page. Not English: the submissions' `names` and where their flags come from (a source's id,
    "similarity", shown as it is)."""
    exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
    reports = [json.loads((out / name / "report.json").read_text()) for name in names]
    known = names | {flag["source"] for report in reports for flag in report["integrity"]}
    left = {}
    for page in [out / "leaderboard.html", out / "items.html"] + [
        out / name / file for name in names for file in ("report.html", "report.md")
    ]:
        text = page.read_text(encoding="utf-8")
        if page.suffix == ".html":
            words = english_left(html_text(text), known)
            left[str(page)] = words if '<html lang="zh-CN">' in text else ["<html lang>"]
        else:
            kit_words = markdown_kit_words(text, tr("zh", "environment_heading"), exempt)
            left[str(page)] = english_left(kit_words, known)
    return left


def chinese_lines(done: subprocess.CompletedProcess, names: set[str]) -> list[str]:
    """The lines grade-all printed that hold English words (but the names) or a slip of ASCII
    punctuation in Chinese text."""
    lines = (done.stdout + done.stderr).splitlines()
    return [line for line in lines if english_left(line, names) or slips(line)]


def test_a_chinese_run_over_an_english_drive_draws_every_page_in_chinese_grading_nothing(
    graded, tmp_path: Path
) -> None:
    """`--lang zh` over an English drive keeps both reports, report.json as it was (a grading
    would write another), and draws every page again in Chinese; every line it prints is
    Chinese. A submission changed since is graded again, in Chinese too, its lines as well."""
    folder, out = graded
    names = {"key", "stubs"}
    again, submissions = tmp_path / "out", tmp_path / "submissions"
    shutil.copytree(out, again)
    shutil.copytree(folder, submissions)
    assert all(chinese_pages(again, names).values())  # the English drive's pages, as they were
    written = {name: (again / name / "report.json").read_bytes() for name in names}
    done = grade_all(submissions, "--out", again, *PARTS, "--lang", "zh")
    assert done.returncode == 0, done.stderr
    assert {name: (again / name / "report.json").read_bytes() for name in names} == written
    assert done.stderr.count(text_in("zh", drive_resume.KEPT)) == 2, done.stderr
    assert {page: words for page, words in chinese_pages(again, names).items() if words} == {}
    assert chinese_lines(done, names) == [], done.stdout + done.stderr
    allocator = submissions / "stubs" / "block_allocator.py"
    allocator.write_text(allocator.read_text() + "\n# resubmitted\n")
    done = grade_all(submissions, "--out", again, *PARTS, "--lang", "zh")
    assert done.returncode == 0, done.stderr
    assert grading_line("zh", 1, 1, "quick") in done.stderr.splitlines(), done.stderr
    assert done.stderr.count(text_in("zh", drive_resume.KEPT)) == 1, done.stderr
    assert {page: words for page, words in chinese_pages(again, names).items() if words} == {}
    assert chinese_lines(done, names) == [], done.stdout + done.stderr


# -- the reviewer's notes on a merged leaderboard -------------------------------------------------


def merge_args(tmp_path: Path, reviews: Path) -> argparse.Namespace:
    one, two = sealed_report(tmp_path / "alice"), sealed_report(tmp_path / "bob")
    (tmp_path / "seal.key").write_bytes(SEAL_KEY)
    return argparse.Namespace(
        merge=[one, two], out=tmp_path / "out", allow_mixed=False, lang="en",
        seal_key=tmp_path / "seal.key", reviews=reviews,
    )  # fmt: skip


def test_merge_shows_the_notes_of_reviews(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = merge_args(tmp_path, written(tmp_path, GOOD.replace("[submissions.bob]", "[a.b]")))
    assert merge.main(args) == 2  # refused before anything is copied
    assert "line 13: the file has an unknown key" in capsys.readouterr().err
    assert not args.out.exists()
    args.reviews = written(tmp_path, GOOD + "[submissions.erin]\n")
    assert merge.main(args) == 0
    html = (args.out / "leaderboard.html").read_text(encoding="utf-8")
    assert "<del>similar: bob</del> dismissed: pair programming" in html
    assert "names erin, which this drive has no row for" in capsys.readouterr().err
