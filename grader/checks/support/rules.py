"""Rules of the contract that several checks meet, of one part or of several, by id
(`<part>:<name>`, the part that owns the rule), with the owner's checks that test it. An
assertion of such a rule is made under `expect.judged_by` wherever it is made, so that a failed
check records the rules it may have broken (`CheckResult.rules`): a check of another part that
fails on a rule its owner's checks fail on too is left to them (`grade.leave_to_the_owners`), and
a bug costs its own part, once.

A rule is also a failure's cause: the failures that break one rule of their own part are one
diagnosis, named by the rule, with one question for the interviewer (`report/diagnosis.py`,
`report/debrief.py`), and each is labelled by what breaking the rule harms (`HARMS`), whatever
the worst its check could find.
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
# Part 2: a prefill gives a request ceil(seq_len / block_size) free blocks, where enough are free.
PREFILL_BLOCKS = "decode:prefill_blocks"
# Part 3: get_physical_cache is the first seq_len rows of a request's blocks, in table order.
GATHER_ROWS = "gather:rows"
# Part 3: slot_mapping gives token i slot block_table[i // block_size] * block_size + i %
# block_size, a tensor [seq_len].
SLOT_MAPPING = "gather:slots"
# Part 3: slot_mapping's tensor is int64.
SLOT_DTYPE = "gather:slot_dtype"
# Part 6: fork gives the child the parent's seq_len and blocks, shared, and its own id.
FORK_SHARES = "sharing:fork_shares"
# Part 6: a decode whose token goes into a shared block that is not full copies that block into a
# free one first, or is refused (RuntimeError) where none is free.
COPY_ON_WRITE = "sharing:copy_on_write"
# Part 6: a block's ref_count is how many holders it has: allocate gives one, incref adds one,
# free drops one, and the block is free again at zero.
REF_COUNTS = "sharing:ref_counts"
# Part 7: with no empty block, a take evicts the cached block idle longest; a free makes its
# request's blocks idle last to first.
EVICTION_ORDER = "caching:eviction_order"
# Part 7: a take evicts a cached block only where no block is empty.
EMPTY_FIRST = "caching:empty_first"
# Part 7: a take is of an empty block or a cached idle one: never a held block, nor one twice.
TAKES_FREE = "caching:takes_free"
# Part 7: num_free counts the empty blocks and the cached idle ones.
CACHE_FREE_COUNT = "caching:free_count"
# Part 7: a prompt's block table holds ceil(len(prompt) / block_size) blocks.
CACHE_TABLE = "caching:table_blocks"
# Part 7: a block's ref_count is how many live requests hold it.
CACHE_REF_COUNTS = "caching:ref_counts"

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
    PREFILL_BLOCKS: (
        "prefill_takes_ceil_seq_len_over_block_size_blocks",
        "random_prefill_decode_and_free",
    ),
    GATHER_ROWS: ("gather_follows_a_scattered_block_table", "random_writes_read_back"),
    SLOT_MAPPING: ("slot_mapping_follows_the_block_table", "random_writes_read_back"),
    SLOT_DTYPE: ("slot_mapping_follows_the_block_table",),
    FORK_SHARES: ("fork_shares_every_block", "random_fork_decode_and_free"),
    COPY_ON_WRITE: ("copy_on_write", "random_fork_decode_and_free"),
    REF_COUNTS: ("ref_counts_follow_allocate_incref_and_free", "random_incref_and_free"),
    EVICTION_ORDER: ("eviction_takes_the_block_idle_longest", "random_prompts_decodes_and_frees"),
    EMPTY_FIRST: ("random_prompts_decodes_and_frees",),
    TAKES_FREE: ("held_blocks_are_never_evicted", "random_prompts_decodes_and_frees"),
    CACHE_FREE_COUNT: ("held_blocks_are_never_evicted", "random_prompts_decodes_and_frees"),
    CACHE_TABLE: ("a_shared_prompt_is_reused", "random_prompts_decodes_and_frees"),
    CACHE_REF_COUNTS: ("a_shared_prompt_is_reused", "random_prompts_decodes_and_frees"),
}
# Not a rule of the contract's: the cause of a timing whose results, the code's own, differ from
# the contract where no check of its part that times nothing fails (`grade.not_timed`); contract.
TIMED_RESULTS = "timed_results"
# What breaking each rule harms (`grader/severity.py`): safety where the state left is corrupt or
# leaks, contract where an order or a type the contract fixes is not kept and nothing is corrupt.
HARMS = {
    FREE_BLOCKS: "safety",
    POOL_DTYPE: "contract",  # the right values, in a pool of another dtype
    HELD_ONCE: "safety",
    FREE_COUNT: "safety",
    DECODE_BLOCK: "safety",
    REFUSED_DECODE: "safety",
    PREFILL_BLOCKS: "safety",
    GATHER_ROWS: "safety",
    SLOT_MAPPING: "safety",
    SLOT_DTYPE: "contract",
    FORK_SHARES: "safety",
    COPY_ON_WRITE: "safety",
    REF_COUNTS: "safety",
    EVICTION_ORDER: "contract",  # another cached block evicted: a miss later, never a wrong row
    EMPTY_FIRST: "contract",
    TAKES_FREE: "safety",
    CACHE_FREE_COUNT: "safety",
    CACHE_TABLE: "safety",
    CACHE_REF_COUNTS: "safety",
}


def owner(rule: str) -> str:
    """The part that owns `rule`."""
    return rule.split(":", 1)[0]
