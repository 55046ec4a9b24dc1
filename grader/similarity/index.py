"""An inverted index of fingerprints: which submissions hold each one, file by file.

Two submissions are compared only through the fingerprints they share, never by a full diff:
`shared_counts` walks each fingerprint's posting list once. A fingerprint of the stubs (base
code, `base`) is never evidence, nor is one that more than `max_df` submissions hold for that
file (boilerplate everyone writes); the index still reports both, so shares can be computed.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

from grader.similarity.fingerprints import Fingerprint

Key = tuple[str, int]  # (file name, fingerprint hash)


@dataclass
class Index:
    """`file -> hash -> ids of the submissions whose file holds that hash` (each id once)."""

    base: frozenset[int]
    max_df: int
    postings: dict[Key, list[int]] = field(default_factory=dict)

    def add(self, submission: int, file: str, prints: Iterable[Fingerprint]) -> None:
        """Index one submission file's fingerprints (base code left out)."""
        for value in {p.hash for p in prints} - self.base:
            self.postings.setdefault((file, value), []).append(submission)

    def evidence(self, file: str, value: int) -> bool:
        """Whether `value` counts as a match between submissions in `file`: not base code, and
        held by at most `max_df` submissions."""
        return value not in self.base and len(self.postings.get((file, value), ())) <= self.max_df

    def shared_counts(self) -> Counter[tuple[int, int, str]]:
        """`(a, b, file) -> how many evidence fingerprints submissions a < b share in file`."""
        counts: Counter[tuple[int, int, str]] = Counter()
        for (file, _), holders in self.postings.items():
            if 1 < len(holders) <= self.max_df:
                counts.update((a, b, file) for a, b in combinations(holders, 2))
        return counts

    def reference_counts(
        self, reference: Iterable[int], files: Iterable[str]
    ) -> Mapping[tuple[int, str], int]:
        """`(submission, file) -> how many of the reference's hashes (base code left out) that
        submission file holds`, for each file the reference is compared with. No `max_df`
        here: many submissions copying one public source is exactly what to report."""
        counts: defaultdict[tuple[int, str], int] = defaultdict(int)
        values = set(reference) - self.base
        for file in files:
            for value in values:
                for holder in self.postings.get((file, value), ()):
                    counts[holder, file] += 1
        return counts
