"""What the similarity report must flag and must not: copies disguised the usual ways, and the
kit's independent correct submissions (which must stay below the threshold); a pair per
submission pair (or submission and known implementation), best first; and a copy of known code
flagged in the submission's own report (`similarity.known`)."""

import base64
import json
import marshal
import random
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.drive import outputs
from grader.drive.command import similar_pairs
from grader.parts import SUBMISSION_FILES
from grader.report.i18n import tr
from grader.similarity import corpus, known
from grader.similarity.drive import similarity_report
from grader.similarity.fingerprints import fingerprints
from grader.similarity.page import pair_page
from grader.similarity.pairs import DEFAULT_THRESHOLD, find_pairs
from tests.end_to_end.similarity.copies import (
    alternatives,
    commented_and_rewrapped,
    folder_files,
    independent_assignments_swapped,
    intake,
    key_files,
    renamed_and_reordered,
    semicolons_and_parentheses,
)

DISGUISES = [
    renamed_and_reordered,
    commented_and_rewrapped,
    semicolons_and_parentheses,
    independent_assignments_swapped,
]

REFERENCES = corpus.load()


def pair_names(pairs) -> set[tuple[str, str]]:
    return {(pair.left, pair.right) for pair in pairs}


@pytest.mark.parametrize("disguise", DISGUISES)
def test_a_disguised_copy_is_flagged(disguise) -> None:
    original = intake("original", key_files())
    copy = intake("copy", {name: disguise(data) for name, data in key_files().items()})
    pairs = find_pairs([original, copy], REFERENCES)
    (pair,) = [p for p in pairs if not p.known]
    assert {match.file for match in pair.files if match.score >= DEFAULT_THRESHOLD} == set(
        key_files()
    )
    (against_key,) = [p for p in pairs if p.left == "copy" and p.known]
    assert against_key.right == "answer key"
    assert {m.file for m in against_key.files if m.score >= DEFAULT_THRESHOLD} == set(key_files())
    assert {flag["file"] for flag in known.flags(copy)} == set(key_files())


def test_a_copy_of_a_reference_allocator_is_flagged() -> None:
    """The answer key stands in for a public allocator here (the public ones are shipped as
    fingerprints only): its methods renamed, reordered and wrapped in a class of one's own."""
    source = renamed_and_reordered(
        (KIT_ROOT / "solutions" / "block_allocator.py").read_bytes(), seed=7
    )
    extra = b"\n\ndef helper(pool):\n    return [b for b in pool if b % 2 == 0]\n"
    borrowed = intake("borrowed", {"block_allocator.py": source + extra})
    pairs = find_pairs([borrowed], REFERENCES)
    assert pair_names(pairs) == {("borrowed", "answer key")}
    assert pairs[0].files[0].share_left >= DEFAULT_THRESHOLD
    assert pairs[0].files[0].reference.path == "solutions/block_allocator.py"
    (flag,) = known.flags(borrowed)
    assert flag["file"] == "block_allocator.py"
    assert flag["message"].startswith("matches the answer key: ")


@pytest.mark.parametrize("file", ["block_allocator.py", "prefix_cache.py"])
@pytest.mark.parametrize("disguise", DISGUISES)
def test_a_copy_of_nano_vllm_is_flagged(disguise, file: str) -> None:
    """nano-vllm's block manager (a verbatim fixture; the corpus holds only its fingerprints),
    disguised, handed in as a block allocator or as a prefix cache (its blocks are hashed and
    reused)."""
    source = KIT_ROOT / "tests" / "submissions" / "public" / "nano_vllm_block_manager.py"
    borrowed = intake("borrowed", {file: disguise(source.read_bytes())})
    pairs = find_pairs([borrowed], REFERENCES)
    assert ("borrowed", "nano-vllm block_manager.py") in pair_names(pairs)
    flags = [flag["message"] for flag in known.flags(borrowed)]
    assert any(
        message.startswith("matches a public implementation, nano-vllm block_manager.py: ")
        for message in flags
    ), flags


def test_the_kit_s_correct_alternatives_are_not_flagged() -> None:
    """Four allocators (FIFO, LIFO, heap, bitmap) and the answer key: each with each, and each
    with the reference corpus (the answer key's prefix cache with vLLM v1's block pool and
    nano-vllm's block manager too). Only the answer key's own copy matches the answer key: one
    pair, holding each submission file; nothing else is flagged in a submission's report."""
    submissions = [*alternatives(), intake("key", key_files())]
    pairs = find_pairs(submissions, REFERENCES)
    assert pair_names(pairs) == {("key", "answer key")}
    assert {match.file for match in pairs[0].files} == set(SUBMISSION_FILES)
    assert all(known.flags(submission) == [] for submission in alternatives())


def test_a_verbatim_copy_of_the_answer_key_is_flagged_in_its_own_report() -> None:
    """Each file, with the answer key and the share: what `grade` puts in the report's
    `integrity`. The stubs match no known code."""
    flags = known.flags(intake("copy", key_files()))
    assert flags == [
        {"source": "similarity", "file": file, "message": "matches the answer key: 100%"}
        for file in sorted(key_files())
    ]
    assert known.flags(intake("stubs", folder_files(KIT_ROOT / "exercises"))) == []


def own_code(seed: int = 0) -> bytes:
    """A function of random arithmetic: code no other file holds."""
    rng = random.Random(seed)
    lines = [f"    v = v {rng.choice('+-*&|^')} {rng.randint(1, 99)}\n" for _ in range(60)]
    return ("def own(v):\n" + "".join(lines) + "    return v\n").encode()


def test_pairs_are_one_per_submission_pair_best_first_known_code_first_on_a_tie() -> None:
    """Two verbatim copies of the answer key and one whose scheduler has code of its own in place
    of its last method: a pair per two submissions, or a submission and the answer key, holding
    every matched file, best file first. Every pair's best file is a whole copy, so they tie: the
    answer key's pairs come first, then those whose files match more on average, whatever the
    names."""
    key = key_files()
    last_method = key["scheduler.py"].rindex(b"\n    def ")
    own = {**key, "scheduler.py": key["scheduler.py"][:last_method] + b"\n\n" + own_code()}
    drive = [intake("alice", key), intake("bob", dict(key)), intake("aaron", own)]
    pairs = find_pairs(drive, REFERENCES)
    assert [(p.left, p.right) for p in pairs] == [
        ("alice", "answer key"),
        ("bob", "answer key"),
        ("aaron", "answer key"),
        ("alice", "bob"),
        ("alice", "aaron"),
        ("bob", "aaron"),
    ]
    assert all(pair.score == 1.0 for pair in pairs)
    for pair in pairs:
        scores = [match.score for match in pair.files]
        assert scores == sorted(scores, reverse=True)
        assert {match.file for match in pair.files} == set(key)
    assert pairs[2].files[-1].file == "scheduler.py"
    assert DEFAULT_THRESHOLD <= pairs[2].files[-1].score < 1.0


def test_untouched_stubs_are_not_flagged() -> None:
    stubs = folder_files(KIT_ROOT / "exercises")
    assert find_pairs([intake("a", stubs), intake("b", dict(stubs))], REFERENCES) == []


def test_the_corpus_holds_no_source_text() -> None:
    text = (Path(corpus.__file__).with_name("corpus.json")).read_text()
    document = json.loads(text)
    assert {key for entry in document["references"] for key in entry} == {
        "name",
        "url",
        "path",
        "commit",
        "sha256",
        "compare_with",
        "fingerprints",
    }
    lines = {
        line.strip()
        for path in (KIT_ROOT / "solutions").glob("*.py")
        for line in path.read_text().splitlines()
        if len(line.strip()) > 8
    }
    assert not [line for line in lines if line in text]


def test_the_answer_key_is_fingerprinted_from_the_kit_never_shipped() -> None:
    """The candidate kit ships `corpus.json` without `solutions/`: no trace of the answer key."""
    shipped = json.loads(corpus.CORPUS.read_text())["references"]
    assert not [ref["path"] for ref in shipped if ref["path"].startswith("solutions/")]
    key = [ref for ref in REFERENCES if ref.path.startswith("solutions/")]
    assert {ref.path for ref in key} == {f"solutions/{name}" for name in SUBMISSION_FILES}
    for ref in key:
        assert ref.fingerprints == tuple(fingerprints((KIT_ROOT / ref.path).read_bytes()))


def test_the_page_escapes_hostile_names_and_code(tmp_path: Path) -> None:
    hostile = "<script>alert(1)</script>"
    code = key_files()["scheduler.py"]
    submissions = [
        intake(hostile, {"scheduler.py": code + b"\n# </pre><script>alert(2)</script>\n"}),
        intake("b", {"scheduler.py": code}),
    ]
    rows = similarity_report(submissions, tmp_path)
    assert {(row.left, row.right) for row in rows} >= {(hostile, "b")}
    for row in rows:
        page = (tmp_path / row.page).read_text()
        assert "<script" not in page
        assert "http" not in page.replace("http-equiv", "")
        assert "Content-Security-Policy" in page
    assert "&lt;script&gt;alert(1)" in pair_page(
        next(p for p in find_pairs(submissions) if not p.known)
    )
    assert json.loads((tmp_path / "similarity" / "similarity.json").read_text())["pairs"]


def test_pairs_come_only_from_shared_fingerprints() -> None:
    """Twenty distinct one-function files: no pair, whatever the threshold."""
    files = [
        intake(
            f"s{n}",
            {
                "scheduler.py": "\n".join(
                    f"def f{i}(x):\n    return x{' + 1' * (n + i)}" for i in range(3)
                ).encode()
            },
        )
        for n in range(20)
    ]
    assert find_pairs(files, threshold=0.0) == []


def blob(source: bytes) -> bytes:
    """`source` as leaked bytecode: compiled, marshalled, base64-encoded, run by `exec`."""
    code = base64.b64encode(marshal.dumps(compile(source, "block_allocator.py", "exec")))
    return b'import base64, marshal\n\nexec(marshal.loads(base64.b64decode("' + code + b'")))\n'


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_file_that_runs_decoded_code_is_listed_as_obfuscated_not_as_unmatched(
    tmp_path: Path, lang: str
) -> None:
    """The answer key's allocator handed in as a bytecode blob matches nothing, so no pair: the
    leaderboard says it cannot be compared, and never that no code is shared."""
    folder = tmp_path / "blob"
    folder.mkdir()
    (folder / "block_allocator.py").write_bytes(blob(key_files()["block_allocator.py"]))
    rows = similar_pairs({"blob": folder}, tmp_path / "out", lang)
    (row,) = rows
    assert row["left"] == "blob"
    assert row["file"] == "block_allocator.py"
    page = outputs.write_all([], tmp_path / "out", {"lang": lang}, rows).read_text()
    said = {"en": ("obfuscated: cannot be compared", "line 3 reads exec"), "zh": ("经过混淆",)}
    assert all(text in page for text in said[lang]), page
    assert tr(lang, "board_no_similar") not in page
