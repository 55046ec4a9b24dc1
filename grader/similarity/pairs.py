"""Similar pairs: which submissions share code, file by file, and how much of each side.

A file's share is the part of its own fingerprints (the stubs' left out) that the other side
also holds, counting only evidence (`Index.evidence`): 0.8 means four fifths of the code the
candidate wrote in that file is also in the other file. A file is flagged when either side's
share reaches `threshold` on at least `MIN_MATCHES` shared fingerprints (so a file of three
lines is never flagged on one match); a pair is reported when one of its files is. Submissions
are compared with each other per file name, and with each reference on the files it lists.
Nothing here changes a score: the pairs are for a reviewer to judge.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader import KIT_ROOT
from grader.intake import Intake
from grader.parts import SUBMISSION_FILES
from grader.similarity.corpus import Reference
from grader.similarity.fingerprints import Fingerprint, fingerprints
from grader.similarity.index import Index

DEFAULT_THRESHOLD = 0.6
MIN_MATCHES = 8
MIN_MAX_DF = 10  # `max_df` is max(MIN_MAX_DF, 5% of the submissions) unless given

Span = tuple[int, int]  # first and last line, 1-based


@dataclass(frozen=True)
class FileMatch:
    """One file of a pair: the shares, and the matched line spans (left span, right span) of
    each shared fingerprint, in the left file's order."""

    file: str
    matched: int
    share_left: float
    share_right: float
    regions: tuple[tuple[Span, Span], ...]

    @property
    def score(self) -> float:
        return max(self.share_left, self.share_right)


@dataclass(frozen=True)
class Pair:
    """Two submissions (or a submission and a reference, `reference` set, on the right) and
    their matching files. `left_files`/`right_files` hold the sources shown side by side; a
    reference's code is not shipped, so its side holds none."""

    left: str
    right: str
    files: tuple[FileMatch, ...]
    left_files: dict[str, bytes]
    right_files: dict[str, bytes]
    reference: Reference | None = None

    @property
    def score(self) -> float:
        return max(match.score for match in self.files)


def base_hashes(stubs: Path = KIT_ROOT / "exercises") -> frozenset[int]:
    """The fingerprints of the stubs handed to candidates: base code, never evidence."""
    paths = (stubs / name for name in SUBMISSION_FILES)
    return frozenset(
        p.hash for path in paths if path.is_file() for p in fingerprints(path.read_bytes())
    )


def own(prints: Iterable[Fingerprint], base: frozenset[int]) -> set[int]:
    return {p.hash for p in prints} - base


def regions(
    left: Sequence[Fingerprint], right: Sequence[Fingerprint], matched: set[int]
) -> tuple[tuple[Span, Span], ...]:
    """(left span, right span) of each matched hash, at its first place on each side."""
    right_at: dict[int, Span] = {}
    for p in right:
        right_at.setdefault(p.hash, (p.first, p.last))
    seen: set[int] = set()
    found = []
    for p in left:
        if p.hash in matched and p.hash not in seen:
            seen.add(p.hash)
            found.append(((p.first, p.last), right_at.get(p.hash, (0, 0))))
    return tuple(found)


def file_match(
    file: str,
    left: Sequence[Fingerprint],
    right: Sequence[Fingerprint],
    matched: set[int],
    base: frozenset[int],
) -> FileMatch:
    return FileMatch(
        file=file,
        matched=len(matched),
        share_left=len(matched) / max(1, len(own(left, base))),
        share_right=len(matched) / max(1, len(own(right, base))),
        regions=regions(left, right, matched),
    )


def find_pairs(
    submissions: Sequence[Intake],
    references: Sequence[Reference] = (),
    threshold: float = DEFAULT_THRESHOLD,
    max_df: int | None = None,
    base: frozenset[int] | None = None,
) -> list[Pair]:
    """The flagged pairs among `submissions` and against `references`, highest score first.

    `max_df`: a fingerprint held by more submissions than this is boilerplate (default
    max(MIN_MAX_DF, 5% of the submissions)); `base`: the stubs' fingerprints (default
    `base_hashes()`).
    """
    base = base_hashes() if base is None else base
    index = Index(base=base, max_df=max_df or max(MIN_MAX_DF, len(submissions) // 20))
    prints = [{file: fingerprints(data) for file, data in s.files.items()} for s in submissions]
    for at, files in enumerate(prints):
        for file, found in files.items():
            index.add(at, file, found)

    flagged: dict[tuple[int, int], list[FileMatch]] = {}
    for (a, b, file), count in index.shared_counts().items():
        if count < MIN_MATCHES:
            continue
        left, right = prints[a][file], prints[b][file]
        matched = {v for v in own(left, base) & own(right, base) if index.evidence(file, v)}
        flagged.setdefault((a, b), []).append(file_match(file, left, right, matched, base))
    pairs = [
        Pair(
            submissions[a].name,
            submissions[b].name,
            tuple(sorted(matches, key=lambda m: m.file)),
            submissions[a].files,
            submissions[b].files,
        )
        for (a, b), matches in flagged.items()
        if any(m.score >= threshold for m in matches)
    ]

    for reference in references:
        ref_prints = reference.fingerprints
        for (at, file), count in index.reference_counts(
            (p.hash for p in ref_prints), reference.compare_with
        ).items():
            if count < MIN_MATCHES:
                continue
            left = prints[at][file]
            match = file_match(
                file, left, ref_prints, own(left, base) & own(ref_prints, base), base
            )
            if match.score >= threshold:
                pairs.append(
                    Pair(
                        submissions[at].name,
                        reference.name,
                        (match,),
                        submissions[at].files,
                        {},
                        reference,
                    )
                )
    return sorted(pairs, key=lambda pair: (-pair.score, pair.left, pair.right))
