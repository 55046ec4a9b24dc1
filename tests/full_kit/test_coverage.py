"""The coverage table (`docs/coverage.toml`) holds to the contract, the checks and the mutants, and
its page (`docs/coverage.md`) to the table.

Every sentence of parts 1 to 7 in `exercises/README.md` is named by exactly one entry, and the
table records a digest of each part's sentences, so that any edit of the contract asks for its
entries to be read again. A rule names checks of its part and caught mutants of its part, and
every mutant the tests say is caught is named by some rule. That each mutant fails a
check of each rule naming it is asserted where it is graded, by its own test (test_buggy.py,
test_scheduler.py, test_kernel.py: `coverage.rules_missed`).
"""

from dataclasses import dataclass

import pytest

from full_kit.coverage import (
    KINDS,
    PAGE,
    PARTS,
    Coverage,
    Entry,
    contract_sentences,
    digest,
    load,
    render,
    sentences_of,
    sentences_quoting,
)
from grader.parts import PARTS as GRADED_PARTS
from grader.scoring.plugin import check_names
from tests.end_to_end import test_buggy, test_kernel, test_scheduler
from tests.grading import FIXTURES

COVERAGE: Coverage = load()


@dataclass(frozen=True)
class KnownBug:
    """A mutant of the kit's tests: the part it must lose points in, and why no check catches
    it yet ("" when one does)."""

    part: str
    uncaught: str = ""


BUGS: list[tuple[str, KnownBug]] = [
    *((m.id, KnownBug(m.part)) for m in (*test_buggy.MUTANTS, *test_scheduler.MUTANTS)),
    *((b.id, KnownBug("kernel", b.uncaught)) for b in test_kernel.BUGGY),
]
KNOWN_BUGS = dict(BUGS)
RULES = [entry for entry in COVERAGE.entries if entry.kind == "rule"]
NAMED = sorted({mutant for entry in RULES for mutant in entry.mutants})


def described(entry: Entry) -> str:
    return f"{entry.part}: {entry.quote!r}"


def test_the_splitter_cuts_at_sentences_and_semicolons_only() -> None:
    text = "**One.** (a; b. C) two. Three `x. Y`; four, e.g. five! Six is **so.** Seven"
    assert sentences_of(text) == [
        "**One.** (a; b. C) two.",
        "Three `x. Y`;",
        "four, e.g. five!",
        "Six is **so.**",
        "Seven",
    ]
    for unbalanced in ("a) b. C.", "a (b. C."):
        with pytest.raises(ValueError):
            sentences_of(unbalanced)


def test_the_splitter_reads_rows_items_and_paragraphs() -> None:
    section = "\n".join([
        "## Part 9 · `x` · title",
        "### A heading",
        "Para one. Para",
        "two.",
        "",
        "| method | contract |",
        "| --- | --- |",
        "| `f()` | does a; raises B. |",
        "| method | a body row named like a header |",
        "",
        "* item one",
        "1. item two",
        "```python",
        "code. Not read.",
        "```",
        "---",
    ])  # fmt: skip
    assert contract_sentences(section) == [
        "Para one.",
        "Para two.",
        "`f()`: does a;",
        "`f()`: raises B.",
        "method: a body row named like a header",
        "item one",
        "item two",
    ]


def test_the_table_was_written_against_the_contract_as_it_is() -> None:
    changed = {
        part: digest(sentences)
        for part, sentences in COVERAGE.sentences.items()
        if COVERAGE.digests.get(part) != digest(sentences)
    }
    assert not changed, (
        "the contract of these parts changed since docs/coverage.toml was written: read their "
        f"entries again, then set their digests in its [contract] table to {changed}"
    )


@pytest.mark.parametrize("part", PARTS)
def test_every_sentence_of_the_contract_is_named_by_one_entry(part: str) -> None:
    quotes = [entry.quote for entry in COVERAGE.of(part)]
    named = {sentence: sum(q in sentence for q in quotes) for sentence in COVERAGE.sentences[part]}
    assert named
    wrong = [f"{count} entries: {sentence}" for sentence, count in named.items() if count != 1]
    assert not wrong, f"sentences of part {part} not named by exactly one entry:\n" + "\n".join(
        wrong
    )


def test_every_entry_names_one_sentence() -> None:
    wrong = {
        described(entry): sentences_quoting(COVERAGE, entry)
        for entry in COVERAGE.entries
        if len(sentences_quoting(COVERAGE, entry)) != 1
    }
    assert not wrong, f"entries that name no sentence, or several: {wrong}"


def test_entries_say_what_their_kind_needs() -> None:
    """A rule has checks, inputs and mutants (a rule that no mutant proves is a hole in the
    grade); a freedom its designs, each a folder of the tests' submissions; an `about` nothing
    else."""
    wrong = []
    for entry in COVERAGE.entries:
        if entry.kind == "rule":
            ok = bool(entry.checks and entry.inputs and entry.mutants) and not entry.designs
        elif entry.kind == "freedom":
            ok = bool(entry.designs) and all((FIXTURES / d).is_dir() for d in entry.designs)
            ok = ok and not (entry.checks or entry.mutants)
        else:
            ok = entry.kind in KINDS and not (
                entry.checks or entry.inputs or entry.mutants or entry.designs
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
        if mutant not in KNOWN_BUGS
        or KNOWN_BUGS[mutant].part != entry.part
        or KNOWN_BUGS[mutant].uncaught
    ]
    assert not wrong, "mutants unknown, of another part, or not caught:\n" + "\n".join(wrong)


def test_every_caught_mutant_is_named_by_a_rule() -> None:
    assert len(KNOWN_BUGS) == len(BUGS), "two test modules give a mutant the same id"
    unnamed = [id_ for id_, bug in BUGS if not bug.uncaught and id_ not in NAMED]
    assert not unnamed, f"mutants that no rule of docs/coverage.toml names: {unnamed}"


def test_the_page_is_the_table() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(COVERAGE), (
        "docs/coverage.md is not the table's page: run `python -m full_kit.coverage`"
    )
