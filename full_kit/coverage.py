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
  and fail one of those checks: a rule without a caught mutant fails the tests;
- `freedom`: a sentence that leaves a choice to the candidate; `designs` names the correct
  submissions, unlike the answer key, that get full marks;
- `about`: an explanation, a hint or the section's summary of the grader: nothing to check.

Every sentence is named by exactly one entry, and the table records a digest of each part's
sentences (`[contract]`): an edit of a part's contract, even inside a sentence already named,
fails the tests until its entries are read again. `python -m full_kit.coverage` writes the page,
`docs/coverage.md`; `tests/full_kit/test_coverage.py` holds the table to the contract, the checks
and the mutants, and the page to the table; each mutant's own test, which grades it, holds it to
the rules that name it (`rules_missed`).
"""

import hashlib
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader import KIT_ROOT

STATEMENT = KIT_ROOT / "exercises" / "README.md"
TABLE = KIT_ROOT / "docs" / "coverage.toml"
PAGE = KIT_ROOT / "docs" / "coverage.md"
PARTS = ("allocator", "decode", "gather", "kernel", "scheduler", "sharing", "caching")
KINDS = ("rule", "freedom", "about")


@dataclass(frozen=True)
class Entry:
    """One sentence of a part's contract, as the table describes it."""

    part: str
    quote: str
    kind: str
    checks: tuple[str, ...] = ()
    inputs: str = ""
    mutants: tuple[str, ...] = ()
    designs: tuple[str, ...] = ()


@dataclass
class Coverage:
    """The table's entries, the contract digest it was written against, and the contract's
    sentences now, by part."""

    entries: list[Entry] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)  # by part, as the table records them
    sentences: dict[str, list[str]] = field(default_factory=dict)

    def of(self, part: str) -> list[Entry]:
        """The entries of `part`, in the table's order."""
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
    """`text` cut at sentence ends (a `.`, `!` or `?`, closing marks after it, then a space;
    not `e.g.`, `i.e.` or a bold label such as `**Decode.**`) and at semicolons, never inside
    code or parentheses. ValueError for unbalanced parentheses, which would hide every later
    cut."""
    codes: list[str] = []

    def hide(found: re.Match[str]) -> str:
        codes.append(found.group(0))
        return f"\0{len(codes) - 1}\0"

    hidden = re.sub(r"`[^`]*`", hide, " ".join(text.split()))
    depth, start, pieces = 0, 0, []
    for end in re.finditer(r"[()]|;|(?<!e\.g)(?<!i\.e)[.!?][*\"']*(?= )", hidden):
        depth += {"(": 1, ")": -1}.get(end.group(0), 0)
        if depth < 0:
            raise ValueError(f"a `)` closes nothing: {text!r}")
        label = re.fullmatch(r" ?\*\*[^*]+\*\*", hidden[start : end.end()])  # **Decode.**
        if depth == 0 and end.group(0) not in "()" and not label:
            pieces.append(hidden[start : end.end()])
            start = end.end()
    if depth:
        raise ValueError(f"a `(` is never closed: {text!r}")
    pieces.append(hidden[start:])
    shown = [re.sub(r"\0(\d+)\0", lambda m: codes[int(m.group(1))], piece) for piece in pieces]
    return [piece.strip() for piece in shown if piece.strip().strip(";")]


def contract_sentences(section: str) -> list[str]:
    """A part's section as sentences: its paragraphs, list items and table rows, each sentence
    of a row read as "`member`: ..." (headings, code blocks, rules and the rows above a table's
    `---` row left out)."""
    out: list[str] = []
    paragraph: list[str] = []
    in_code = False

    def flush() -> None:
        if paragraph:
            out.extend(sentences_of(" ".join(paragraph)))
            paragraph.clear()

    lines = section.split("\n")[1:]
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            in_code = not in_code
        elif in_code:
            continue
        elif stripped.startswith("|"):
            flush()
            if not (is_table_rule(stripped) or is_table_rule(next_line(lines, number))):
                member, *said = [cell.strip() for cell in stripped.strip("|").split("|")]
                out.extend(f"{member}: {sentence}" for sentence in sentences_of(" ".join(said)))
        elif not stripped or stripped == "---" or stripped.startswith("#"):
            flush()
        elif re.match(r"([-*] |\d+\. )", stripped):
            flush()
            paragraph.append(re.sub(r"^([-*] |\d+\. )", "", stripped))
        else:
            paragraph.append(stripped)
    flush()
    return out


def is_table_rule(line: str) -> bool:
    """`| --- | ---: |`: the row under a table's header."""
    return line.startswith("|") and set(line) <= set("|-: ")


def next_line(lines: list[str], number: int) -> str:
    """The line after `lines[number]`, stripped ("" after the last)."""
    return lines[number + 1].strip() if number + 1 < len(lines) else ""


def digest(sentences: list[str]) -> str:
    """A short fingerprint of a part's sentences: the table records it, so that any edit of the
    part's contract, even within a sentence already named, asks for the table to be read again."""
    return hashlib.sha256("\n".join(sentences).encode()).hexdigest()[:12]


def entry_of(part: str, item: dict) -> Entry:
    """One `[[part]]` item of the table; ValueError for a key `Entry` does not have."""
    unknown = set(item) - {name for name in Entry.__dataclass_fields__ if name != "part"}
    if unknown:
        raise ValueError(f"docs/coverage.toml: [[{part}]] {item.get('quote')!r} has {unknown}")
    tuples = {key: tuple(value) for key, value in item.items() if isinstance(value, list)}
    return Entry(part=part, **{**item, **tuples, "quote": " ".join(item["quote"].split())})


def load(statement: Path = STATEMENT, table: Path = TABLE) -> Coverage:
    """The table and the contract's sentences."""
    sections = part_sections(statement.read_text(encoding="utf-8"))
    raw = tomllib.loads(table.read_text(encoding="utf-8"))
    return Coverage(
        entries=[entry_of(part, item) for part in PARTS for item in raw.get(part, [])],
        digests=raw.get("contract", {}),
        sentences={part: contract_sentences(sections[part]) for part in PARTS},
    )


def sentences_quoting(coverage: Coverage, entry: Entry) -> list[str]:
    """The sentences of `entry`'s part that hold its quote (exactly one, in a sound table)."""
    return [sentence for sentence in coverage.sentences[entry.part] if entry.quote in sentence]


def rules_missed(coverage: Coverage, mutant_id: str, caught: Iterable[str]) -> list[str]:
    """The rules that name `mutant_id` but none of whose checks is among `caught` (check ids,
    "part/name" or "part/name[case]"): how a mutant's own test holds it to the table."""
    names = {check_id.split("/", 1)[1].split("[")[0] for check_id in caught}
    return [
        f"{entry.part}: {entry.quote!r} (checks {', '.join(entry.checks)})"
        for entry in coverage.entries
        if mutant_id in entry.mutants and not names & set(entry.checks)
    ]


def cell(text: str) -> str:
    """`text` fit for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def render(coverage: Coverage) -> str:
    """The page: per part, each rule with its checks, inputs and mutants, then the choices left
    to the candidate and the designs that prove them."""
    rules = [entry for entry in coverage.entries if entry.kind == "rule"]
    lines = [
        "# What the grade covers",
        "",
        "Each normative sentence of the contract (`exercises/README.md`), the checks that test "
        "it, the inputs they try, and the buggy submissions (mutants of the answer key, in the "
        "kit's tests) that break that sentence alone and lose points in that check. Generated "
        "from `docs/coverage.toml` by `python -m full_kit.coverage`; `make test` holds the table "
        "to the contract and to the gradings of its mutants, and fails on a rule that no mutant "
        "proves.",
        "",
        f"**{len(rules)} rules, each with a caught mutant.**",
    ]
    for part in PARTS:
        entries = coverage.of(part)
        part_rules = [entry for entry in entries if entry.kind == "rule"]
        lines += [
            "",
            f"## `{part}`",
            "",
            f"{len(part_rules)} rules.",
            "",
            "| the contract says | checks | inputs | mutants caught |",
            "| --- | --- | --- | --- |",
        ]
        for entry in part_rules:
            checks = ", ".join(f"`{check}`" for check in entry.checks)
            mutants = ", ".join(f"`{mutant}`" for mutant in entry.mutants)
            said = cell(" ".join(sentences_quoting(coverage, entry)))
            lines.append(f"| {said} | {cell(checks)} | {cell(entry.inputs)} | {cell(mutants)} |")
        freedoms = [entry for entry in entries if entry.kind == "freedom"]
        if freedoms:
            lines += ["", "Left to the candidate, and graded so:", ""]
            lines += [
                f"- {' '.join(sentences_quoting(coverage, entry))} Full marks for "
                + ", ".join(f"`{design}`" for design in entry.designs)
                + "."
                for entry in freedoms
            ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Write the page from the table."""
    PAGE.write_text(render(load()), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(KIT_ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
