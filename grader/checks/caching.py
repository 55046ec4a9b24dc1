"""Part 7: automatic prefix caching, checked against the model of `cache_model`.

The model never predicts which empty block is taken; every other answer (the cached-token
count, which blocks a hit shares, which block an eviction takes, the tables, the counts) follows
from the contract and is compared step by step. Prompts are drawn to share prefixes: a few
system prompts, branches off them, follow-ups that extend an earlier request's tokens (a
multi-turn chat), lengths on block boundaries and prompts of one token. Tokens come from a small
alphabet, so that the same block of tokens often follows different prefixes.
"""

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from grader.checks.support.cache_model import CacheModel
from grader.checks.support.expect import raises
from grader.said import said

pytestmark = pytest.mark.part("caching")

SYSTEM_PROMPTS = ((1, 2, 3, 1, 2, 3, 1, 2), (1, 2, 3, 3, 2, 1), (2, 2, 2, 2))
TOKENS = st.integers(0, 3)


def model(submission, num_blocks: int, block_size: int) -> CacheModel:
    submission.transcript.reset()
    return CacheModel(submission, num_blocks, block_size)


def served(cache: CacheModel, tokens: list[int], request_id: int | None = None) -> int:
    """A request of prompt `tokens` that must be served; its id."""
    request_id = cache.prompt(tokens, request_id)
    assert request_id is not None, said("a check's prompt must fit its pool")
    cache.check_state()
    return request_id


@pytest.mark.points(1)
@pytest.mark.severity("contract")
def check_new_cache_and_bad_arguments(submission):
    """A new pool is all free and holds nothing; bad sizes, ids and prompts raise ValueError."""
    transcript = submission.transcript
    for num_blocks, block_size in ((0, 1), (5, 4)):
        cache = model(submission, num_blocks, block_size)
        cache.check_state()
    for args in ((-1, 4), (4, 0), (4, -1)):
        with raises(transcript, ValueError, f"PrefixCache{args}"):
            submission.module("prefix_cache").PrefixCache(*args)
    cache = model(submission, 4, 2)
    first = served(cache, [1, 2, 3])
    remote, name = cache.cache, cache.name
    bad_calls = (
        (
            f"{name}.allocate_prompt({first}, [4])",
            said("a live id"),
            lambda: remote.allocate_prompt(first, [4]),
        ),
        (
            f"{name}.allocate_prompt(9, [])",
            said("an empty prompt"),
            lambda: remote.allocate_prompt(9, []),
        ),
        (f"{name}.append_token(9, 1)", said("an unknown id"), lambda: remote.append_token(9, 1)),
        (f"{name}.free(9)", said("an unknown id"), lambda: remote.free(9)),
        (f"{name}.block_table(9)", said("an unknown id"), lambda: remote.block_table(9)),
        (f"{name}.ref_count(4)", said("an id out of range"), lambda: remote.ref_count(4)),
        (f"{name}.ref_count(-1)", said("an id out of range"), lambda: remote.ref_count(-1)),
    )
    for call, what, make in bad_calls:
        with raises(transcript, ValueError, said("{call}, with {what},", call=call, what=what)):
            make()
        cache.last_call = said("{call} (which raised)", call=call)
        cache.check_state()


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_a_shared_prompt_is_reused(submission):
    """A second prompt that starts with the first one's full blocks shares them, held by both,
    and returns how many tokens they hold; a freed request's id may be used again."""
    cache = model(submission, 8, 2)
    first = served(cache, [1, 2, 3, 4, 5])
    served(cache, [1, 2, 3, 4, 6, 7])
    cache.free(first)
    cache.check_state()
    served(cache, [1, 2, 3, 4, 5, 6], request_id=first)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_keys_chain_the_whole_prefix(submission):
    """A block of the same tokens after a different prefix is another key: no hit (a hash of
    the block's own tokens serves another prompt's cache); nor is a block whose key's hash is
    another's (hash(-1) == hash(-2) in Python: a hit compares the tokens)."""
    cache = model(submission, 9, 2)
    served(cache, [1, 2, 3, 4, 0])
    served(cache, [9, 9, 3, 4, 0])
    served(cache, [3, 4, 1, 2, 0])
    cache = model(submission, 4, 2)
    served(cache, [-1, -1, 0])
    served(cache, [-2, -2, 0])


@pytest.mark.points(1)
@pytest.mark.severity("contract")
def check_the_last_prompt_token_is_computed(submission):
    """A prompt cached whole reuses all its blocks but the one that holds its last token."""
    cache = model(submission, 8, 2)
    first = served(cache, [1, 2, 3, 4])
    cache.free(first)
    cache.check_state()
    served(cache, [1, 2, 3, 4])
    served(cache, [1, 2, 3])
    served(cache, [1])


@pytest.mark.points(1)
@pytest.mark.severity("safety")
def check_only_full_blocks_are_cached(submission):
    """A partly filled block is never a hit, and a decoded token that fills it caches it."""
    cache = model(submission, 8, 3)
    first = served(cache, [1, 2, 3, 4, 5])
    served(cache, [1, 2, 3, 4, 5, 7, 7])  # first's (4, 5) is no hit: a block of (4, 5, 7) is taken
    assert cache.append(first, 6)  # (4, 5, 6) fills first's last block, which is cached
    cache.check_state()
    served(cache, [1, 2, 3, 4, 5, 6, 7])  # both of first's blocks are hits


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_eviction_takes_the_block_idle_longest(submission):
    """With no empty block, a new block evicts the cached block idle longest: a request frees
    its blocks last first, so its tail goes before its head, and a hit makes a block held. A
    call that evicts the block of a key its own prompt fills again caches that key again."""
    cache = model(submission, 5, 1)
    first = served(cache, [5, 6, 7])
    second = served(cache, [8])
    cache.free(first)
    cache.check_state()
    cache.free(second)
    cache.check_state()
    served(cache, [9, 9, 9])
    served(cache, [5, 1])
    cache = model(submission, 2, 2)
    first = served(cache, [1, 2])
    cache.free(first)
    cache.check_state()
    held = served(cache, [5])
    again = served(cache, [1, 2])  # evicts [1, 2]'s block, and fills one with [1, 2] again
    for request_id in (again, held):
        cache.free(request_id)
        cache.check_state()
    served(cache, [1, 2, 9])  # a hit on the key added again


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_held_blocks_are_never_evicted(submission):
    """Blocks held by a request, or reused by the call itself, are never taken from it."""
    cache = model(submission, 4, 2)
    first = served(cache, [1, 2, 3, 4, 5])
    cache.free(first)
    cache.check_state()
    served(cache, [1, 2, 3, 4, 6, 7, 8])
    cache.check_state()
    assert cache.prompt([9, 9]) is None
    cache.check_state()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_running_out_changes_nothing(submission):
    """A prompt or a token that cannot have its blocks raises RuntimeError and changes nothing:
    no block is evicted either, so the cache still serves what it held."""
    cache = model(submission, 3, 2)
    first = served(cache, [1, 2, 3, 4])
    cache.free(first)
    cache.check_state()
    assert cache.prompt([7, 7, 7, 7, 7, 7, 7]) is None
    cache.check_state()
    second = served(cache, [1, 2, 3, 4, 5])
    while cache.append(second, 6):
        cache.check_state()
    cache.check_state()


def prompts_from(histories: list[list[int]]) -> st.SearchStrategy[list[int]]:
    """A prompt that shares a prefix with a system prompt or an earlier request (a branch or a
    follow-up), or a fresh one."""
    bases = [list(prompt) for prompt in SYSTEM_PROMPTS] + histories
    shared = st.builds(
        lambda base, cut, extra: base[: max(cut, 0)] + extra,
        st.sampled_from(bases),
        st.integers(0, 12),
        st.lists(TOKENS, max_size=4),
    )
    return st.one_of(shared, st.lists(TOKENS, max_size=9)).filter(bool)


class CacheMachine(RuleBasedStateMachine):
    """Prompts, decoded tokens and frees, each checked by the model, the whole state after
    every step."""

    max_live = 4

    def __init__(self, submission) -> None:
        super().__init__()
        self.submission = submission
        self.histories: list[list[int]] = []

    @initialize(num_blocks=st.integers(0, 12), block_size=st.integers(1, 3))
    def new_cache(self, num_blocks, block_size):
        self.model = model(self.submission, num_blocks, block_size)

    @precondition(lambda self: len(self.model.live) < self.max_live)
    @rule(data=st.data())
    def prompt(self, data):
        tokens = data.draw(prompts_from(self.histories), label="prompt")
        if self.model.prompt(tokens) is not None:
            self.histories.append(tokens)

    @precondition(lambda self: self.model.live)
    @rule(data=st.data(), tokens=st.lists(TOKENS, min_size=1, max_size=4))
    def decode(self, data, tokens):
        request_id = data.draw(st.sampled_from(sorted(self.model.live)), label="request")
        for token in tokens:
            if not self.model.append(request_id, token):
                break
            self.model.check_state()

    @precondition(lambda self: self.model.live)
    @rule(data=st.data())
    def free(self, data):
        request_id = data.draw(st.sampled_from(sorted(self.model.live)), label="request")
        self.histories.append(list(self.model.live[request_id].tokens))
        self.model.free(request_id)

    @invariant()
    def state_is_the_models(self):
        self.model.check_state()


@pytest.mark.points(7)
@pytest.mark.severity("safety")
def check_random_prompts_decodes_and_frees(submission):
    run_state_machine_as_test(lambda: CacheMachine(submission))
