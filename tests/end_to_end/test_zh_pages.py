# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The hiring team's pages in Chinese (`--lang zh`): the leaderboard, the simulation's page,
`compare` (its page and its terminal text) and the source scan's integrity flags hold no English
but code, identifiers, names and the candidate's own text; `report.json` and the leaderboard's
CSV stay in English, as data; grade-all's lines name the profile in Chinese. Drawn from the
golden reports (`tests/end_to_end/golden`, as `test_messages.golden` fills them in), no grading."""

import argparse
import ast
import copy
import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from grader import KIT_ROOT, provenance
from grader.drive import merge
from grader.drive.progress import grading_line
from grader.drive.resume import KEPT
from grader.report import compare
from grader.report.compare import Side
from grader.report.i18n import language, tr
from grader.report.leaderboard import Outcome, render_csv, render_html
from grader.report.render import report_markdown, simulation_html
from grader.said import recorded, said
from grader.sandbox.isolation import Isolation
from grader.scan import scan_files
from tests.end_to_end.test_messages import golden, untranslated
from tests.grader.report.english import english_words, html_text, markdown_kit_words, names_in
from tests.grader.report.punctuation import slips
from tests.grader.report.test_writers import full_marks_report

# Sources that make the source scan raise each kind of flag it has, and the kernel file's.
FLAGGED_SOURCE = b"""
import subprocess, ctypes, threading, signal, mmap, socket, inspect, pathlib, runpy, marshal
import grader
import vllm
from os import system
import os, sys, torch, importlib
x = eval("1")
f = open("/proc/self/mem")
os.fork()
os.setsid()
os.kill(1, 9)
os.remove("a")
os.mkfifo("a")
sys._getframe()
getattr(os, "system")
getattr(os, name)
setattr(torch, "x", 1)
del torch.nn
torch.foo = 1
importlib.import_module(name)
frame = error.__traceback__.tb_frame.f_back
object.__subclasses__()
"""
FLAGGED_KERNEL = b"""
import torch, triton, numpy
import torch._C
from triton.runtime.jit import JITFunction
@triton.jit
def kernel(x):
    torch.exp(x)
def paged_attention_decode(q, k_cache, n):
    a = q @ q
    b = torch.softmax(q, -1)
    c = q.matmul(q)
    d = q.numpy()
    e = k_cache[n]
    triton.jit = None
    getattr(torch, name)
    setattr(triton, "x", 1)
    f = torch._C._dispatch_tls_local_exclude_set
"""


def scan_flags() -> list[dict]:
    """The flags of `FLAGGED_SOURCE` and `FLAGGED_KERNEL`, as a report holds them."""
    flags = scan_files({"scheduler.py": FLAGGED_SOURCE, "paged_attention.py": FLAGGED_KERNEL})
    return json.loads(json.dumps(recorded(flags)))


def candidate_names() -> set[str]:
    """The names of `FLAGGED_SOURCE` and `FLAGGED_KERNEL`'s code, the modules they import among
    them: the candidate's text, which the flags name."""
    sources = (FLAGGED_SOURCE, FLAGGED_KERNEL)
    imported = {
        part
        for source in sources
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.alias)
        for part in node.name.split(".")
    }
    return imported.union(*(names_in(source) for source in sources))


def prose(text: str) -> list[str]:
    """The English words of `text` (`english_words`) but the candidate's names and where the
    flags come from (`scan`: a source's id, which report.html shows as code)."""
    names = candidate_names() | {flag["source"] for flag in scan_flags()}
    return [word for word in english_words(text) if word not in names]


def flagged_report() -> dict:
    """A Chinese golden report with every kind of the scan's flag."""
    return golden("fork_without_incref.json") | {"integrity": scan_flags()}


def test_every_flag_the_source_scan_writes_is_said_by_id() -> None:
    assert untranslated((KIT_ROOT / "grader" / "scan.py").read_text()) == []
    assert all(flag["said"]["message"] for flag in scan_flags())


def test_the_scan_flags_every_kind_of_code_the_test_means_to() -> None:
    assert len({flag["message"].split(" ")[0] for flag in scan_flags()}) >= 6
    assert len(scan_flags()) >= 40


def test_a_chinese_report_shows_the_source_scans_flags_in_chinese() -> None:
    report = flagged_report()
    markdown = report_markdown(report)
    exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
    text = markdown_kit_words(markdown, tr("zh", "environment_heading"), exempt)
    assert "导入了 subprocess（可以启动进程）" in text
    assert prose(text) == [], text
    assert report["integrity"][0]["message"].startswith("imports ")  # report.json: English


# -- the leaderboard -----------------------------------------------------------------------------

PROVISIONAL = {"score": 0.0, "max_score": 30.0, "checks": [{}], "provisional": "x"}
SIMILAR = {
    "left": "candidate_1",
    "right": "candidate_2",
    "known": False,
    "files": [{"file": "scheduler.py", "shares": "90% / 88%"}],
    "shares": "90% / 88%",
    "share_left": 0.9,
    "share_right": 0.88,
    "matched": 40,
    "href": "similarity/pair-001.html",
}


def drive_outcomes() -> list[Outcome]:
    """A drive's outcomes with every kind of row: kept from an earlier run, retried, flagged,
    not isolated, the grader's own failure, provisional on every graded row (said once), and
    two that could not be graded."""
    kept, flagged = golden("answer_key.json"), flagged_report()
    flagged |= {
        "isolation": recorded(
            Isolation(None, reason="turned off with --isolation none").as_report()
        ),
        "errors": ["Traceback (most recent call last):\nZeroDivisionError: division by zero"],
    }
    for report in (kept, flagged):
        report["parts"]["kernel"] = copy.deepcopy(PROVISIONAL)
    retried = said("retried on Ray (attempt {attempt} of {attempts})", attempt=2, attempts=3)
    problem = said("{file} is not a grade report: it has no parts with checks", file="/tmp/b")
    unreadable = said("exit status 0 but {problem}", problem=problem)
    timed_out = said("timed out after {seconds} s", seconds=600)
    failed = said("exit status {status}", status=2)
    return [
        Outcome("candidate_1", "/tmp/batch_1/candidate_1.zip", kept, "", [], 75.0, (KEPT,)),
        Outcome("candidate_2", "/tmp/batch_1/candidate_2", flagged, "", [], 12.0, (retried,)),
        Outcome("candidate_3", "/tmp/batch_1/candidate_3", None, timed_out, [], 6.0),
        Outcome("candidate_4", "/tmp/batch_1/candidate_4", None, unreadable, ["a log"], 1.0),
        Outcome("candidate_5", "/tmp/batch_1/candidate_5", None, failed, [], 1.0),
    ]


def leaderboard(lang: str) -> str:
    options = {"folder": "/tmp/batch_1", "profile": "quick", "seed": 7, "lang": lang}
    return render_html(drive_outcomes(), options, [SIMILAR])


def test_the_leaderboard_of_a_chinese_drive_has_no_english_words() -> None:
    text = html_text(leaderboard("zh"))
    for shown in (
        "排行榜：/tmp/batch_1",
        "快速模式，随机种子 7",
        "所有已评分的提交：",
        "暂定分数（kernel）：有检查被跳过，详见报告。",
        "沿用之前以相同设置评分的结果",
        "在 Ray 上重试过（第 2 次尝试，最多 3 次）；未隔离：结果不能用于招聘决定",
        "个，见报告",  # past the first flag: how many more the report holds
        "未评分（600 秒后超时）",
        "未评分（退出状态码 2）",
        "无：没有 GPU",
        "1 分 15 秒",
        "相似的提交",
    ):
        assert shown in text, shown
    assert prose(text) == [], text
    assert slips(text) == [], text


def test_the_leaderboard_of_an_english_drive_says_what_it_said() -> None:
    text = html_text(leaderboard("en"))
    for shown in (
        "Leaderboard: /tmp/batch_1",
        "2 of 5 submissions graded, quick profile, seed 7,",
        "Every graded submission:",
        "provisional (kernel): checks skipped, see the report.",
        "retried on Ray (attempt 2 of 3); not isolated: not for a hiring decision; the grader "
        "failed on part of it: ZeroDivisionError: division by zero",
        "more in the report",  # past the first flag: how many more the report holds
        "Not graded (timed out after 600 s)",
        "n/a: no GPU",
        "1 min 15 s",
        "Similar pairs",
    ):
        assert shown in text, shown


def test_the_leaderboards_csv_stays_in_english_in_a_chinese_drive() -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(drive_outcomes()))))
    assert list(rows[0])[:5] == ["rank", "candidate", "entry", "status", "score"]
    assert rows[0]["note"] == f"{KEPT}; provisional (kernel): checks skipped, see the report"
    assert rows[1]["kernel_ratio"] == "n/a: no GPU"
    assert rows[1]["first_flag"].startswith("scan, paged_attention.py:")
    assert "imports numpy (computes outside torch and Triton" in rows[1]["first_flag"]


SEAL_KEY = b"a test's seal key, 32 characters or more"


def sealed_report(folder: Path) -> Path:
    """`folder` holding a whole report as the grader writes one, for the submission named as
    the folder: sealed with `SEAL_KEY`."""
    report = full_marks_report()
    report["submission"] |= {"name": folder.name, "path": str(folder)}
    files = report["submission"]["files"]
    report["provenance"] = {"kit": "v1", "rubric": "r1", "files": provenance.files_checksum(files)}
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(provenance.sealed(report, SEAL_KEY)))
    return folder


def test_a_merged_leaderboard_is_in_the_drives_language(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """English reports merged with `--lang zh`: the leaderboard, each report's pages (drawn
    again, report.json as it was) and every line merge prints are Chinese."""
    one, two = sealed_report(tmp_path / "a"), sealed_report(tmp_path / "b")
    (tmp_path / "seal.key").write_bytes(SEAL_KEY)
    args = argparse.Namespace(
        merge=[one, two], out=tmp_path / "out", allow_mixed=False, lang="zh",
        seal_key=tmp_path / "seal.key", reviews=None,
    )  # fmt: skip
    assert merge.main(args) == 0
    page = (tmp_path / "out" / "leaderboard.html").read_text(encoding="utf-8")
    assert "排行榜：" in page
    assert english_words(html_text(page)) == [], html_text(page)
    for name in ("a", "b"):
        folder = tmp_path / "out" / name
        report = json.loads((folder / "report.json").read_text())
        assert language(report) == "en"  # as graded
        checks = {check["name"] for part in report["parts"].values() for check in part["checks"]}
        html = (folder / "report.html").read_text(encoding="utf-8")
        assert '<html lang="zh-CN">' in html
        words = [word for word in english_words(html_text(html)) if word not in checks]
        assert words == [], html_text(html)
        markdown = (folder / "report.md").read_text(encoding="utf-8")
        exempt = (tr("zh", "hypothesis"), tr("zh", "traceback"))
        text = markdown_kit_words(markdown, tr("zh", "environment_heading"), exempt)
        assert english_words(text) == [], text
    said = capsys.readouterr()
    assert english_words(said.out + said.err) == [], said
    assert slips(said.out + said.err) == [], said


def test_merges_refusals_are_in_the_drives_language(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A report merged beside its copy, and one graded with other settings: merge refuses them
    in the drive's language."""
    one = sealed_report(tmp_path / "a")
    shutil.copytree(one, tmp_path / "copy")
    other = json.loads((one / "report.json").read_text())
    other["environment"]["seed"] = 3
    (sealed_report(tmp_path / "b") / "report.json").write_text(
        json.dumps(provenance.sealed(other, SEAL_KEY))
    )
    (tmp_path / "seal.key").write_bytes(SEAL_KEY)
    args = argparse.Namespace(
        merge=[one, tmp_path / "copy", tmp_path / "b"], out=tmp_path / "out", allow_mixed=False,
        lang="zh", seal_key=tmp_path / "seal.key", reviews=None,
    )  # fmt: skip
    assert merge.main(args) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'copy'}：是 {one} 中那份报告的副本" in err, err
    assert "评分设置与其余报告不同：随机种子为 3（其余报告为 7）" in err, err
    assert [word for word in english_words(err) if word != "grade-all"] == [], err  # its name
    assert slips(err) == [], err


def test_grade_alls_first_line_names_the_profile_in_the_drives_language() -> None:
    line = grading_line("zh", 3, 2, "quick")
    assert line == "正在评分 3 份提交，每次 2 份（快速模式）……"
    assert (
        grading_line("en", 3, 2, "full") == "Grading 3 submissions, 2 at a time (full profile)..."
    )


# -- the simulation's page -----------------------------------------------------------------------


def test_the_simulations_page_of_a_chinese_report_has_no_english_words() -> None:
    report = golden("answer_key.json")
    written = copy.deepcopy(report["simulation"])
    text = html_text(simulation_html(report))
    for shown in (
        "连续批处理，连续预留：Orca (Max)",
        "每步生成的 token 数",
        "负载下池中存有 token",
    ):
        assert shown in text, shown
    assert english_words(text) == [], text
    assert slips(text) == [], text
    assert report["simulation"] == written  # report.json keeps it in English


def test_the_simulations_page_of_an_english_report_is_in_english() -> None:
    report = golden("answer_key.json") | {"language": "en"}
    page = simulation_html(report)
    assert report["simulation"]["headline"].split("\n")[0] in page.replace("&#39;", "'")
    assert "Tokens generated per step" in page
    assert "continuous, paged: block 16" in page


# -- compare -------------------------------------------------------------------------------------


def sides() -> tuple[Side, Side]:
    """Two Chinese reports that differ in every way `compare` shows: the kit, the seed, the
    device, a file, the checks, the parts and the timings."""
    a, b = golden("answer_key.json"), golden("fork_without_incref.json")
    for report, digest in ((a, "a1"), (b, "b2")):
        report["submission"]["files"] = dict.fromkeys(report["submission"]["files"], digest * 32)
    a["environment"] |= {"kit": "full", "platform": "Linux-6.1-x86_64", "pytest": "8.3.2"}
    b["environment"] |= {"kit": "candidate", "seed": None, "device": "NVIDIA H100"}
    return Side(Path("/tmp/a/report.json"), a), Side(Path("/tmp/b/report.json"), b)


def test_compares_chinese_terminal_text_and_page_have_no_english_words() -> None:
    a, b = sides()
    text = compare.render_text(a, b, "zh")
    for shown in (
        "由完整套件生成",
        "警告：A 由完整套件生成",
        "设备 A 为 cpu，B 为 NVIDIA H100",
        "总分",
    ):
        assert shown in text, shown
    assert "未通过，0 / 0.91：执行 manager.free(req) 之后" in text
    assert english_words(text) == [], text
    assert slips(text) == [], text
    page = html_text(compare.render_html(a, b, "zh"))
    assert "两份评分报告的对比" in page
    assert english_words(page) == [], page
    assert slips(page) == [], page


def test_compares_columns_stay_aligned_in_chinese() -> None:
    lines = compare.render_text(*sides(), "zh").splitlines()
    table = lines[lines.index("") + 1 : lines.index("", lines.index("") + 1)]
    assert {compare.columns(line) for line in table} == {compare.columns(table[-1])}
    assert compare.columns("部分 A") == 6


def write(folder: Path, report: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(json.dumps(report))
    return folder


@pytest.mark.parametrize(
    ("options", "heading", "title", "page_line"),
    [
        ([], "对比两份评分报告", "<title>评分报告对比</title>", "页面："),
        (["--lang", "en"], "Comparing two grade reports", "<title>Grade reports compared", "Page:"),
    ],
    ids=["report A's language", "--lang en"],
)
def test_compare_speaks_report_as_language_unless_told(
    tmp_path: Path, capsys: pytest.CaptureFixture, options: list[str], heading: str, title: str,
    page_line: str,
) -> None:  # fmt: skip
    a, b = sides()
    first, second = write(tmp_path / "a", a.report), write(tmp_path / "b", b.report)
    page = tmp_path / "compare.html"
    assert compare.main([str(first), str(second), "--html", str(page), *options]) == 0
    out = capsys.readouterr().out
    assert out.startswith(heading + "\n")
    assert f"\n{page_line}" in out
    assert title in page.read_text(encoding="utf-8")


def test_compare_says_what_is_not_a_report_in_chinese_with_lang_zh(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    good = write(tmp_path / "a", golden("answer_key.json"))
    assert compare.main([str(good), str(tmp_path / "missing.json"), "--lang", "zh"]) == 2
    err = capsys.readouterr().err
    assert "missing.json 不存在：请给出 report.json 或存放它的报告文件夹" in err
