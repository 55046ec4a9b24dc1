"""How strong the checks are: each part's mutants graded with the quick profile on seeds 0 to 4,
the fraction caught printed part by part and seed by seed: `make bench` (not `make test`, where
each mutant is graded once, on the derandomized examples).

A mutant that a rule of `docs/coverage.toml` names must be caught on every seed: the table
promises a check that finds that bug, whatever examples a grading draws. The kernel's mutants
that no check catches yet (`uncaught`) are left out.
"""

from pathlib import Path

import pytest

from full_kit.coverage import load
from tests.end_to_end import test_buggy, test_kernel, test_scheduler
from tests.grading import Edit, build_submission, concurrently, grade

SEEDS = range(5)
# id, part, options, whole files, edits
MUTANTS: list[tuple[str, str, tuple[str, ...], dict[str, Path], tuple[Edit, ...]]] = [
    *(
        (m.id, m.part, m.options, {}, m.edits)
        for m in (*test_buggy.MUTANTS, *test_scheduler.MUTANTS)
    ),
    *((b.id, "kernel", b.options, b.files, b.edits) for b in test_kernel.BUGGY if not b.uncaught),
]


def caught_by_seed(root: Path) -> dict[tuple[str, int], bool]:
    """Whether each mutant lost points through a failing check of its part, by (id, seed)."""

    def job(mutant_id: str, part: str, options: tuple[str, ...], files, edits, seed: int):
        folder = build_submission(root / f"{mutant_id}-{seed}", files=files, edits=edits)
        return lambda: bool(grade(folder, *options, "--seed", str(seed)).caught(part))

    jobs = {
        (mutant_id, seed): job(mutant_id, part, options, files, edits, seed)
        for mutant_id, part, options, files, edits in MUTANTS
        for seed in SEEDS
    }
    return {key: future.result() for key, future in concurrently(jobs).items()}


@pytest.mark.bench
def test_bench_mutants_caught_seed_by_seed(benchmark, tmp_path: Path) -> None:
    caught = benchmark.pedantic(caught_by_seed, args=(tmp_path,), rounds=1, iterations=1)
    parts = {mutant_id: part for mutant_id, part, *_ in MUTANTS}
    for part in dict.fromkeys(parts.values()):
        ids = [mutant_id for mutant_id, its in parts.items() if its == part]
        for seed in SEEDS:
            found = sum(caught[mutant_id, seed] for mutant_id in ids)
            benchmark.extra_info[f"{part} seed {seed} caught of {len(ids)}"] = found
    named = {mutant for entry in load().entries for mutant in entry.mutants}
    missed = sorted(key for key, found in caught.items() if key[0] in named and not found)
    assert not missed, f"mutants the coverage table names, missed on some seed: {missed}"
