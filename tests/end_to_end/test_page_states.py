"""The report page in headless Chromium, in the states a candidate's own runs put it in: graded
from a folder deep inside a .zip, with skipped checks counted apart, in Chinese, and left as it
was by a run that was interrupted or refused (an unknown rubric name).

Each page is opened with no console error and what it shows is read in the browser; the Chinese
page's text must be drawn with a font that has Chinese glyphs (`cjk_font`), not as boxes. Its
screenshots are kept in `tests/artifacts/` (git-ignored).
"""

import os
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.parts import PARTS
from grader.report.i18n import tr
from tests.browser import Browser, Tab, say
from tests.ctrl_c import sigint_at_default
from tests.grader.report.english import english_words, html_text
from tests.grading import (
    CLI_TIMEOUT,
    EXERCISES,
    KIT_ROOT,
    SOLUTIONS,
    Edit,
    Graded,
    build_submission,
    grade,
    run_grader,
)

# The decode part's first check never returns: the grading is under way when Ctrl-C comes.
HANGING = Edit(
    "kv_cache_manager.py",
    "        if block_size < 1:\n",
    "        while True:\n            pass\n        if block_size < 1:\n",
)
INPUT_LINE = "document.querySelector('#input').innerText"
PART_ROWS = "[...document.querySelectorAll('.part-row')].map((row) => row.innerText)"
# Scripts that share a name with the kit's Chinese text, for `Tab.fonts`: Chinese glyphs drawn
# by a font that has them.
CHINESE = ("WenQuanYi", "Noto Sans CJK", "Noto Serif CJK", "Droid Sans Fallback", "AR PL")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("page-states")


@pytest.fixture
def tab_of(browser: Browser) -> Iterator:
    """Open a page in a tab of its own; every tab is closed after the test."""
    tabs: list[Tab] = []

    def open_page(page: Path) -> Tab:
        tabs.append(Tab(browser, page))
        return tabs[-1]

    yield open_page
    for tab in tabs:
        tab.close()


@pytest.fixture(scope="module")
def nested(folder: Path) -> tuple[Path, Graded]:
    """The answer key as a .zip of `submission/exercises/` (a note beside it), graded on part 1
    into `folder/nested`."""
    archive = folder / "nested.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(SOLUTIONS.glob("*.py")):
            bundle.write(path, f"submission/exercises/{path.name}")
        bundle.writestr("submission/README.md", "# my notes\n")
    return archive, grade(archive, "--parts", "allocator", out=folder / "nested")


def test_a_nested_submission_says_which_folder_it_was_graded_from(
    tab_of, nested: tuple[Path, Graded], folder: Path
) -> None:
    archive, graded = nested
    assert graded.score("allocator") == graded.max_score("allocator") > 0
    tab = tab_of(folder / "nested" / "report.html")
    assert tab.console_errors() == []
    path = str(archive.resolve())
    expected = tr("en", "graded_from_folder", path=path, folder="submission/exercises/")
    assert tab.evaluate(INPUT_LINE) == expected


def test_skipped_checks_are_counted_apart(tab_of, folder: Path) -> None:
    graded = grade(EXERCISES, "--parts", "allocator,kernel", out=folder / "stubs")
    kernel = graded.report["parts"]["kernel"]["checks"]
    ran = [check for check in kernel if check["status"] != "skipped"]
    skipped = len(kernel) - len(ran)
    assert ran, "the kernel part's stubs fail the checks that run here"
    assert skipped, "without CUDA, the kernel part skips its CUDA checks"
    tab = tab_of(folder / "stubs" / "report.html")
    assert tab.console_errors() == []
    rows = tab.evaluate(PART_ROWS)
    assert f"0 of {len(ran)} checks passed, {skipped} skipped" in rows[1], rows
    assert "0 of 8 checks passed" in rows[0], rows
    assert "skipped" not in rows[0], rows


def test_a_chinese_page_shows_chinese_characters(
    tab_of, folder: Path, pytestconfig: pytest.Config
) -> None:
    graded = grade(EXERCISES, "--parts", "allocator,kernel", "--lang", "zh", out=folder / "zh")
    page = folder / "zh" / "report.html"
    tab = tab_of(page)
    assert tab.console_errors() == []
    fonts = tab.fonts("h2")  # "各部分": Chinese text, drawn by a font with its glyphs
    assert any(family.startswith(CHINESE) and glyphs for family, glyphs in fonts.items()), fonts
    words = english_words(html_text(page.read_text(encoding="utf-8")))
    assert [word for word in words if word != graded.report["submission"]["name"]] == []
    shots = tab.screenshots("report-zh")
    say(pytestconfig, f"\nThe Chinese report page: {', '.join(map(str, shots))}")


def test_an_interrupted_run_leaves_the_earlier_page(tab_of, folder: Path, tmp_path: Path) -> None:
    out = folder / "interrupted"
    hanging = build_submission(tmp_path / "solutions", edits=[HANGING])
    grade(hanging, "--parts", "allocator", out=out)  # its allocator is the answer key's
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    command = [sys.executable, "-m", "grader", str(hanging), "--parts", "allocator,decode"]
    grading = subprocess.Popen(
        [*command, "--out", str(out)],
        cwd=KIT_ROOT,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a terminal's job: Ctrl-C goes to all of it
        preexec_fn=sigint_at_default,
    )
    try:
        for line in grading.stderr:
            if line.lstrip().startswith("decode"):  # its progress line: the hanging part runs
                break
        os.killpg(grading.pid, signal.SIGINT)
        assert grading.wait(timeout=CLI_TIMEOUT) == 130
    finally:
        if grading.poll() is None:
            os.killpg(grading.pid, signal.SIGKILL)
            grading.wait()
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    tab = tab_of(out / "report.html")
    assert tab.console_errors() == []
    assert tab.evaluate(INPUT_LINE) == tr("en", "graded_from", path=str(hanging.resolve()))


def test_an_unknown_rubric_name_leaves_the_earlier_page(
    tab_of, nested: tuple[Path, Graded], folder: Path
) -> None:
    archive, _ = nested
    out = folder / "nested"
    before = (out / "report.html").read_bytes()
    rubric = folder / "rubric.toml"
    weights = "".join(f"{part.id} = {part.weight}\n" for part in PARTS.values())
    rubric.write_text(f'[weights]\n{weights}[points]\n"allocator/allocate_timing" = 1\n')
    refused = run_grader(archive, out, "--parts", "allocator", "--rubric", str(rubric))
    assert refused.returncode == 2, refused
    assert "'allocator/allocate_timing': no such check" in refused.stderr, refused
    assert (out / "report.html").read_bytes() == before
    tab = tab_of(out / "report.html")
    assert tab.console_errors() == []
    assert "submission/exercises/" in tab.evaluate(INPUT_LINE)
