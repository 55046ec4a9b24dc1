"""A held-out test of the similarity, tried as a candidate who copied would: each mechanical rewrite
(`rewrites.py`), and each two of those that add tokens everywhere, applied to the answer key and
to nano-vllm's block manager (a known implementation the corpus holds), is still flagged against
its source, file by file, at the default threshold, in grade-all's similar pairs (`find_pairs`);
and the independent implementations (`tests/submissions/independent/`, written from the contract
alone, and the allocators of `alternatives/`) are flagged against nothing. The README's method
paragraph quotes the figures (`figures`)."""

import ast
import itertools

import pytest

from grader import KIT_ROOT
from grader.parts import SUBMISSION_FILES
from grader.similarity import corpus, known, pairs
from grader.similarity.pairs import DEFAULT_THRESHOLD, find_pairs
from tests.end_to_end.similarity.copies import alternatives, folder_files, intake, key_files
from tests.end_to_end.similarity.rewrites import REWRITES, Rewrite, each_body

REFERENCES = corpus.load()
INDEPENDENT = KIT_ROOT / "tests" / "submissions" / "independent"
NANO_VLLM = KIT_ROOT / "tests" / "submissions" / "public" / "nano_vllm_block_manager.py"
TOKENS_EVERYWHERE = (  # the rewrites that leave no run of tokens as it was
    "dead_store_after_every_statement",
    "getattr_everywhere",
    "double_negated_tests",
    "string_after_every_statement",
)
CASES = [(name,) for name in REWRITES] + list(itertools.combinations(TOKENS_EVERYWHERE, 2))


def rewritten(source: bytes, names: tuple[str, ...]) -> bytes:
    for name in names:
        source = REWRITES[name](source)
    return source


def flagged_files(copy: dict[str, bytes], implementation: str) -> set[str]:
    """The files of `copy` that grade-all's similar pairs flag against `implementation`."""
    found = find_pairs([intake("copy", copy)], REFERENCES)
    return {
        match.file
        for pair in found
        if pair.right == implementation
        for match in pair.files
        if match.score >= DEFAULT_THRESHOLD
    }


@pytest.mark.parametrize("names", CASES, ids="+".join)
def test_a_rewritten_copy_of_the_answer_key_is_flagged_file_by_file(names) -> None:
    copy = {name: rewritten(data, names) for name, data in key_files().items()}
    assert copy != key_files()
    assert flagged_files(copy, "answer key") == set(SUBMISSION_FILES)


@pytest.mark.parametrize("names", CASES, ids="+".join)
def test_a_rewritten_copy_of_nano_vllm_is_flagged(names) -> None:
    copy = {"block_allocator.py": rewritten(NANO_VLLM.read_bytes(), names)}
    assert flagged_files(copy, "nano-vllm block_manager.py") == {"block_allocator.py"}


def independent() -> list:
    """The independent implementations: ten of every file, and four more allocators."""
    folders = sorted(path for path in INDEPENDENT.iterdir() if path.is_dir())
    return [intake(path.name, folder_files(path)) for path in folders] + alternatives()


def test_there_are_ten_independent_implementations_of_every_file() -> None:
    for name in SUBMISSION_FILES:
        assert sum(name in submission.files for submission in independent()) >= 10, name


def test_independent_implementations_are_flagged_against_nothing() -> None:
    """Each with each, with the answer key's own copy, and with the corpus: the one pair is the
    answer key's copy against the answer key, and no independent file is flagged in its own
    report."""
    drive = [*independent(), intake("key", key_files())]
    assert {(pair.left, pair.right) for pair in find_pairs(drive, REFERENCES)} == {
        ("key", "answer key")
    }
    assert all(known.flags(submission) == [] for submission in independent())


def call_after_every(nth: int) -> Rewrite:
    """A call (which the normal form keeps: it may do anything) after every `nth` statement."""

    def rewrite(source: bytes) -> bytes:
        tree = ast.parse(source)
        noise = "len(())"
        for body in each_body(tree):
            body[:] = [
                new
                for at, stmt in enumerate(body, 1)
                for new in ([stmt, ast.parse(noise).body[0]] if at % nth == 0 else [stmt])
            ]
        return ast.unparse(ast.fix_missing_locations(tree)).encode()

    return rewrite


def test_merging_matches_keeps_a_copy_with_calls_inserted_in_one_piece(monkeypatch) -> None:
    """A call after every third statement cuts most k-grams of a copy: matches merged across
    the gaps (`pairs.merged`) keep each file of it flagged; without merging, some are not."""
    copy = {name: call_after_every(3)(data) for name, data in key_files().items()}
    assert flagged_files(copy, "answer key") == set(SUBMISSION_FILES)
    monkeypatch.setattr(pairs, "MERGE_GAP", 0)
    assert flagged_files(copy, "answer key") < set(SUBMISSION_FILES)


def figures(cases: list[tuple[str, ...]] = CASES) -> dict[str, float]:
    """Recall: the rewritten files flagged against their source, of all rewritten files (the
    answer key's five and nano-vllm's one, for each case, each copy graded in a drive of its
    own). Precision: of the files flagged, in those drives and in a drive of the independent
    implementations, those that are copies. And the highest share between two independent
    files, in percent."""
    copies, caught = 0, 0
    for names in cases:
        copies += len(SUBMISSION_FILES) + 1
        key = {name: rewritten(data, names) for name, data in key_files().items()}
        caught += len(flagged_files(key, "answer key"))
        nano = {"block_allocator.py": rewritten(NANO_VLLM.read_bytes(), names)}
        caught += len(flagged_files(nano, "nano-vllm block_manager.py"))
    shares = [
        match.score
        for pair in find_pairs(independent(), REFERENCES, threshold=0.0)
        for match in pair.files
    ]
    wrong = sum(share >= DEFAULT_THRESHOLD for share in shares)
    return {
        "recall": caught / copies,
        "precision": caught / (caught + wrong),
        "copies": copies,
        "highest independent share": round(100 * max(shares)),
    }


def test_the_figures_the_readme_quotes() -> None:
    found = figures()
    readme = " ".join((KIT_ROOT / "README.md").read_text().split())
    assert (found["recall"], found["precision"]) == (1.0, 1.0)
    assert f"{len(CASES)} rewrites" in readme
    assert f"recall {found['copies']} of {found['copies']} files" in readme
    assert f"none of {len(independent())} independent implementations" in readme
    assert f"the highest share between two of them {found['highest independent share']}%" in readme
