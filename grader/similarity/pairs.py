"""Similar pairs: which submissions share code, file by file, and how much of each side.

A file's share is the part of its own fingerprints (the stubs' left out) that the other side
also holds, counting only evidence (`Index.evidence`), and those merged between two runs of
them (`merged`): 0.8 means four fifths of the code the candidate wrote in that file is also in
the other file, give or take a few inserted lines. A file is flagged when either side's
share reaches `threshold` on at least `MIN_MATCHES` shared fingerprints (so a file of three
lines is never flagged on one match); a pair is reported when one of its files is. Submissions
are compared with each other per file name, and with each reference on the files it lists: the
other side of such a pair is the known implementation the reference is a file of
(`Reference.implementation`), each of its files matched with one of that implementation's. A pair
lists its files highest score first; pairs come highest score first (their best file's), a known
implementation's before a submission's on a tie, then the highest mean of their files' scores.
Nothing here changes a score: the pairs are for a reviewer to judge.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from grader import KIT_ROOT
from grader.intake import Intake
from grader.parts import SUBMISSION_FILES
from grader.similarity.corpus import Reference
from grader.similarity.fingerprints import Fingerprint, fingerprints
from grader.similarity.index import Index

DEFAULT_THRESHOLD = 0.6
MIN_MATCHES = 8
# Unmatched fingerprints between two matches, at most this many on each side, that are counted
# as matched: an inserted statement costs a copy the k-grams around it (`merged`).
MERGE_GAP = 6
MIN_MAX_DF = 10  # `max_df` is max(MIN_MAX_DF, 5% of the submissions) unless given

Span = tuple[int, int]  # first and last line, 1-based


@dataclass(frozen=True)
class FileMatch:
    """One file of a pair: the shares, the matched code's line spans (left span, right span) as
    `regions` gives them, and, against a known implementation, the `reference` file it matched."""

    file: str
    matched: int
    share_left: float
    share_right: float
    regions: tuple[tuple[Span, Span], ...]
    reference: Reference | None = None

    @property
    def score(self) -> float:
        return max(self.share_left, self.share_right)


@dataclass(frozen=True)
class Pair:
    """Two submissions (or a submission and, `known`, a known implementation on the right) and
    their matching files, highest score first. `left_files`/`right_files` hold the sources shown
    side by side; a reference's code is not shipped, so a known implementation's side holds none."""

    left: str
    right: str
    files: tuple[FileMatch, ...]
    left_files: dict[str, bytes]
    right_files: dict[str, bytes]
    known: bool = False

    @property
    def score(self) -> float:
        return max(match.score for match in self.files)

    @property
    def mean(self) -> float:
        return sum(match.score for match in self.files) / len(self.files)


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
    """The matched code as runs, in the left file's order: (left span, right span) of each
    matched hash, at its first place on each side, each one that overlaps or adjoins the run
    before it on both sides joined to it (their lines are the same, and none is said twice)."""
    right_at: dict[int, Span] = {}
    for p in right:
        right_at.setdefault(p.hash, (p.first, p.last))
    seen: set[int] = set()
    found: list[tuple[Span, Span]] = []
    for p in left:
        if p.hash in matched and p.hash not in seen:
            seen.add(p.hash)
            spans = ((p.first, p.last), right_at[p.hash])
            if found and all(map(touch, found[-1], spans)):
                found[-1] = (join(found[-1][0], spans[0]), join(found[-1][1], spans[1]))
            else:
                found.append(spans)
    return tuple(found)


def touch(one: Span, two: Span) -> bool:
    """Whether two spans of lines overlap or adjoin."""
    return one[0] <= two[1] + 1 and two[0] <= one[1] + 1


def join(one: Span, two: Span) -> Span:
    return min(one[0], two[0]), max(one[1], two[1])


def merged(one: Sequence[Fingerprint], other: Sequence[Fingerprint], matched: set[int]) -> set[int]:
    """The hashes of `one` between two matches that are neighbours in both files: at most
    `MERGE_GAP` unmatched fingerprints apart in `one`, in the same order at most as far apart in
    `other`, and one of them the end of a run of at least two matches in `one` (two lone matches
    anchor nothing). Their k-grams hold code inserted into a copy (JPlag's match merging), which
    would otherwise cut it into pieces each too short to match."""
    at_other: dict[int, int] = {}
    for at, p in enumerate(other):
        at_other.setdefault(p.hash, at)
    hits = [at for at, p in enumerate(one) if p.hash in matched]
    anchored = set(hits)
    found: set[int] = set()
    for start, end in pairwise(hits):
        runs = start - 1 in anchored or end + 1 in anchored
        apart = at_other[one[end].hash] - at_other[one[start].hash]
        if runs and 1 < end - start <= MERGE_GAP + 1 and 0 < apart <= MERGE_GAP + 1:
            found.update(p.hash for p in one[start + 1 : end])
    return found - matched


def file_match(
    file: str,
    left: Sequence[Fingerprint],
    right: Sequence[Fingerprint],
    matched: set[int],
    base: frozenset[int],
    reference: Reference | None = None,
) -> FileMatch:
    """One file of a pair: each side's share counts its matched fingerprints and those
    `merged` between them."""
    mine, theirs = own(left, base), own(right, base)
    return FileMatch(
        file=file,
        matched=len(matched),
        share_left=len(matched | merged(left, right, matched) & mine) / max(1, len(mine)),
        share_right=len(matched | merged(right, left, matched) & theirs) / max(1, len(theirs)),
        regions=regions(left, right, matched),
        reference=reference,
    )


def best_first(matches: Iterable[FileMatch]) -> tuple[FileMatch, ...]:
    """A pair's files, highest score first (then by name)."""
    return tuple(sorted(matches, key=lambda match: (-match.score, match.file)))


def find_pairs(
    submissions: Sequence[Intake],
    references: Sequence[Reference] = (),
    threshold: float = DEFAULT_THRESHOLD,
    max_df: int | None = None,
    base: frozenset[int] | None = None,
) -> list[Pair]:
    """The flagged pairs among `submissions` and against `references` (one per submission and
    known implementation), in the order the module's docstring gives.

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
            best_first(matches),
            submissions[a].files,
            submissions[b].files,
        )
        for (a, b), matches in flagged.items()
        if any(m.score >= threshold for m in matches)
    ]

    known: dict[tuple[int, str], list[FileMatch]] = {}
    for reference in references:
        ref_prints = reference.fingerprints
        for (at, file), count in index.reference_counts(
            (p.hash for p in ref_prints), reference.compare_with
        ).items():
            if count < MIN_MATCHES:
                continue
            left = prints[at][file]
            matched = own(left, base) & own(ref_prints, base)
            match = file_match(file, left, ref_prints, matched, base, reference)
            known.setdefault((at, reference.implementation), []).append(match)
    pairs += [
        Pair(
            submissions[at].name,
            implementation,
            best_first(matches),
            submissions[at].files,
            {},
            known=True,
        )
        for (at, implementation), matches in known.items()
        if any(m.score >= threshold for m in matches)
    ]
    return sorted(
        pairs, key=lambda pair: (-pair.score, not pair.known, -pair.mean, pair.left, pair.right)
    )
