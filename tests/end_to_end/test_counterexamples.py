"""Counterexamples that run: a failed check's counterexample, taken from the report, fails when a
candidate runs it on their files, and passes on the answer key's.

Mutants of the other end-to-end tests (test_buggy.py, test_scheduler.py, test_kernel.py), one
or two per part, each graded as that test grades it (the same grading, graded once: its parts,
the quick profile). For each failed check of the mutant's own part (up to a mutant's `limit`)
the counterexample is written into a copy of the kit's layout, the mutant's files as the package
it imports (the graded folder's name), and run with `python`: it must stop with an exception
raised by its last line (its final assert, or the candidate's own exception). With the answer
key's files as that package it must exit 0; and pasted into the REPL line by line, it must read
with no SyntaxError. (Each run is a child forked from a Python that has imported torch,
`tests/fork_server.py`: the script runs as `python` runs it, without paying for that import.)

The allocator's cost growth counterexample is timed: it runs the workload on a small and a large
pool, in the state where the mutant did worst, and holds the growth to 3 times the reference's
(the mutants' growth is 45x and 100x, the answer key's about 1x, both measured in the same
run). A timed counterexample measures the mutant again, at another moment: it is run only where
its check's ratio was at least `CLEARED` times its limit in the grading (a slip of a few percent
past the limit may land on either side).
"""

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.parts import PARTS
from tests.end_to_end.test_buggy import MUTANTS_BY_ID
from tests.end_to_end.test_kernel import BUGGY
from tests.end_to_end.test_scheduler import MUTANTS as SCHEDULER_MUTANTS
from tests.grading import SOLUTIONS, Edit, concurrently, grade_shared
from tests.replay import ForkedRuns, Ran, assert_pastes_into_the_repl, kit

KERNELS = {buggy.id: buggy for buggy in BUGGY}
SCHEDULERS = {mutant.id: mutant for mutant in SCHEDULER_MUTANTS}
CLEARED = 1.5  # a timed counterexample's ratio over its limit in the grading, at least


@dataclass(frozen=True)
class Mutant:
    id: str
    part: str
    options: tuple[str, ...]  # as its own test grades it
    edits: tuple[Edit, ...] = ()
    files: dict[str, Path] = field(default_factory=dict)  # whole files in place of the key's
    limit: int = 8  # the counterexamples run, at most (each runs twice)


def of_test_buggy(mutant_id: str, part: str) -> Mutant:
    mutant = MUTANTS_BY_ID[mutant_id]
    return Mutant(mutant_id, part, mutant.options, mutant.edits)


def of_test_scheduler(mutant_id: str) -> Mutant:
    mutant = SCHEDULERS[mutant_id]
    return Mutant(mutant_id, mutant.part, mutant.options, mutant.edits)


def of_test_kernel(buggy_id: str, limit: int) -> Mutant:
    buggy = KERNELS[buggy_id]
    return Mutant(buggy.id, "kernel", buggy.options, buggy.edits, buggy.files, limit)


MUTANTS = [
    # Its checks fail on a duplicate id; its timing workloads on the double free that follows.
    of_test_buggy("allocate_returns_a_duplicate", "allocator"),
    of_test_buggy("free_list_with_pop0", "allocator"),  # timed: the nearly empty pools
    of_test_buggy("allocate_scans_from_a_cursor", "allocator"),  # timed: the nearly full pools
    # The block-size-1 case: its counterexample used to end in a comment.
    of_test_buggy("decode_uses_the_tutorial_rule", "decode"),
    of_test_buggy("gather_does_not_slice", "gather"),
    of_test_kernel("gqa_head_mapping_by_modulo", limit=2),
    of_test_kernel("nan_for_an_empty_sequence", limit=2),
    of_test_scheduler("never_preempts_and_deadlocks"),
    # Ids against arrival order: its counterexamples write the ids as a list, not a range.
    of_test_scheduler("waits_in_id_order"),
    of_test_buggy("copy_on_write_copies_nothing", "sharing"),
    of_test_buggy("ref_count_off_by_one_after_incref", "sharing"),
    of_test_buggy("prefix_key_without_the_chain", "caching"),
    of_test_buggy("prefix_evicts_the_most_recently_idle", "caching"),
    of_test_buggy("prefix_eviction_scans_the_cache", "caching"),  # timed: its probe
    of_test_buggy("prefix_append_token_counts_the_free_blocks", "caching"),  # timed: mostly empty
]


@dataclass
class Replayed:
    """One counterexample, run on the mutant's files and on the answer key's."""

    check: str
    script: str
    on_the_mutant: Ran
    on_the_answer_key: Ran

    def problems(self) -> list[str]:
        found = []
        if not self.on_the_mutant.failed_at_the_last_line():
            found.append(f"it does not fail at its last line on the mutant: {self.on_the_mutant}")
        if self.on_the_answer_key.returncode != 0:
            found.append(f"it fails on the answer key: {self.on_the_answer_key}")
        try:
            assert_pastes_into_the_repl(self.script)
        except AssertionError as error:
            found.append(str(error).splitlines()[0])
        return [f"{self.check}: {problem}\n{self.script}" for problem in found]


def replay_all(mutant: Mutant, root: Path, shared: Path) -> list[Replayed]:
    """`mutant` graded (in `shared`), and each of its part's counterexamples (up to its limit)
    run."""
    graded = grade_shared(shared, mutant.id, mutant.options, mutant.files, mutant.edits)
    graded.assert_clean()
    folder = Path(graded.report["submission"]["path"])
    margins: dict[str, float] = {}  # a check's worst state's, where it times several
    for row in graded.report["benchmarks"]:
        margin = row["ratio"] / row["limit"]
        margins[row["check"]] = max(margins.get(row["check"], margin), margin)
    checks = [
        check
        for check in graded.part(mutant.part)["checks"]
        if check["counterexample"] and margins.get(check["id"], CLEARED) >= CLEARED
    ]
    replayed = []
    with ForkedRuns() as runs:
        for check in checks[: mutant.limit]:
            script = check["counterexample"]
            layout = root / f"{mutant.id}-files"
            on_the_mutant = runs.run(kit(layout, folder), script)
            on_the_answer_key = runs.run(kit(layout, SOLUTIONS), script)
            replayed.append(Replayed(check["id"], script, on_the_mutant, on_the_answer_key))
    return replayed


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, shared_gradings: Path) -> dict[str, Future[list[Replayed]]]:
    root: Path = tmp_path_factory.mktemp("counterexamples")
    return concurrently({
        mutant.id: lambda mutant=mutant: replay_all(mutant, root, shared_gradings)
        for mutant in MUTANTS
    })  # fmt: skip


def test_every_part_has_a_mutant() -> None:
    assert {mutant.part for mutant in MUTANTS} == set(PARTS)


def test_the_mutants_replayed_here_are_those_their_tests_grade_with_shrinking() -> None:
    """Their tests grade each mutant once, with this module (`grade_shared`): those replayed here
    with the profile's shrinking, the others with none (`tests.grading.mutant_options`)."""
    replayed = {
        mutant.id
        for mutant in [*MUTANTS_BY_ID.values(), *KERNELS.values(), *SCHEDULERS.values()]
        if mutant.replayed
    }
    assert replayed == {mutant.id for mutant in MUTANTS}


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.id for mutant in MUTANTS])
def test_a_counterexample_fails_on_the_mutant_and_passes_on_the_answer_key(
    mutant: Mutant, replayed: dict[str, Future[list[Replayed]]]
) -> None:
    done = replayed[mutant.id].result()
    assert done, (
        f"{mutant.id} failed no check with a counterexample in part {mutant.part} (a timed one "
        f"counts where its ratio was at least {CLEARED} times its limit)"
    )
    problems = [problem for each in done for problem in each.problems()]
    assert not problems, "\n\n".join(problems)
