"""The answer key's part 7 prefix cache, case by case.

The grader's state machine (`grader/checks/caching.py`) checks it over random calls in every
grading of the answer key; these are the named cases a reader checks first, and the one no
grading can reach: a hash collision never serves wrong tokens.
"""

import sys

import pytest

from solutions.prefix_cache import OutOfBlocks, PrefixCache


def snapshot(cache: PrefixCache, request_ids: list[int]) -> tuple:
    """Everything a caller can observe of `cache` with the live requests `request_ids`."""
    tables = [cache.block_table(request_id) for request_id in request_ids]
    return cache.num_free, [cache.ref_count(b) for b in range(cache.num_blocks)], tables


def test_a_shared_prefix_is_reused_and_the_last_token_computed() -> None:
    cache = PrefixCache(8, 2)
    assert cache.allocate_prompt(1, [1, 2, 3, 4, 5]) == 0
    assert cache.allocate_prompt(2, [1, 2, 3, 4, 6]) == 4
    assert cache.block_table(2)[:2] == cache.block_table(1)[:2]
    assert [cache.ref_count(b) for b in cache.block_table(2)] == [2, 2, 1]
    assert cache.allocate_prompt(3, [1, 2, 3, 4]) == 2  # its last block holds its last token


def test_the_same_tokens_after_another_prefix_are_another_key() -> None:
    cache = PrefixCache(8, 2)
    cache.allocate_prompt(1, [1, 2, 3, 4, 0])
    assert cache.allocate_prompt(2, [9, 9, 3, 4, 0]) == 0


def test_a_collision_of_the_hash_serves_no_wrong_tokens() -> None:
    """`hash(7) == hash(7 + 2**61 - 1)`: the first blocks of these prompts collide, and so do the
    second blocks' chained hashes; only the prefix each block really follows is served."""
    cache = PrefixCache(8, 1)
    colliding = 7 + sys.hash_info.modulus
    cache.allocate_prompt(1, [7, 9])
    cache.allocate_prompt(2, [colliding, 5])
    assert cache.allocate_prompt(3, [7, 5, 8]) == 1
    assert cache.allocate_prompt(4, [colliding, 5, 8]) == 2


def test_eviction_takes_the_block_idle_longest_tail_first() -> None:
    cache = PrefixCache(3, 1)
    cache.allocate_prompt(1, [5, 6, 7])
    head, middle, tail = cache.block_table(1)
    cache.free(1)
    assert cache.num_free == 3
    cache.allocate_prompt(2, [5, 9])  # reuses the head, evicts the tail
    assert cache.block_table(2) == [head, tail]
    cache.allocate_prompt(3, [8])
    assert cache.block_table(3) == [middle]


def test_running_out_raises_and_changes_nothing() -> None:
    cache = PrefixCache(3, 2)
    cache.allocate_prompt(1, [1, 2, 3, 4])
    cache.free(1)
    before = snapshot(cache, [])
    with pytest.raises(OutOfBlocks):
        cache.allocate_prompt(2, [7] * 7)
    assert snapshot(cache, []) == before
    assert cache.allocate_prompt(3, [1, 2, 3, 4, 5]) == 4  # nothing was evicted


def test_a_decoded_token_that_fills_its_block_caches_it() -> None:
    cache = PrefixCache(8, 3)
    cache.allocate_prompt(1, [1, 2, 3, 4, 5])
    assert cache.allocate_prompt(2, [1, 2, 3, 4, 5, 6, 7]) == 3
    cache.append_token(1, 6)
    assert cache.allocate_prompt(3, [1, 2, 3, 4, 5, 6, 7]) == 6


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda cache: PrefixCache(-1, 2), ValueError),
        (lambda cache: PrefixCache(4, 0), ValueError),
        (lambda cache: cache.allocate_prompt(1, [4]), ValueError),
        (lambda cache: cache.allocate_prompt(2, []), ValueError),
        (lambda cache: cache.append_token(9, 1), ValueError),
        (lambda cache: cache.free(9), ValueError),
        (lambda cache: cache.block_table(9), ValueError),
        (lambda cache: cache.ref_count(4), ValueError),
    ],
)
def test_bad_calls_raise_and_change_nothing(call, error) -> None:
    cache = PrefixCache(4, 2)
    cache.allocate_prompt(1, [1, 2, 3])
    before = snapshot(cache, [1])
    with pytest.raises(error):
        call(cache)
    assert snapshot(cache, [1]) == before
