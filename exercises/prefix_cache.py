"""Part 7 · automatic prefix caching (10 points).

Serving engines (vLLM's v1 KV-cache manager, nano-vllm) reuse the KV blocks of any earlier
request whose prompt starts with the same tokens (a shared system prompt, few-shot examples, a
multi-turn chat), and keep freed blocks cached until the pool needs them. This class manages its
own pool of block ids `0 .. num_blocks-1` and is graded alone: it imports none of your other files.

Every block is in one of three states: held (by one or more requests), cached and idle (no
holder, its contents kept in the cache, evictable), or empty (no holder, nothing cached).

- Cache key: a full block's key is its tokens together with the key of the block before it in
  the same request (the first block's parent is a fixed root), so two blocks have the same key
  exactly when their requests' tokens agree from the start through the end of the block.
  Hashing `(parent key, tuple(tokens))` with Python's `hash` is fine, but a collision must never
  serve wrong tokens: compare the tokens on a hit. The cache maps a key to at most one block.
- Taking a block: an empty one if there is one (which id is yours to choose); otherwise evict the
  cached-and-idle block that has been idle longest (its key leaves the cache) and use it.
- Cost: `allocate_prompt` and `append_token` O(blocks touched), `free` O(its blocks), taking a
  block O(1): independent of `num_blocks` and of how many blocks are cached. Timed with every
  block cached (each take an eviction) and with most blocks empty (prompts found cached, then
  decoded token by token into empty blocks).

Error rules (the grader checks every one of them): a call that raises changes nothing; running
out of blocks raises a RuntimeError (use `OutOfBlocks`); the other errors are ValueError.

Hints:
- `collections.OrderedDict` keeps the idle blocks in the order they became idle, and
  `popitem(last=False)` evicts the oldest in O(1).
- Free a request's blocks from its last to its first: its tail is then evicted before its
  head, which other prompts are more likely to share.
"""

from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        """A pool of `num_blocks` empty blocks of `block_size` tokens each; ValueError when
        `num_blocks < 0` or `block_size < 1`."""
        self.num_blocks = num_blocks
        self.block_size = block_size

    @property
    def num_free(self) -> int:
        """Blocks with no holder: empty ones plus cached-and-idle ones."""
        raise NotImplementedError("PrefixCache.num_free")

    def ref_count(self, block_id: int) -> int:
        """How many requests hold `block_id` now; ValueError when it is out of range."""
        raise NotImplementedError("PrefixCache.ref_count")

    def block_table(self, request_id: int) -> list[int]:
        """The block ids of a live request, in order; ValueError for an unknown id."""
        raise NotImplementedError("PrefixCache.block_table")

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        """Give a new request `ceil(len(token_ids) / block_size)` blocks for its prompt, in order,
        and return how many prompt tokens are already cached (a multiple of `block_size`).

        The cached prefix is the longest run of blocks, from the first, whose keys are in the
        cache and whose tokens lie within the first `len(token_ids) - 1` tokens (the last prompt
        token is always computed). Those blocks are shared, not copied: one more holder each (a
        cached-and-idle one becomes held). The other blocks are taken one at a time, in table
        order, as the module's docstring says; blocks this call reuses are never evicted by it.
        Then every full block of the prompt whose key is not in the cache yet is added to it
        (where the key is there already, the cache keeps the older block; a block this call
        evicted is no longer there).

        All or nothing: when the blocks cannot be had, raise OutOfBlocks and change nothing (no
        eviction either). ValueError for a `request_id` that is live, or an empty prompt.
        """
        raise NotImplementedError("PrefixCache.allocate_prompt")

    def append_token(self, request_id: int, token_id: int) -> None:
        """One decoded token: a new block (taken as above) when the token starts one; when it
        fills its block, that block is added to the cache as for a prompt. OutOfBlocks, and
        nothing changed, when no block can be had; ValueError for an unknown id."""
        raise NotImplementedError("PrefixCache.append_token")

    def free(self, request_id: int) -> None:
        """Release the request's blocks from its last to its first: each loses a holder; one
        left with none becomes cached-and-idle (the most recently idle) if it is in the cache,
        else empty. The request is then unknown. ValueError for an unknown id."""
        raise NotImplementedError("PrefixCache.free")
