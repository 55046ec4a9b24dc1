"""A submission's files that match known code, as integrity flags of its own report.

`flags` compares one submission with the reference corpus (`corpus.load`: the public
implementations and, in the full kit, the answer key) as grade-all's similar pairs do
(`pairs.find_pairs`), and flags each file whose score against a known implementation reaches the
threshold: `{"source": "similarity", "file", "message"}`, the message naming the answer key or
the public implementation and the share, "matches the answer key: 100%". The files are read as
text (their tokens' fingerprints), never imported. Like every flag, it changes no score.
"""

from grader.intake import Intake
from grader.said import Said, said
from grader.similarity import corpus
from grader.similarity.pairs import DEFAULT_THRESHOLD, FileMatch, find_pairs


def flags(intake: Intake, threshold: float = DEFAULT_THRESHOLD) -> list[dict]:
    """A flag for each file of `intake` that matches a known implementation at `threshold` or
    above, in `find_pairs`'s order."""
    return [
        {"source": "similarity", "file": match.file, "message": message(match)}
        for pair in find_pairs([intake], corpus.load(), threshold=threshold)
        for match in pair.files
        if match.score >= threshold
    ]


def message(match: FileMatch) -> Said:
    """What a flag says of `match` (a file matched with a known `reference`): whose code, and
    the share (the higher of the two sides')."""
    share = f"{match.score:.0%}"
    if match.reference.answer_key:
        return said("matches the answer key: {share}", share=share)
    return said(
        "matches a public implementation, {name}: {share}", name=match.reference.name, share=share
    )
