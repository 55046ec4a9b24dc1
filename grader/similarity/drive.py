"""The similarity report of a drive: one page per flagged pair and `similarity.json`.

`similarity_report` is what grade-all calls: it compares the submissions with each other and
with the reference corpus, writes `OUT/similarity/pair-NNN.html` and `OUT/similarity/
similarity.json`, and returns the rows of the leaderboard's "similar pairs" section: one per
pair of submissions (or of a submission and a known implementation), its matched files listed,
highest share first (`pairs.find_pairs`).
`obfuscated` gives that section's other rows: files that run code they decode at run time, whose
code cannot be compared, listed so that they never pass for files that matched nothing.
"""

import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.intake import Intake, SubmissionRefused, read_submission
from grader.report.i18n import tr
from grader.report.messages import text_in
from grader.said import message_of
from grader.scan import decoded_code
from grader.similarity import corpus
from grader.similarity.page import pair_page
from grader.similarity.pairs import DEFAULT_THRESHOLD, find_pairs
from grader.text import clean


@dataclass(frozen=True)
class Shares:
    """One matched file of a pair: the share of each side's code, and how many fingerprints."""

    file: str
    share_left: float
    share_right: float
    matched: int


@dataclass(frozen=True)
class Row:
    """One flagged pair as the leaderboard shows it: `known` where the right side is a known
    implementation; its files, highest score first, the pair's shares those of the first; `page`
    is relative to OUT."""

    left: str
    right: str
    known: bool
    files: tuple[Shares, ...]
    page: str

    @property
    def share_left(self) -> float:
        return self.files[0].share_left

    @property
    def share_right(self) -> float:
        return self.files[0].share_right


def read_drive(entries: dict[str, Path], lang: str = "en") -> list[Intake]:
    """Each entry (`name -> path`, as grade-all names them) read as a submission named `name`;
    one the intake refuses is named on stderr, in `lang`, and left out."""
    intakes = []
    for name, entry in entries.items():
        try:
            intake = read_submission(entry)
        except SubmissionRefused as error:
            why = text_in(lang, message_of(error))
            print(tr(lang, "drive_similarity_skipping", name=clean(name, 200), error=why),
                  file=sys.stderr)  # fmt: skip
            continue
        intake.name = name
        intakes.append(intake)
    return intakes


def similarity_report(
    submissions: Sequence[Intake],
    out: Path,
    threshold: float = DEFAULT_THRESHOLD,
    max_df: int | None = None,
    lang: str = "en",
) -> list[Row]:
    """Compare, write the pages (in `lang`) and the JSON under `out/similarity/`, return one row
    per flagged pair, in `find_pairs`'s order."""
    pairs = find_pairs(submissions, corpus.load(), threshold=threshold, max_df=max_df)
    folder = out / "similarity"
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for number, pair in enumerate(pairs, 1):
        page = folder / f"pair-{number:03d}.html"
        page.write_text(pair_page(pair, lang), encoding="utf-8")
        files = tuple(Shares(m.file, m.share_left, m.share_right, m.matched) for m in pair.files)
        rows.append(Row(pair.left, pair.right, pair.known, files, page.relative_to(out).as_posix()))
    document = {"threshold": threshold, "pairs": [asdict(row) for row in rows]}
    (folder / "similarity.json").write_text(
        json.dumps(document, indent=1, ensure_ascii=False) + "\n"
    )
    return rows


def obfuscated(submissions: Sequence[Intake]) -> list[dict]:
    """A leaderboard row for each file of `submissions` that runs code it decodes at run time
    (`scan.decoded_code`): its name, its file and why (as the scan says it, in English)."""
    return [
        {"left": clean(intake.name, 200), "file": file, "obfuscated": reason}
        for intake in submissions
        for file, reason in decoded_code(intake.files).items()
    ]


def shown(row: Row) -> dict:
    """A flagged pair as the leaderboard shows it: names cleaned, shares as percentages (the
    pair's, its first file's, and each file's), `matched` the fingerprints of all its files."""
    return {
        "left": clean(row.left, 200),
        "right": clean(row.right, 200),
        "known": row.known,
        "files": [{"file": f.file, "shares": percentages(f)} for f in row.files],
        "shares": percentages(row.files[0]),
        "share_left": row.share_left,
        "share_right": row.share_right,
        "matched": sum(f.matched for f in row.files),
        "href": row.page,
    }


def percentages(shares: Shares) -> str:
    return f"{shares.share_left:.0%} / {shares.share_right:.0%}"
