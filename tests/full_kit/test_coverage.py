"""The coverage table (`docs/coverage.toml`) holds to the contract, the checks and the mutants, and
its page (`docs/coverage.md`) to the table.

Every sentence of parts 1 to 7 in `exercises/README.md` is named by an entry, and every entry by
exactly one sentence; a rule names checks of its part and mutants of its part (or a gap), and
each such mutant, graded as its own test module grades it (the same shared grading), fails one
of the checks its rules name.
"""

from dataclasses import dataclass
from pathlib import Path

import pytest

from full_kit.coverage import KINDS, PAGE, PARTS, Coverage, Entry, load, render, sentence_of
from grader.parts import PARTS as GRADED_PARTS
from grader.scoring.plugin import check_names
from tests.end_to_end import test_buggy, test_kernel, test_scheduler
from tests.grading import FIXTURES, Edit, grade_shared

COVERAGE: Coverage = load()


@dataclass(frozen=True)
class Mutant:
    """A buggy submission of the kit's tests, as its module grades it."""

    part: str
    options: tuple[str, ...]
    files: dict[str, Path]
    edits: tuple[Edit, ...]
    uncaught: str  # why no check catches it yet ("" when one does)


MUTANTS: dict[str, Mutant] = {
    **{m.id: Mutant(m.part, m.options, {}, m.edits, "") for m in test_buggy.MUTANTS},
    **{m.id: Mutant("scheduler", m.options, {}, m.edits, "") for m in test_scheduler.MUTANTS},
    **{b.id: Mutant("kernel", b.options, b.files, b.edits, b.uncaught) for b in test_kernel.BUGGY},
}
RULES = [entry for entry in COVERAGE.entries if entry.kind == "rule"]
NAMED = sorted({mutant for entry in RULES for mutant in entry.mutants})


def described(entry: Entry) -> str:
    return f"{entry.part}: {entry.quote!r}"


@pytest.mark.parametrize("part", PARTS)
def test_every_sentence_of_the_contract_is_in_the_table(part: str) -> None:
    quotes = [entry.quote for entry in COVERAGE.of(part)]
    missing = [s for s in COVERAGE.sentences[part] if not any(q in s for q in quotes)]
    assert COVERAGE.sentences[part]
    assert not missing, f"sentences of part {part} that no entry names:\n" + "\n".join(missing)


def test_every_entry_names_one_sentence() -> None:
    wrong = {
        described(entry): sentence_of(COVERAGE, entry)
        for entry in COVERAGE.entries
        if len(sentence_of(COVERAGE, entry)) != 1
    }
    assert not wrong, f"entries that name no sentence, or several: {wrong}"


def test_entries_say_what_their_kind_needs() -> None:
    """A rule has checks, inputs, and mutants or a gap (never both); a freedom its designs, each
    a folder of the tests' submissions; an `about` nothing else."""
    wrong = []
    for entry in COVERAGE.entries:
        if entry.kind == "rule":
            ok = bool(entry.checks and entry.inputs and bool(entry.mutants) != bool(entry.gap))
            ok = ok and not entry.designs
        elif entry.kind == "freedom":
            ok = bool(entry.designs) and all((FIXTURES / d).is_dir() for d in entry.designs)
            ok = ok and not (entry.checks or entry.mutants or entry.gap)
        else:
            ok = entry.kind in KINDS and not (
                entry.checks or entry.inputs or entry.mutants or entry.gap or entry.designs
            )
        if not ok:
            wrong.append(described(entry))
    assert not wrong, "entries without what their kind needs:\n" + "\n".join(wrong)


def test_rules_name_checks_of_their_part() -> None:
    wrong = []
    for entry in RULES:
        names = set().union(*(check_names(m) for m in GRADED_PARTS[entry.part].checks))
        wrong += [f"{described(entry)}: {c}" for c in entry.checks if c not in names]
    assert not wrong, "checks that their part does not have:\n" + "\n".join(wrong)


def test_rules_name_caught_mutants_of_their_part() -> None:
    wrong = [
        f"{described(entry)}: {mutant}"
        for entry in RULES
        for mutant in entry.mutants
        if mutant not in MUTANTS or MUTANTS[mutant].part != entry.part or MUTANTS[mutant].uncaught
    ]
    assert not wrong, "mutants unknown, of another part, or not caught:\n" + "\n".join(wrong)


def test_the_page_is_the_table() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(COVERAGE), (
        "docs/coverage.md is not the table's page: run `python -m full_kit.coverage`"
    )


@pytest.mark.parametrize("mutant_id", NAMED)
def test_a_mutant_fails_a_check_of_each_rule_it_breaks(mutant_id: str, shared_gradings: Path):
    mutant = MUTANTS[mutant_id]
    result = grade_shared(shared_gradings, mutant_id, mutant.options, mutant.files, mutant.edits)
    # a check id is "part/name", or "part/name[case]" for a check run case by case
    caught = {check_id.split("/", 1)[1].split("[")[0] for check_id in result.caught(mutant.part)}
    missed = [
        described(entry)
        for entry in RULES
        if mutant_id in entry.mutants and not caught & set(entry.checks)
    ]
    assert not missed, (
        f"{mutant_id} fails {sorted(caught)}, none of the checks of these rules:\n"
        + "\n".join(missed)
        + f"\n{result.describe(mutant.part)}"
    )
