"""Match merging (`grader.similarity.pairs.merged`): the fingerprints of a copy between two matches
that neighbour each other in both files count as matched (inserted code); matches out of order,
too far apart on either side, or two lone ones, merge nothing."""

from grader.similarity.fingerprints import Fingerprint
from grader.similarity.pairs import MERGE_GAP, merged

MATCHED = {1, 2, 3, 4}


def prints(*hashes: int) -> list[Fingerprint]:
    return [Fingerprint(value, 1, 1) for value in hashes]


def test_a_gap_between_matches_neighbouring_in_both_files_is_merged() -> None:
    assert merged(prints(1, 2, 90, 91, 3, 4), prints(1, 2, 3, 4), MATCHED) == {90, 91}


def test_matches_in_another_order_merge_nothing() -> None:
    assert merged(prints(1, 2, 90, 3, 4), prints(3, 4, 1, 2), MATCHED) == set()


def test_matches_too_far_apart_on_either_side_merge_nothing() -> None:
    wide = range(100, 100 + MERGE_GAP + 1)
    assert merged(prints(1, 2, *wide, 3, 4), prints(1, 2, 3, 4), MATCHED) == set()
    assert merged(prints(1, 2, 90, 3, 4), prints(1, 2, *wide, 3, 4), MATCHED) == set()
    assert merged(prints(1, 2, *wide[1:], 3, 4), prints(1, 2, 3, 4), MATCHED) == set(wide[1:])


def test_two_lone_matches_anchor_nothing() -> None:
    assert merged(prints(1, 90, 3), prints(1, 3), {1, 3}) == set()
    assert merged(prints(1, 2, 90, 3), prints(1, 2, 3), {1, 2, 3}) == {90}
