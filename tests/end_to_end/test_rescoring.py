"""An allocator bug costs points in part 1 only: where the candidate's allocator fails an allocator
check, the parts built on it through the manager (their `regraded` modules in `grader/parts.toml`)
that lost points are graded again with the kit's allocator in its place, and keep the better
grading, with a note saying so (`test_golden_reports`: one that lost none is graded once). The
kit must ship the answer key for that: without it (the candidate bundle) the parts keep the
candidate's allocator, and the note says that too.

Each submission is graded on part 2 alone, so the allocator's checks run only to decide (and are
not reported); `test_buggy` grades every part together.

Where a check of one part fails on a rule another part owns (`rules.py`), it is not graded where
a check of that part fails on the same rule, and costs its own part where none does. Graded on
part 6 alone, part 2's checks of the rule run only to decide, as part 1's do above. Two bugs in
two parts each cost their own part.
"""

import json
import subprocess
import sys
from concurrent.futures import Future
from pathlib import Path

import pytest

from grader.ungraded import OTHER_PART, reason_of
from tests.end_to_end.test_buggy import MUTANTS_BY_ID
from tests.grading import (
    CLI_TIMEOUT,
    EXERCISES,
    KIT_ROOT,
    Edit,
    Graded,
    build_submission,
    concurrently,
    grade,
    grade_shared,
)

# allocate(n) hands out its first id twice.
(DUPLICATE,) = MUTANTS_BY_ID["allocate_returns_a_duplicate"].edits
WITHOUT_THE_KEY = (
    "import sys, grader.grade\n"
    "grader.grade.answer_key_files = lambda: None\n"
    "from grader.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def grade_without_the_key(submission: Path, *options: str) -> Graded:
    """`grade`, as the candidate bundle would: the grader finds no answer key."""
    out = submission.parent / f"{submission.name}-bundle-report"
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_KEY, str(submission), "--out", str(out), *options],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=True,
    )  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    return Graded(done.returncode, done.stdout, done.stderr, report)


# A refused decode that still counts its token: part 2's rule, which part 6's checks meet too.
DECODE_BUG = "decode_increments_before_an_oom"
# The same, only where a copy-on-write is refused: part 6's own rule, which part 2 never meets.
COPY_BUG = "copy_on_write_counts_its_token_first"
# Part 6's checks that refuse a copy-on-write for want of a block.
REFUSED_COPIES = ("sharing/copy_on_write_without_a_free_block_is_refused",
                  "sharing/random_fork_decode_and_free")  # fmt: skip

# allocate(n) leaves its first id free: every allocate(1) breaks part 1's rule at once.
HELD = "allocate_returns_an_id_already_held"

# Two bugs, in two parts: part 6's refused copy that counts its token, beside part 2's free that
# keeps its table (which fails part 2's refused decodes on another rule); part 6's leaking copy,
# beside part 1's pool without block 0 (part 6 then graded again on the kit's allocator).
TWO_BUGS = {
    "copy_and_free": (COPY_BUG, "free_does_not_clear_the_table"),
    "pool_and_leak": ("pool_without_block_0", "copy_on_write_keeps_the_old_reference"),
}


def edits_of(mutant: str) -> tuple[Edit, ...]:
    return MUTANTS_BY_ID[mutant].edits


# Part 6 in the allocator: an `incref` left a stub. The kit's allocator would supply it.
INCREF_BODY = 'ValueError if it is free."""\n'  # the end of incref's docstring
STUB_INCREF = Edit(
    "block_allocator.py",
    INCREF_BODY,
    f"{INCREF_BODY}        raise NotImplementedError\n",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, shared_gradings: Path) -> dict[str, Future[Graded]]:
    root = tmp_path_factory.mktemp("rescoring")
    folder = build_submission(root / "duplicate", edits=[DUPLICATE])
    no_incref = build_submission(root / "no_incref", edits=[DUPLICATE, STUB_INCREF])
    held = build_submission(root / "held", edits=[*MUTANTS_BY_ID[HELD].edits, STUB_INCREF])
    two_bugs = {
        name: build_submission(root / name, edits=[*edits_of(first), *edits_of(second)])
        for name, (first, second) in TWO_BUGS.items()
    }
    decode_bug = build_submission(root / "decode_bug", edits=MUTANTS_BY_ID[DECODE_BUG].edits)
    copy_bug = MUTANTS_BY_ID[COPY_BUG]  # as test_buggy grades it, on every part it reaches
    return concurrently({
        "decode_bug": lambda: grade(decode_bug, "--parts", "sharing"),
        "copy_bug": lambda: grade_shared(
            shared_gradings, copy_bug.id, copy_bug.options, edits=copy_bug.edits
        ),
        "kit": lambda: grade(folder, "--parts", "decode"),
        "bundle": lambda: grade_without_the_key(folder, "--parts", "decode"),
        "no_incref": lambda: grade(no_incref, "--parts", "sharing"),
        "held": lambda: grade(held, "--parts", "sharing"),
        **{
            name: lambda name=name: grade(two_bugs[name], "--parts", "allocator,decode,sharing")
            for name in TWO_BUGS
        },
        "stubs": lambda: grade(EXERCISES, "--parts", "decode", out=root / "stubs"),
    })  # fmt: skip


def test_the_kit_grades_part_2_with_its_own_allocator(graded: dict[str, Future[Graded]]):
    result = graded["kit"].result()
    result.assert_clean()
    assert result.score("decode") == result.max_score("decode") > 0, result.describe("decode")
    assert "kit's reference block_allocator.py" in result.part("decode")["note"]
    rescored = result.report["rescored"]["decode"]
    assert rescored["kept"] == "kit", rescored
    assert rescored["own"] < rescored["kit"] == result.score("decode"), rescored
    assert "allocator" not in result.report["parts"], "the allocator's run was reported"


def test_without_the_answer_key_the_candidates_allocator_stays(
    graded: dict[str, Future[Graded]],
):
    """Part 2 keeps the candidate's allocator, and its checks that meet the allocator's bug on
    part 1's rule are left to part 1 (`test_the_kit_grades_part_2_with_its_own_allocator`: the
    same checks pass on the kit's)."""
    result = graded["bundle"].result()
    result.assert_clean()
    assert "your own block_allocator.py" in result.part("decode")["note"]
    assert result.report["rescored"] == {}
    left = [check for check in result.part("decode")["checks"] if check["status"] == "skipped"]
    assert left, result.describe("decode")
    for check in left:
        assert check["message"].startswith("not graded here: it fails on a rule of the "
                                           "allocator part"), check["message"]  # fmt: skip


@pytest.mark.parametrize("graded_as", ["no_incref", "held"])
def test_sharing_is_not_graded_again_where_its_refcounts_fail(
    graded: dict[str, Future[Graded]], graded_as: str
):
    """incref and ref_count are part 6's, in the allocator's file: failing part 1 on purpose
    must not buy them from the kit, even where every reference count check meets part 1's bug
    before it calls incref (`held`), and is left to part 1."""
    result = graded[graded_as].result()
    result.assert_clean()
    assert "sharing" not in result.report["rescored"], result.report["rescored"]
    assert result.score("sharing") < result.max_score("sharing") / 2, result.describe("sharing")


def test_the_untouched_stubs_are_not_graded_again(graded: dict[str, Future[Graded]]):
    """The stubs' allocator fails part 1, but their manager is a stub too: the kit's allocator
    could not help it, so part 2 is graded once."""
    result = graded["stubs"].result()
    assert result.report["rescored"] == {}
    assert "again, with the kit's" not in result.stderr, result.stderr
    assert result.score("decode") == 0


def test_a_failure_on_another_parts_failed_rule_is_left_to_that_part(
    graded: dict[str, Future[Graded]],
):
    """Part 6's checks that meet part 2's bug are left out of part 6's maximum, naming part 2's
    check of the rule, which fails on its own run; nothing of part 6 is pending."""
    result = graded["decode_bug"].result()
    result.assert_clean()
    sharing = result.part("sharing")
    assert result.score("sharing") == result.max_score("sharing") > 0, result.describe("sharing")
    left = {check["id"]: check for check in sharing["checks"] if check["status"] == "skipped"}
    assert set(left) == set(REFUSED_COPIES), result.describe("sharing")
    for check in left.values():
        assert check["message"].startswith("not graded here: it fails on a rule of the decode "
                                           "part, which decode/"), check["message"]  # fmt: skip
        assert "fails on too" in check["message"], check["message"]
        assert "seq_len" in check["message"], check["message"]
        assert check["counterexample"], check
    points = round(sum(check["max_points"] for check in left.values()), 2)
    ungraded = [(item["id"], item["points"]) for item in sharing["ungraded"]]
    assert ungraded == [("other_part", points)], ungraded
    assert "provisional" not in sharing, sharing["provisional"]
    assert "decode" not in result.report["parts"], "part 2's run was reported"


def test_a_failure_on_another_parts_rule_that_passes_there_costs_this_part(
    graded: dict[str, Future[Graded]],
):
    """The same slip where only part 6's copy-on-write makes it: part 2's checks pass, so part
    6 loses the points, and part 2 none."""
    result = graded["copy_bug"].result()
    result.assert_clean()
    assert result.score("decode") == result.max_score("decode") > 0, result.describe("decode")
    sharing = result.part("sharing")
    statuses = {check["id"]: check["status"] for check in sharing["checks"]}
    assert statuses[REFUSED_COPIES[0]] == "failed", result.describe("sharing")
    assert "skipped" not in statuses.values(), result.describe("sharing")
    assert result.score("sharing") < result.max_score("sharing"), result.describe("sharing")


@pytest.mark.parametrize("name", list(TWO_BUGS))
def test_two_bugs_in_two_parts_each_cost_their_own_part(
    graded: dict[str, Future[Graded]], name: str
) -> None:
    """Part 6's bug is charged to part 6 although part 1 or 2 fails too: no check of part 6 is
    left to a part that fails only on another rule, or whose bug did not run there."""
    result = graded[name].result()
    result.assert_clean()
    own, other = (MUTANTS_BY_ID[mutant].part for mutant in TWO_BUGS[name])
    assert result.score(other) < result.max_score(other), result.describe(other)
    checks = result.part(own)["checks"]
    left = [check["id"] for check in checks if reason_of(check["message"])[0] == OTHER_PART]
    assert not left, result.describe(own)
    assert result.score(own) < result.max_score(own), result.describe(own)
