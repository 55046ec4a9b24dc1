"""Checks, by id, that test a rule another part's checks also meet: where a check fails on such
a rule (`expect.rule_of`) and one of these fails too, the failure is left to them
(`grade.leave_to_the_owners`), so that a bug costs its own part, once.
"""

# Part 1: `allocate(n)` hands out n distinct free ids in range, and num_free drops by n.
ALLOCATES_FREE_IDS = (
    "allocator/allocate_hands_out_distinct_free_ids",
    "allocator/random_allocate_and_free",
)
# Part 2: a prefill takes ceil(seq_len / block_size) free blocks.
PREFILLS = (
    "decode/prefill_takes_ceil_seq_len_over_block_size_blocks",
    "decode/random_prefill_decode_and_free",
)
# Part 2: a decode counts one more token, and takes a free block exactly when it starts one.
DECODES = (
    "decode/decode_adds_a_block_exactly_when_a_token_starts_one",
    "decode/decode_with_block_size_one",
    "decode/random_prefill_decode_and_free",
)
# Part 2: a refused decode changes nothing, seq_len included.
REFUSED_DECODES = (
    "decode/decode_without_a_free_block_is_refused",
    "decode/random_prefill_decode_and_free",
)
# Part 2: the free blocks and the blocks held make num_blocks: nothing leaks.
KEEPS_COUNT = ("decode/free_returns_every_block", "decode/random_prefill_decode_and_free")
