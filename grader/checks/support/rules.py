"""Rules that checks of several parts meet, by id (`<part>:<name>`, the part that owns the rule),
with the owner's checks that test it. An assertion of such a rule is made under `expect.judged_by`
wherever it is made, so that a failed check records the rules it may have broken
(`CheckResult.rules`): a check of another part that fails on a rule its owner's checks fail on
too is left to them (`grade.leave_to_the_owners`), and a bug costs its own part, once.
"""

# Part 1: `allocate(n)` hands out n distinct free ids in range, and num_free counts the free.
FREE_BLOCKS = "allocator:free_blocks"
# Part 2: the manager's pool is float32 [num_blocks, block_size, head_dim] (the stub makes it so):
# rows read from it that are right but for their dtype were read from a pool of another.
POOL_DTYPE = "decode:pool_dtype"
# Part 2: the blocks a call gives a request were free: no two live requests hold one block.
HELD_ONCE = "decode:held_once"
# Part 2: the manager's `len(free_blocks)` is num_blocks minus the blocks its live requests hold.
FREE_COUNT = "decode:free_count"
# Part 2: a decode counts one more token, and takes a free block exactly when it starts one.
DECODE_BLOCK = "decode:decode_block"
# Part 2: a decode refused for want of a block changes nothing, seq_len included.
REFUSED_DECODE = "decode:refused_decode"

CHECKS = {  # the owner's checks that test each rule (their names), run where it is not graded
    FREE_BLOCKS: ("allocate_hands_out_distinct_free_ids", "random_allocate_and_free"),
    POOL_DTYPE: ("new_manager_and_request",),
    HELD_ONCE: ("free_returns_every_block", "random_prefill_decode_and_free"),
    FREE_COUNT: (
        "prefill_takes_ceil_seq_len_over_block_size_blocks",
        "free_returns_every_block",
        "random_prefill_decode_and_free",
    ),
    DECODE_BLOCK: (
        "decode_adds_a_block_exactly_when_a_token_starts_one",
        "decode_with_block_size_one",
        "random_prefill_decode_and_free",
    ),
    REFUSED_DECODE: ("decode_without_a_free_block_is_refused", "random_prefill_decode_and_free"),
}


def owner(rule: str) -> str:
    """The part that owns `rule`."""
    return rule.split(":", 1)[0]
