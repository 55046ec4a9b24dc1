# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""A similar pair's page (`grader.similarity.page`) in the drive's language: a Chinese drive's
pages hold no English but the code, the names and the reference's origin; an English drive's
say what they said; `similarity_report` writes them in the language it is given. A known
implementation's side names, file by file, the reference matched and each run of matched lines
once."""

from dataclasses import replace
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.intake import Intake
from grader.similarity import corpus
from grader.similarity.corpus import Reference
from grader.similarity.drive import similarity_report
from grader.similarity.fingerprints import Fingerprint
from grader.similarity.page import pair_page
from grader.similarity.pairs import FileMatch, Pair, regions
from tests.grader.report.english import english_words, html_text

SOURCE = b"def take(pool, n):\n    return [pool.pop() for _ in range(n)]\n"
MATCH = FileMatch("block_allocator.py", 12, 0.9, 0.85, (((1, 2), (1, 2)),))
REFERENCE = Reference(
    name="ref_1",
    url="https://example.org/ref_1",
    path="ref/block_1.py",
    commit="0a1b2c3d",
    sha256="0a1b" * 16,
    compare_with=("block_allocator.py",),
    fingerprints=(),
    implementation="ref_1",
)
PAIRS = {
    "two submissions": Pair(
        "candidate_1",
        "candidate_2",
        (MATCH,),
        {"block_allocator.py": SOURCE},
        {"block_allocator.py": SOURCE},
    ),
    "a submission and a reference": Pair(
        "candidate_1",
        "ref_1",
        (replace(MATCH, reference=REFERENCE),),
        {"block_allocator.py": SOURCE},
        {},
        known=True,
    ),
}


@pytest.mark.parametrize("pair", PAIRS.values(), ids=PAIRS)
def test_a_chinese_drives_pair_page_has_no_english_words(pair: Pair) -> None:
    text = html_text(pair_page(pair, "zh"))
    assert "相似代码" in text
    assert "block_allocator.py：占左侧的 90%，占右侧的 85%（12 个共同指纹）" in text
    assert english_words(text) == [], text


def test_a_pair_page_names_the_references_origin_and_its_matched_lines() -> None:
    pair = PAIRS["a submission and a reference"]
    assert "左侧第 1-2 行：参考实现第 1-2 行" in html_text(pair_page(pair, "zh"))
    english = " ".join(html_text(pair_page(pair)).split())
    assert "ref_1: example.org/ref_1, ref/block_1.py at commit 0a1b2c3d (sha256 0a1b0a1b0a1b)." in (
        english
    )
    assert "Its code is not shipped with the kit; matched lines:" in english
    assert "left 1-2: reference 1-2" in english


def test_the_answer_key_is_named_by_its_path_in_the_kit(tmp_path: Path) -> None:
    """It has no URL and no commit: "answer key: solutions/block_allocator.py (sha256 ...)", no
    empty place where they would go; in Chinese, named in Chinese."""
    (tmp_path / "block_allocator.py").write_bytes(SOURCE)  # the candidate kit has no answer key
    (key,) = corpus.answer_key(tmp_path)
    match = replace(MATCH, reference=key)
    pair = Pair(
        "candidate_1", key.implementation, (match,), {"block_allocator.py": SOURCE}, {}, True
    )
    text = " ".join(html_text(pair_page(pair)).split())
    assert f"answer key: solutions/block_allocator.py (sha256 {key.sha256[:12]})" in text
    assert ": ," not in text
    chinese = html_text(pair_page(pair, "zh"))
    assert "参考答案：solutions/block_allocator.py" in chinese
    assert "answer key" not in chinese


def test_matched_lines_are_listed_as_runs_each_once() -> None:
    """Fingerprints of the same lines, or of lines that overlap or adjoin on both sides, make one
    run; a jump on either side starts another."""
    left = [Fingerprint(1, 25, 28), Fingerprint(2, 25, 32), Fingerprint(3, 25, 32),
            Fingerprint(4, 33, 35), Fingerprint(5, 40, 42), Fingerprint(6, 43, 44)]  # fmt: skip
    right = [Fingerprint(1, 25, 28), Fingerprint(2, 25, 32), Fingerprint(3, 25, 32),
             Fingerprint(4, 33, 35), Fingerprint(5, 40, 42), Fingerprint(6, 90, 91)]  # fmt: skip
    assert regions(left, right, {1, 2, 3, 4, 5, 6}) == (
        ((25, 35), (25, 35)),
        ((40, 42), (40, 42)),
        ((43, 44), (90, 91)),
    )
    pair = PAIRS["a submission and a reference"]
    (match,) = pair.files
    repeated = replace(match, regions=regions(left, right, {1, 2, 3}))
    text = " ".join(html_text(pair_page(replace(pair, files=(repeated,)))).split())
    assert text.count("left 25-32: reference 25-32") == 1


def test_an_english_drives_pair_page_says_what_it_said() -> None:
    text = " ".join(html_text(pair_page(PAIRS["two submissions"])).split())
    assert "Similar code: candidate_1 / candidate_2" in text
    assert "Shown for a reviewer to judge; it changes no score." in text
    assert "Left: candidate_1 Right: candidate_2" in text
    assert "block_allocator.py: 90% of the left, 85% of the right (12 shared fingerprints)" in text


def test_the_similarity_report_writes_its_pages_in_the_language_it_is_given(
    tmp_path: Path,
) -> None:
    code = {"block_allocator.py": (KIT_ROOT / "kernels" / "reference.py").read_bytes()}
    drive = [Intake("candidate_1", "a", code), Intake("candidate_2", "b", dict(code))]  # a copy
    rows = similarity_report(drive, tmp_path, lang="zh")
    assert rows
    page = (tmp_path / rows[0].page).read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in page
    assert "<title>相似代码：" in page
