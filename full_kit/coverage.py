"""What the grade covers: each sentence of the exercises' contract, the checks that test it and the
mutants that prove those checks catch its violation.

The contract is `exercises/README.md`, in English (the Chinese mirrors it). Each part's section
is cut into sentences (`contract_sentences`): paragraphs, list items and the rows of its tables
(each sentence of a member's row reads "`member`: ..."), cut at sentence ends and at semicolons
outside parentheses and code. The table, `docs/coverage.toml`, holds per part a list of entries,
each naming its sentence by a quote (text found in exactly one sentence of that part) and saying
what it is:

- `rule`: a normative sentence. `checks` (check names of the part) test it, `inputs` says what
  they try, and `mutants` (ids of the kit's buggy submissions in its tests) each break it alone
  and fail one of those checks. A rule no mutant breaks yet says why in `gap`;
- `freedom`: a sentence that leaves a choice to the candidate; `designs` names the correct
  submissions, unlike the answer key, that get full marks;
- `about`: an explanation, a hint or the section's summary of the grader: nothing to check.

Every sentence is named by one entry. `python -m full_kit.coverage` writes the table as a page,
`docs/coverage.md`; `tests/full_kit/test_coverage.py` holds the table to the contract, the checks
and the mutants, and the page to the table.
"""

import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader import KIT_ROOT

STATEMENT = KIT_ROOT / "exercises" / "README.md"
TABLE = KIT_ROOT / "docs" / "coverage.toml"
PAGE = KIT_ROOT / "docs" / "coverage.md"
PARTS = ("allocator", "decode", "gather", "kernel", "scheduler", "sharing", "caching")
KINDS = ("rule", "freedom", "about")
TABLE_HEADERS = {"member", "method", "argument", "dtype"}


@dataclass(frozen=True)
class Entry:
    """One sentence of a part's contract, as the table describes it."""

    part: str
    quote: str
    kind: str
    checks: tuple[str, ...] = ()
    inputs: str = ""
    mutants: tuple[str, ...] = ()
    gap: str = ""
    designs: tuple[str, ...] = ()


@dataclass
class Coverage:
    """The table, and the contract's sentences it names, by part."""

    entries: list[Entry] = field(default_factory=list)
    sentences: dict[str, list[str]] = field(default_factory=dict)

    def of(self, part: str) -> list[Entry]:
        return [entry for entry in self.entries if entry.part == part]


def part_sections(statement: str) -> dict[str, str]:
    """The English section of each part, by part id (`## Part N · `id` · ...`)."""
    english = statement.split("\n# 中文说明")[0]
    sections = {}
    for section in re.split(r"\n(?=## )", english):
        found = re.match(r"## Part \d+ · `(\w+)`", section)
        if found:
            sections[found.group(1)] = section
    return sections


def sentences_of(text: str) -> list[str]:
    """`text` cut at sentence ends and at semicolons, never inside code or parentheses."""
    codes: list[str] = []

    def hide(found: re.Match) -> str:
        codes.append(found.group(0))
        return f"\0{len(codes) - 1}\0"

    hidden = re.sub(r"`[^`]*`", hide, " ".join(text.split()))
    depth, start, pieces = 0, 0, []
    for at, char in enumerate(hidden):
        depth += {"(": 1, ")": -1}.get(char, 0)
        end_of_sentence = (
            char in ".!?"
            and hidden[at + 1 : at + 2] == " "
            and hidden[at - 3 : at + 1] not in ("e.g.", "i.e.")
        )
        if depth == 0 and (char == ";" or end_of_sentence):
            pieces.append(hidden[start : at + 1])
            start = at + 1
    pieces.append(hidden[start:])
    shown = [re.sub(r"\0(\d+)\0", lambda m: codes[int(m.group(1))], piece) for piece in pieces]
    return [piece.strip() for piece in shown if piece.strip().strip(";")]


def contract_sentences(section: str) -> list[str]:
    """A part's section as sentences: its paragraphs, list items and table rows (code blocks and
    tables' header rows left out)."""
    out: list[str] = []
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            out.extend(sentences_of(" ".join(paragraph)))
            paragraph.clear()

    for line in section.split("\n")[1:]:
        if line.startswith("```"):
            flush()
            in_code = not in_code
        elif in_code:
            continue
        elif line.startswith("|"):
            flush()
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-: ") or cells[0] in TABLE_HEADERS:
                continue
            out.extend(f"{cells[0]}: {sentence}" for sentence in sentences_of(" ".join(cells[1:])))
        elif not line.strip() or line.strip() == "---":
            flush()
        elif re.match(r"(- |\d+\. )", line):
            flush()
            paragraph.append(re.sub(r"^(- |\d+\. )", "", line))
        else:
            paragraph.append(line.strip())
    flush()
    return out


def load(statement: Path = STATEMENT, table: Path = TABLE) -> Coverage:
    """The table and the contract's sentences."""
    sections = part_sections(statement.read_text(encoding="utf-8"))
    raw = tomllib.loads(table.read_text(encoding="utf-8"))
    entries = [
        Entry(
            part=part,
            quote=" ".join(item["quote"].split()),
            kind=item["kind"],
            checks=tuple(item.get("checks", ())),
            inputs=item.get("inputs", ""),
            mutants=tuple(item.get("mutants", ())),
            gap=item.get("gap", ""),
            designs=tuple(item.get("designs", ())),
        )
        for part in PARTS
        for item in raw.get(part, [])
    ]
    return Coverage(entries, {part: contract_sentences(sections[part]) for part in PARTS})


def sentence_of(coverage: Coverage, entry: Entry) -> list[str]:
    """The sentences of `entry`'s part that hold its quote (exactly one, in a sound table)."""
    return [sentence for sentence in coverage.sentences[entry.part] if entry.quote in sentence]


def cell(text: str) -> str:
    """`text` fit for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(coverage: Coverage) -> str:
    """The page: per part, each rule with its checks, inputs and mutants (or its gap), then the
    choices left to the candidate and the designs that prove them."""
    rules = [entry for entry in coverage.entries if entry.kind == "rule"]
    caught = [entry for entry in rules if entry.mutants]
    lines = [
        "# What the grade covers",
        "",
        "Each normative sentence of the contract (`exercises/README.md`), the checks that test "
        "it, the inputs they try, and the buggy submissions (mutants of the answer key, in the "
        "kit's tests) that break that sentence alone and lose points in that check. A rule "
        "without a mutant is a gap: its checks may miss a bug that breaks it. Generated from "
        "`docs/coverage.toml` by `python -m full_kit.coverage`; `make test` holds the table to "
        "the contract and to the gradings of its mutants.",
        "",
        f"**{len(rules)} rules, {len(caught)} with a caught mutant, "
        f"{len(rules) - len(caught)} gaps.**",
    ]
    for part in PARTS:
        entries = coverage.of(part)
        part_rules = [entry for entry in entries if entry.kind == "rule"]
        lines += [
            "",
            f"## `{part}`",
            "",
            f"{len(part_rules)} rules, {sum(1 for e in part_rules if e.mutants)} with a caught "
            "mutant.",
            "",
            "| the contract says | checks | inputs | mutants caught |",
            "| --- | --- | --- | --- |",
        ]
        for entry in part_rules:
            checks = ", ".join(f"`{check}`" for check in entry.checks)
            mutants = (
                ", ".join(f"`{mutant}`" for mutant in entry.mutants)
                if entry.mutants
                else f"**gap**: {entry.gap}"
            )
            said = cell(" ".join(sentence_of(coverage, entry)))
            lines.append(f"| {said} | {cell(checks)} | {cell(entry.inputs)} | {cell(mutants)} |")
        freedoms = [entry for entry in entries if entry.kind == "freedom"]
        if freedoms:
            lines += ["", "Left to the candidate, and graded so:", ""]
            lines += [
                f"- {' '.join(sentence_of(coverage, entry))} Full marks for "
                + ", ".join(f"`{design}`" for design in entry.designs)
                + "."
                for entry in freedoms
            ]
    return "\n".join(lines) + "\n"


def main() -> None:
    PAGE.write_text(render(load()), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(KIT_ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
