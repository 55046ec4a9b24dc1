"""Automatic prefix caching (part 7), written as a worked example.

The story so far: a request's KV cache lives in blocks of `block_size` tokens. Many requests
start with the same tokens (a system prompt, a chat history), so once one request has computed
the blocks of such a prefix, later requests should be able to point at the very same blocks
instead of recomputing them. And when a request finishes, its blocks need not be wiped at once:
we keep them "cached and idle" until the pool really needs the room.

Every block is in exactly one of three states:

    held            one or more live requests point at it       (holder count > 0)
    cached & idle   nobody holds it, but its contents are kept   (holder count 0, has a key)
    empty           nobody holds it, nothing worth keeping       (holder count 0, no key)

The data structures, one per question we need to answer quickly:

- "which block holds these tokens, after this prefix?"    -> `self._cache`, a dict key -> block
- "how many holders does block b have?"                   -> `self._holders`, a list
- "which key does block b carry, if it is cached?"        -> `self._key_of_block`, a list
- "give me an empty block"                                -> `self._empty_stack`, a list/stack
- "which idle block has been idle the longest?"           -> `self._idle_heap`, a min-heap

About the min-heap: every time a block becomes idle it gets a ticket number from an ever-growing
counter, and `(ticket, block)` is pushed on the heap. The smallest ticket on the heap is the
block that became idle first, i.e. the least recently used one. When an idle block is picked up
again by a request (a cache hit), we do not dig it out of the heap (that would be slow); we just
leave its old entry there and recognise it as stale later: an entry is current only if the block
is still idle and its recorded ticket still matches. Stale entries are skipped when popping and
are swept away in bulk when they start to outnumber the live ones.
"""

import heapq
import operator
from collections.abc import Sequence


class OutOfBlocks(RuntimeError):
    """Raised when the pool cannot give the blocks asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: need {n} blocks, {free} free")`.
    """


class _BlockKey:
    """The identity of a full block: its tokens plus the identity of everything before it.

    The key of block `j` is `(key of block j-1, tokens of block j)`, with the first block's
    parent being `None` (the root). Two keys are equal exactly when the token sequences agree
    from the very first token through the end of the block, which is the cache's promise.

    Why a class and not a plain nested tuple? Hashing a nested tuple re-hashes the whole chain
    every time, which would make long prompts quadratic. Here the hash is computed once from the
    parent's (already computed) hash and the block's tokens. Equality then compares the actual
    tokens, so two different prefixes that happen to share a hash are never confused.
    """

    __slots__ = ("_hash", "depth", "parent", "tokens")

    def __init__(self, parent: "_BlockKey | None", tokens: tuple[int, ...]) -> None:
        self.parent = parent
        self.tokens = tokens
        self.depth = 0 if parent is None else parent.depth + 1
        parent_hash = 0 if parent is None else parent._hash
        self._hash = hash((parent_hash, tokens))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _BlockKey):
            return NotImplemented
        # Walk both chains back towards the root together, one block at a time (a loop, not
        # recursion, so very long prompts cannot overflow the stack). Usually the parents are
        # the very same object after one step, and the walk ends at once.
        mine: _BlockKey | None = self
        theirs: _BlockKey | None = other
        while mine is not theirs:
            if mine is None or theirs is None:
                return False
            if mine._hash != theirs._hash or mine.depth != theirs.depth:
                return False
            if mine.tokens != theirs.tokens:
                return False
            mine, theirs = mine.parent, theirs.parent
        return True


class _LiveRequest:
    """What we remember about one live request.

    `blocks`         its block table, in order;
    `num_tokens`     how many tokens it holds so far;
    `open_tokens`    the tokens of its last block while that block is not yet full;
    `last_full_key`  the key of its last full block (the parent of the next one), or None.
    """

    __slots__ = ("blocks", "last_full_key", "num_tokens", "open_tokens")

    def __init__(self) -> None:
        self.blocks: list[int] = []
        self.num_tokens = 0
        self.open_tokens: list[int] = []
        self.last_full_key: _BlockKey | None = None


class PrefixCache:
    """Block tables for requests whose prompts reuse the cached blocks of earlier requests."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        """A pool of `num_blocks` empty blocks of `block_size` tokens each; ValueError when
        `num_blocks < 0` or `block_size < 1`."""
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size

        self._cache: dict[_BlockKey, int] = {}
        self._holders: list[int] = [0] * num_blocks
        self._key_of_block: list[_BlockKey | None] = [None] * num_blocks
        self._empty_stack: list[int] = list(range(num_blocks - 1, -1, -1))

        # The LRU machinery for idle blocks (see the module docstring).
        self._idle_heap: list[tuple[int, int]] = []
        self._idle_ticket_of_block: list[int] = [-1] * num_blocks
        self._next_ticket = 0
        self._idle_count = 0

        self._requests: dict[int, _LiveRequest] = {}

    # ------------------------------------------------------------------------------------
    # Reading the state
    # ------------------------------------------------------------------------------------

    @property
    def num_free(self) -> int:
        """Blocks with no holder: empty ones plus cached-and-idle ones."""
        return len(self._empty_stack) + self._idle_count

    def ref_count(self, block_id: int) -> int:
        """How many requests hold `block_id` now; ValueError when it is out of range."""
        try:
            index = operator.index(block_id)
        except TypeError:
            raise ValueError(f"block id must be an integer, got {block_id!r}") from None
        if not 0 <= index < self.num_blocks:
            raise ValueError(f"block id {block_id} is outside 0 .. {self.num_blocks - 1}")
        return self._holders[index]

    def block_table(self, request_id: int) -> list[int]:
        """The block ids of a live request, in order; ValueError for an unknown id."""
        return list(self._live_request(request_id).blocks)

    # ------------------------------------------------------------------------------------
    # Changing the state
    # ------------------------------------------------------------------------------------

    def allocate_prompt(self, request_id: int, token_ids: Sequence[int]) -> int:
        """Give a new request blocks for its prompt, reusing cached ones; return how many prompt
        tokens were already cached."""
        # Step 0: argument checks.
        if request_id in self._requests:
            raise ValueError(f"request {request_id} is already live")
        prompt = list(token_ids)
        if not prompt:
            raise ValueError("a prompt needs at least one token")

        size = self.block_size
        total_blocks = (len(prompt) + size - 1) // size
        full_blocks = len(prompt) // size
        # Only blocks that end at or before token len-2 may be hits: the last prompt token is
        # always computed, so the block holding it is never reused.
        hit_candidates = (len(prompt) - 1) // size

        # Step 1: compute the key of every full block of the prompt, in order. Whenever the
        # cache already has an equal key we continue the chain from the cache's own key
        # object, so the next comparison finds the same parent object and stops at once.
        keys: list[_BlockKey] = []
        parent: _BlockKey | None = None
        for block_index in range(full_blocks):
            chunk = tuple(prompt[block_index * size : (block_index + 1) * size])
            key = _BlockKey(parent, chunk)
            cached_block = self._cache.get(key)
            if cached_block is not None:
                key = self._key_of_block[cached_block]
            keys.append(key)
            parent = key

        # Step 2: find the cached prefix: the longest run of hits from the first block.
        hit_blocks: list[int] = []
        for block_index in range(hit_candidates):
            cached_block = self._cache.get(keys[block_index])
            if cached_block is None:
                break
            hit_blocks.append(cached_block)

        # Step 3: count before touching anything (all or nothing). A hit that is idle stops
        # being available for other uses once we hold it, so it does not count as spare.
        idle_hits = sum(1 for block in hit_blocks if self._holders[block] == 0)
        blocks_to_take = total_blocks - len(hit_blocks)
        blocks_available = self.num_free - idle_hits
        if blocks_to_take > blocks_available:
            raise OutOfBlocks(f"OOM: need {blocks_to_take} blocks, {blocks_available} can be had")

        # Step 4: hold the hits. Doing this before taking new blocks guarantees that they are
        # no longer idle, so the evictions below can never pick one of them.
        for block in hit_blocks:
            self._hold(block)

        # Step 5: take the remaining blocks one at a time, in table order.
        new_blocks = [self._take_block() for _ in range(blocks_to_take)]
        table = hit_blocks + new_blocks

        # Step 6: publish every full block whose key the cache does not know yet. (A key may
        # have vanished during step 5 if its block was evicted; then ours takes its place.)
        for block_index in range(len(hit_blocks), full_blocks):
            self._publish(table[block_index], keys[block_index])

        # Step 7: remember the request.
        record = _LiveRequest()
        record.blocks = table
        record.num_tokens = len(prompt)
        record.open_tokens = prompt[full_blocks * size :]
        record.last_full_key = keys[-1] if keys else None
        self._requests[request_id] = record
        return len(hit_blocks) * size

    def append_token(self, request_id: int, token_id: int) -> None:
        """One decoded token: a new block when it starts one; publish the block it fills."""
        record = self._live_request(request_id)

        # Step 1: does this token start a new block? If so, get one first; if none can be had
        # we raise before anything about the request has changed.
        if record.num_tokens % self.block_size == 0:
            if self.num_free == 0:
                raise OutOfBlocks("OOM: need 1 block, 0 free")
            record.blocks.append(self._take_block())
            record.open_tokens = []

        # Step 2: write the token into the open block.
        record.open_tokens.append(token_id)
        record.num_tokens += 1

        # Step 3: a block that has just become full gets a key and may enter the cache.
        if len(record.open_tokens) == self.block_size:
            key = _BlockKey(record.last_full_key, tuple(record.open_tokens))
            key = self._publish(record.blocks[-1], key)
            record.last_full_key = key
            record.open_tokens = []

    def free(self, request_id: int) -> None:
        """Release the request's blocks from its last to its first."""
        record = self._live_request(request_id)
        # Releasing the tail first means the tail becomes idle first and is therefore evicted
        # before the head, which other prompts are more likely to share.
        for block in reversed(record.blocks):
            self._release(block)
        del self._requests[request_id]

    # ------------------------------------------------------------------------------------
    # Helpers: block state changes
    # ------------------------------------------------------------------------------------

    def _live_request(self, request_id: int) -> _LiveRequest:
        """The record of a live request, or a ValueError for an unknown id."""
        record = self._requests.get(request_id)
        if record is None:
            raise ValueError(f"request {request_id} is not live")
        return record

    def _hold(self, block: int) -> None:
        """One more holder for a cached block (idle -> held, or held -> held by more)."""
        if self._holders[block] == 0:
            # It was idle; its heap entry is now stale and will be skipped later.
            self._idle_count -= 1
        self._holders[block] += 1

    def _release(self, block: int) -> None:
        """One holder less; a block left with none becomes idle (if cached) or empty."""
        self._holders[block] -= 1
        if self._holders[block] > 0:
            return
        if self._key_of_block[block] is not None:
            # Cached: it joins the idle blocks as the most recently idle one.
            ticket = self._next_ticket
            self._next_ticket += 1
            self._idle_ticket_of_block[block] = ticket
            heapq.heappush(self._idle_heap, (ticket, block))
            self._idle_count += 1
            self._maybe_sweep_heap()
        else:
            self._empty_stack.append(block)

    def _take_block(self) -> int:
        """A block for a new holder: an empty one if any, else the longest-idle cached one.

        The caller has already checked that one can be had.
        """
        if self._empty_stack:
            block = self._empty_stack.pop()
        else:
            block = self._pop_longest_idle()
            # Eviction: the block's contents are about to be overwritten, so its key leaves
            # the cache.
            evicted_key = self._key_of_block[block]
            del self._cache[evicted_key]
            self._key_of_block[block] = None
            self._idle_count -= 1
        self._holders[block] = 1
        return block

    def _pop_longest_idle(self) -> int:
        """Pop heap entries until one is current, and return its block."""
        while True:
            ticket, block = heapq.heappop(self._idle_heap)
            if self._is_current_idle_entry(ticket, block):
                return block

    def _is_current_idle_entry(self, ticket: int, block: int) -> bool:
        """Whether a heap entry still describes an idle block (and not a stale past visit)."""
        return (
            self._holders[block] == 0
            and self._key_of_block[block] is not None
            and self._idle_ticket_of_block[block] == ticket
        )

    def _maybe_sweep_heap(self) -> None:
        """Drop stale entries once they make up most of the heap.

        The sweep costs O(heap size), but it only runs after at least as many pushes as it
        removes, so on average it adds O(1) to each push.
        """
        if len(self._idle_heap) <= 2 * self._idle_count + 32:
            return
        current = [
            (ticket, block)
            for ticket, block in self._idle_heap
            if self._is_current_idle_entry(ticket, block)
        ]
        heapq.heapify(current)
        self._idle_heap = current

    def _publish(self, block: int, key: _BlockKey) -> _BlockKey:
        """Put a full block into the cache under `key`, unless that key is there already.

        Returns the key object the cache uses for these tokens, so that the next block's key
        can be built on it.
        """
        existing_block = self._cache.get(key)
        if existing_block is not None:
            # The older block keeps the key; this one stays uncached.
            return self._key_of_block[existing_block]
        self._cache[key] = block
        self._key_of_block[block] = key
        return key
