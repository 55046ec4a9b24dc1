"""Buggy submissions lose points, in their own part: mutants of the answer key, one or more per
rule of the contract's parts 1, 2, 3, 6 and 7, each listed with the part whose rule it breaks.

A mutant is the answer key with exact text edits (each old text must occur exactly once, so the
table fails loudly when the answer key changes). Each is graded once on every CPU part that runs
the code it edits (`reach.reached`: a part that runs none of it cannot lose points to it). Its
own part must score below its maximum through at least one real failure, with no grader error. The
slow-but-correct mutants (a `list.pop(0)` free list, a Python loop over tokens) must lose points
through the part's timing checks only. And a bug must cost points in its own part, not in the
others: for every mutant, the points lost outside its part stay within `cascade.CASCADE_LIMIT`
of those lost in it (`python -m tests.end_to_end.cascade` prints the figure mutant by mutant).
A mutant's timed work is done as asked: its results are its code's own. A bug whose failures
all break one rule is one diagnosis and one question (`CAUSES`).

These tests read verdicts, not counterexamples, so a mutant is graded with `--shrinks 0`: the
same scores, found without shrinking a failure. Those whose counterexamples test_counterexamples.py
runs (`replayed`) are graded as a candidate's are, their failures shrunk by a fixed amount of work
(the profile's `shrinks`), not of seconds: a busy machine makes them slower, not different (short
of the 300 s safety net per failure). A check cut short by a budget says "the part's time budget
... is spent" and does not count as catching the mutant (one test cuts a search short on purpose).
"""

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from full_kit.coverage import load, rules_missed
from grader.checks.support.rules import DECODE_BLOCK, EVICTION_ORDER, HARMS
from grader.report.debrief import debrief, debriefs
from grader.report.diagnosis import diagnosis, said
from grader.scoring.plugin import check_names
from grader.scoring.profiles import PROFILES
from tests.end_to_end.cascade import CASCADE_LIMIT, losses, table
from tests.end_to_end.reach import reached
from tests.grading import (
    CUT_SHORT,
    NOT_AS_ASKED,
    VERDICTS_ONLY,
    Edit,
    Graded,
    build_submission,
    concurrently,
    grade,
    grade_shared,
    module_items,
    mutant_options,
)
from tests.grading import selected_params as selected

COVERAGE = load()  # each mutant fails a check of every rule of docs/coverage.toml naming it


@dataclass(frozen=True)
class Mutant:
    id: str
    part: str  # the part that must lose points
    edits: tuple[Edit, ...]
    timing_only: bool = False  # correct but slow: only the part's timing checks may fail
    replayed: bool = False  # test_counterexamples.py runs its counterexamples: they are shrunk

    @property
    def options(self) -> tuple[str, ...]:
        parts = ",".join(reached(self.edits))
        return mutant_options(("--parts", parts), self.replayed)


def allocator(*changes: tuple[str, str]) -> tuple[Edit, ...]:
    return tuple(Edit("block_allocator.py", old, new) for old, new in changes)


def manager(*changes: tuple[str, str]) -> tuple[Edit, ...]:
    return tuple(Edit("kv_cache_manager.py", old, new) for old, new in changes)


def prefix_cache(*changes: tuple[str, str]) -> tuple[Edit, ...]:
    return tuple(Edit("prefix_cache.py", old, new) for old, new in changes)


NEGATIVE_POOL = """\
        if num_blocks < 0:
            raise ValueError(f"num_blocks must be >= 0, got {num_blocks}")
"""
OOM_CHECK = """\
        if n > len(self._free):
            raise OutOfBlocks(f"OOM: asked for {n} blocks, {len(self._free)} free")
"""
POP_ITEMS = "        block_ids = [self._free.popitem()[0] for _ in range(n)]\n"
TAKE_THE_FIRST_TWICE = "        if n > 1:\n            block_ids[1] = block_ids[0]\n"
KEEP_THE_FIRST_FREE = "        if block_ids:\n            self._free[block_ids[0]] = None\n"
FREE_CHECKS = """\
        drops = Counter(self._checked_id(block_id) for block_id in block_ids)
        for block_id, count in drops.items():
            if count > self._ref_counts[block_id]:
                raise ValueError(
                    f"block {block_id} freed {count} time(s) but holds "
                    f"{self._ref_counts[block_id]} reference(s) (double free?)"
                )
        for block_id, count in drops.items():
            self._ref_counts[block_id] -= count
            if self._ref_counts[block_id] == 0:
                self._free[block_id] = None
"""
FREE_ONE_BY_ONE = """\
        for block_id in block_ids:
            block_id = self._checked_id(block_id)
            if self._ref_counts[block_id] == 0:
                raise ValueError(f"block {block_id} is not allocated")
            self._ref_counts[block_id] -= 1
            if self._ref_counts[block_id] == 0:
                self._free[block_id] = None
"""
INCREF_CHECK = """\
        if self._ref_counts[block_id] == 0:
            raise ValueError(f"block {block_id} is free: only an allocated block can be shared")
"""
NEGATIVE_PROMPT = """\
        if prompt_len < 0:
            raise ValueError(f"prompt_len must be >= 0, got {prompt_len}")
"""
BLOCK_SIZE_CHECK = """\
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
"""
POOL_AFTER_ALLOCATOR = """\
        self.allocator = BlockAllocator(num_blocks)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
"""
POOL_BEFORE_ALLOCATOR = """\
        self.physical_kv_cache = torch.zeros(num_blocks, block_size, head_dim, dtype=torch.float32)
        self.allocator = BlockAllocator(num_blocks)
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.head_dim = head_dim
"""
PREFILL_CHECK = """\
        if req.block_table:
            raise ValueError(f"request {req.request_id} already has blocks: prefill it only once")
"""
PREFILL = "req.block_table.extend(self.allocator.allocate(cdiv(req.seq_len, self.block_size)))"
PREFILL_SIZE = "allocate(cdiv(req.seq_len, self.block_size))"
DECODE_RULE = """\
        if req.seq_len % self.block_size == 0:
            req.block_table.extend(self.allocator.allocate(1))
"""
DECODE_RULE_AFTER_INCREMENT = """\
        req.seq_len += 1
        if (req.seq_len - 1) % self.block_size == 0:
            req.block_table.extend(self.allocator.allocate(1))
"""
GATHER = """\
        blocks = torch.tensor(req.block_table, dtype=torch.long)
        rows = self.physical_kv_cache.index_select(0, blocks).view(-1, self.head_dim)
        return rows[: req.seq_len]
"""
GATHER_PER_TOKEN = """\
        rows = [
            self.physical_kv_cache[req.block_table[i // self.block_size], i % self.block_size]
            for i in range(req.seq_len)
        ]
        return torch.stack(rows) if rows else self.physical_kv_cache.new_zeros(0, self.head_dim)
"""
FORK_INCREF = """\
        for block_id in parent.block_table:
            self.allocator.incref(block_id)
"""
COPY_ON_WRITE = """\
        elif self.allocator.ref_count(req.block_table[-1]) > 1:
            req.block_table[-1] = self._copy_on_write(req.block_table[-1])
"""
COPY_ROWS = "        self.physical_kv_cache[private_block] = self.physical_kv_cache[shared_block]\n"
CHAINED_HASH = "self.hash = hash((None if parent is None else parent.hash, tokens))"
CHAINED_EQUALITY = "            mine, theirs = mine.parent, theirs.parent\n"
PROMPT_OOM = """\
        if needed > self.num_free - idle_hits:
"""
EVICT_ALL_IDLE = """\
        if needed > self.num_free - idle_hits:
            for block in list(self._idle):
                if block not in hits:
                    del self._idle[block], self._cache[self._keys[block]]
                    self._keys[block] = None
                    self._empty.append(block)
"""

CHECKED_REF_COUNT = "        return self._ref_counts[self._checked_id(block_id)]\n"
NUM_FREE_PROPERTY = """\
    @property
    def num_free(self) -> int:
        return len(self._free)

"""
FREE_BLOCKS_VIEW = """\
    @property
    def free_blocks(self) -> Collection[int]:
        \"\"\"The free block ids (a live read-only view; `len()` is the number free).\"\"\"
        return FreeBlocks(self.allocator)

"""
SLOT_MAPPING = """\
        blocks = torch.tensor(req.block_table, dtype=torch.long)
        slots = blocks[:, None] * self.block_size + torch.arange(self.block_size)
        return slots.flatten()[: req.seq_len]
"""
SLOT_MAPPING_PER_BLOCK = """\
        size = self.block_size
        slots = [torch.arange(block * size, (block + 1) * size) for block in req.block_table]
        return torch.cat(slots)[: req.seq_len] if slots else torch.zeros(0, dtype=torch.long)
"""
REF_COUNT_OF_A_FREE_BLOCK_RAISES = """\
        count = self._ref_counts[self._checked_id(block_id)]
        if count == 0:
            raise ValueError(f"block {block_id} is free")
        return count
"""
COPY_ON_WRITE_STEPS = """\
        (private_block,) = self.allocator.allocate(1)
        self.physical_kv_cache[private_block] = self.physical_kv_cache[shared_block]
        self.allocator.free([shared_block])
"""
FORK_SHARES = """\
        for block_id in parent.block_table:
            self.allocator.incref(block_id)
        child.block_table = list(parent.block_table)
"""
FORK_COPIES = """\
        child.block_table = self.allocator.allocate(len(parent.block_table))
        for mine, theirs in zip(child.block_table, parent.block_table):
            self.physical_kv_cache[mine] = self.physical_kv_cache[theirs]
"""
PREFIX_FREE_LOOKUP = """\
        request = self._request(request_id)
        del self._requests[request_id]
"""
PREFIX_FREE_OF_AN_UNKNOWN_ID_IGNORED = """\
        request = self._requests.pop(request_id, None)
        if request is None:
            return
"""

# fmt: off
MUTANTS = [
    # Part 1: the allocator's rules.
    Mutant("negative_pool_accepted", "allocator", allocator(
        (NEGATIVE_POOL, "        num_blocks = max(num_blocks, 0)\n"))),
    Mutant("allocate_negative_returns_empty", "allocator", allocator(
        ('raise ValueError(f"cannot allocate a negative number of blocks ({n})")', "return []"))),
    Mutant("allocate_past_free_count_gives_a_partial_list", "allocator", allocator(
        (OOM_CHECK, "        n = min(n, len(self._free))\n"))),
    Mutant("allocate_returns_a_duplicate", "allocator", replayed=True, edits=allocator(
        (POP_ITEMS, f"{POP_ITEMS}{TAKE_THE_FIRST_TWICE}"))),
    Mutant("allocate_returns_an_id_already_held", "allocator", allocator(
        (POP_ITEMS, f"{POP_ITEMS}{KEEP_THE_FIRST_FREE}"))),
    Mutant("free_accepts_a_double_free_within_one_call", "allocator", allocator(
        ("if count > self._ref_counts[block_id]:", "if self._ref_counts[block_id] == 0:"))),
    # Its ids read twice (checked in one pass, freed in another): a one-shot iterator frees none.
    Mutant("free_reads_its_ids_twice", "allocator", allocator(
        ("        drops = Counter(self._checked_id(block_id) for block_id in block_ids)\n",
         "        for block_id in block_ids:\n            self._checked_id(block_id)\n"
         "        drops = Counter(block_ids)\n"))),
    Mutant("free_accepts_a_never_allocated_id", "allocator", allocator(
        ("if count > self._ref_counts[block_id]:",
         "if self._ref_counts[block_id] and count > self._ref_counts[block_id]:"))),
    # Only the random allocate/free sequences reach a negative id while the last block is held.
    Mutant("free_accepts_a_negative_id_which_wraps", "allocator", edits=allocator(
        ("if not 0 <= block_id < self.num_blocks:", "if block_id >= self.num_blocks:"))),
    Mutant("free_frees_the_valid_ids_before_raising", "allocator", allocator(
        (FREE_CHECKS, FREE_ONE_BY_ONE))),
    # allocate(0) on an empty pool taken for running out.
    Mutant("allocate_zero_on_an_empty_pool_raises", "allocator", allocator(
        ("if n > len(self._free):", "if n > len(self._free) or not self._free:"))),
    # Block 0 never put in the free list: a pool one block short.
    Mutant("pool_without_block_0", "allocator", allocator(
        ("range(num_blocks - 1, -1, -1)", "range(num_blocks - 1, 0, -1)"))),
    # Ids 1 .. num_blocks: a pool of the right size, one id past its range (which free, incref
    # and ref_count accept).
    Mutant("pool_ids_run_to_num_blocks", "allocator", allocator(
        ("self._ref_counts = [0] * num_blocks", "self._ref_counts = [0] * (num_blocks + 1)"),
        ("range(num_blocks - 1, -1, -1)", "range(num_blocks, 0, -1)"),
        ("if not 0 <= block_id < self.num_blocks:", "if not 0 <= block_id <= self.num_blocks:"))),
    Mutant("num_blocks_kept_as_capacity", "allocator", allocator(
        ("self.num_blocks = num_blocks", "self.capacity = num_blocks"),
        ("if not 0 <= block_id < self.num_blocks:", "if not 0 <= block_id < self.capacity:"),
        ("out of range 0..{self.num_blocks - 1}", "out of range 0..{self.capacity - 1}"))),
    # num_free a counter that allocate lowers and free never raises.
    Mutant("num_free_not_counted_back_by_free", "allocator", allocator(
        (NUM_FREE_PROPERTY, ""),
        ("        self._free: dict[int, None] =",
         "        self.num_free = num_blocks\n        self._free: dict[int, None] ="),
        ("            self._ref_counts[block_id] = 1\n        return block_ids\n",
         "            self._ref_counts[block_id] = 1\n        self.num_free -= n\n"
         "        return block_ids\n"))),
    Mutant("free_list_with_pop0", "allocator", timing_only=True, replayed=True, edits=allocator(
        ("dict.fromkeys(range(num_blocks - 1, -1, -1))", "list(range(num_blocks))"),
        ("self._free.popitem()[0]", "self._free.pop(0)"),
        ("self._free[block_id] = None", "self._free.append(block_id)"))),
    # Next fit in Python: a few steps a block on a half free pool, thousands on a nearly full one.
    Mutant("allocate_scans_from_a_cursor", "allocator", timing_only=True, replayed=True,
           edits=allocator(
        ("        self.num_blocks = num_blocks\n",
         "        self.num_blocks = num_blocks\n        self._cursor = -1\n"),
        ("        block_ids = [self._free.popitem()[0] for _ in range(n)]\n",
         "        block_ids = []\n"
         "        while len(block_ids) < n:  # the next free block after the last one taken\n"
         "            self._cursor = (self._cursor + 1) % self.num_blocks\n"
         "            if self._cursor in self._free:\n"
         "                del self._free[self._cursor]\n"
         "                block_ids.append(self._cursor)\n"))),
    # A set of free ids: set.pop() scans a table that keeps its size as the set empties.
    Mutant("free_set_pops", "allocator", timing_only=True, edits=allocator(
        ("dict.fromkeys(range(num_blocks - 1, -1, -1))", "set(range(num_blocks))"),
        ("self._free.popitem()[0]", "self._free.pop()"),
        ("self._free[block_id] = None", "self._free.add(block_id)"))),
    # Part 2: prefill, decode and free.
    Mutant("request_negative_prompt_accepted", "decode", manager((NEGATIVE_PROMPT, ""))),
    Mutant("manager_block_size_zero_accepted", "decode", manager((BLOCK_SIZE_CHECK, ""))),
    Mutant("manager_negative_block_size_accepted", "decode", manager(
        ("if block_size < 1:", "if block_size == 0:"))),
    Mutant("manager_pool_made_before_its_allocator", "decode", manager(  # torch's RuntimeError
        (POOL_AFTER_ALLOCATOR, POOL_BEFORE_ALLOCATOR))),
    Mutant("manager_head_dim_kept_as_dim", "decode", manager(
        ("self.head_dim = head_dim", "self.dim = head_dim"),
        ("block_size, head_dim, dtype=", "block_size, self.dim, dtype="),
        (".view(-1, self.head_dim)", ".view(-1, self.dim)"))),
    # The stub's pool made float64: parts 3 and 6 read its rows by part 2's rule.
    Mutant("manager_pool_float64", "decode", manager(
        ("head_dim, dtype=torch.float32)", "head_dim, dtype=torch.float64)"))),
    # free_blocks a list made once, never updated: parts 3 and 6 count by part 2's rule.
    Mutant("manager_free_blocks_a_stale_list", "decode", manager(
        (FREE_BLOCKS_VIEW, ""),
        ("        self.physical_kv_cache = torch.zeros(",
         "        self.free_blocks = list(range(num_blocks))\n"
         "        self.physical_kv_cache = torch.zeros("))),
    # The blocks of the request freed last kept aside and given to the next prefill, although
    # the allocator has them free: it hands them out again, and two requests hold one block.
    Mutant("prefill_reuses_the_last_freed_blocks", "decode", manager(
        ("        self.allocator.free(req.block_table)\n",
         "        self.allocator.free(req.block_table)\n"
         "        self._spare = list(req.block_table)\n"),
        ("        self.physical_kv_cache = torch.zeros(",
         "        self._spare = []\n        self.physical_kv_cache = torch.zeros("),
        (PREFILL, "needed = cdiv(req.seq_len, self.block_size)\n"
                  "        reused, self._spare = self._spare[:needed], self._spare[needed:]\n"
                  "        fresh = self.allocator.allocate(needed - len(reused))\n"
                  "        req.block_table.extend(reused + fresh)"))),
    Mutant("manager_free_leaks_the_last_block", "decode", manager(
        ("self.allocator.free(req.block_table)", "self.allocator.free(req.block_table[:-1])"))),
    Mutant("prefill_one_block_too_many", "decode", manager(
        (PREFILL_SIZE, "allocate(cdiv(req.seq_len, self.block_size) + 1)"))),
    Mutant("prefill_one_block_too_few", "decode", manager(
        (PREFILL_SIZE, "allocate(req.seq_len // self.block_size)"))),
    Mutant("prefill_on_a_non_empty_table_accepted", "decode", manager((PREFILL_CHECK, ""))),
    Mutant("prefill_keeps_the_blocks_it_got_before_an_oom", "decode", manager(
        (PREFILL, "for _ in range(cdiv(req.seq_len, self.block_size)):\n"
                  "            req.block_table.extend(self.allocator.allocate(1))"))),
    # A short pool taken for misuse: ValueError, not RuntimeError.
    Mutant("prefill_short_of_blocks_raises_valueerror", "decode", manager(
        (PREFILL, "needed = cdiv(req.seq_len, self.block_size)\n"
                  "        if needed > self.allocator.num_free:\n"
                  "            raise ValueError(f\"the prompt needs {needed} blocks\")\n"
                  "        req.block_table.extend(self.allocator.allocate(needed))"))),
    Mutant("decode_uses_the_tutorial_rule", "decode", replayed=True, edits=manager(
        ("if req.seq_len % self.block_size == 0:",
         "if (req.seq_len + 1) % self.block_size == 1:"))),
    # The block a token starts added one token late: at the next decode. Part 6's checks meet it
    # at every boundary they cross.
    Mutant("decode_adds_its_block_one_token_late", "decode", manager(
        ("if req.seq_len % self.block_size == 0:",
         "if req.seq_len and (req.seq_len - 1) % self.block_size == 0:"))),
    Mutant("decode_increments_before_an_oom", "decode", manager(
        (DECODE_RULE, DECODE_RULE_AFTER_INCREMENT),
        ("self._copy_on_write(req.block_table[-1])\n        req.seq_len += 1\n",
         "self._copy_on_write(req.block_table[-1])\n"))),
    Mutant("free_does_not_clear_the_table", "decode", manager(
        ("        req.block_table.clear()\n", ""))),
    # Part 3: the gather and the slot mapping.
    Mutant("gather_in_block_id_order", "gather", manager(
        ("index_select(0, blocks)", "index_select(0, blocks.sort().values)"))),
    Mutant("gather_does_not_slice", "gather", replayed=True, edits=manager(
        ("        return rows[: req.seq_len]\n", "        return rows\n"))),
    Mutant("slot_mapping_without_block_size", "gather", manager(
        ("blocks[:, None] * self.block_size + torch.arange", "blocks[:, None] + torch.arange"))),
    Mutant("slot_mapping_int32", "gather", manager(
        ("return slots.flatten()[: req.seq_len]", "return slots.flatten()[: req.seq_len].int()"))),
    Mutant("gather_loops_over_tokens", "gather", timing_only=True, edits=manager(
        (GATHER, GATHER_PER_TOKEN))),
    Mutant("slot_mapping_loops_over_blocks", "gather", timing_only=True, edits=manager(
        (SLOT_MAPPING, SLOT_MAPPING_PER_BLOCK))),
    # Part 6: reference counts, fork and copy-on-write.
    Mutant("incref_of_a_free_block_accepted", "sharing", allocator((INCREF_CHECK, ""))),
    # incref's id not checked: -1 adds a reference to the last block, num_blocks raises
    # IndexError.
    Mutant("incref_wraps_negative_ids", "sharing", allocator(
        (f"        block_id = self._checked_id(block_id)\n{INCREF_CHECK}",
         f"        block_id = index(block_id)\n{INCREF_CHECK}"))),
    Mutant("ref_count_off_by_one_after_incref", "sharing", replayed=True, edits=allocator(
        ("self._ref_counts[block_id] += 1", "self._ref_counts[block_id] += 2"))),
    Mutant("free_ignores_other_references", "sharing", allocator(
        ("self._ref_counts[block_id] -= count", "self._ref_counts[block_id] = 0"))),
    Mutant("ref_count_of_a_free_block_raises", "sharing", allocator(
        (CHECKED_REF_COUNT, REF_COUNT_OF_A_FREE_BLOCK_RAISES))),
    Mutant("fork_without_incref", "sharing", manager((FORK_INCREF, ""))),
    Mutant("fork_copies_the_blocks", "sharing", manager((FORK_SHARES, FORK_COPIES))),
    Mutant("copy_on_write_missing", "sharing", manager((COPY_ON_WRITE, ""))),
    Mutant("copy_on_write_copies_nothing", "sharing", replayed=True, edits=manager(
        (COPY_ROWS, ""))),
    Mutant("copy_on_write_keeps_the_old_reference", "sharing", manager(
        ("        self.allocator.free([shared_block])\n", ""))),
    # The old block's reference dropped before the new block is had: a failed copy changed it.
    Mutant("copy_on_write_drops_the_old_reference_first", "sharing", manager(
        (COPY_ON_WRITE_STEPS, "        self.allocator.free([shared_block])\n"
                              + COPY_ON_WRITE_STEPS.replace(
                                  "        self.allocator.free([shared_block])\n", "")))),
    # The token counted before its block is copied: a copy-on-write refused for want of a block
    # leaves seq_len one too high. Part 2's refused decodes, which copy nothing, are right.
    Mutant("copy_on_write_counts_its_token_first", "sharing", manager(
        ("            req.block_table[-1] = self._copy_on_write(req.block_table[-1])\n",
         "            req.seq_len += 1\n"
         "            req.block_table[-1] = self._copy_on_write(req.block_table[-1])\n"
         "            req.seq_len -= 1\n"))),
    # Part 7: automatic prefix caching.
    # Its OutOfBlocks taken from the allocator's file, which part 7's worker does not hold.
    Mutant("prefix_imports_another_file", "caching", prefix_cache(
        ("from operator import index\n",
         "from operator import index\n\nfrom .block_allocator import OutOfBlocks as _\n"))),
    Mutant("prefix_negative_block_size_accepted", "caching", prefix_cache(
        ("if block_size < 1:", "if block_size == 0:"))),
    Mutant("prefix_key_without_the_chain", "caching", replayed=True, edits=prefix_cache(
        (CHAINED_HASH, "self.hash = hash(tokens)"),
        (CHAINED_EQUALITY, "            return True\n"))),
    # Keys equal when their hashes are: tokens -2 serve the blocks of tokens -1.
    Mutant("prefix_hit_trusts_the_hash", "caching", prefix_cache(
        ("            if mine.tokens != theirs.tokens:\n                return False\n", ""))),
    Mutant("prefix_last_prompt_token_cached", "caching", prefix_cache(
        ("start + size < len(tokens)", "start + size <= len(tokens)"))),
    Mutant("prefix_partial_blocks_cached", "caching", prefix_cache(
        ("range(0, len(tokens) - len(tokens) % size, size)", "range(0, len(tokens), size)"))),
    Mutant("prefix_hit_stays_evictable", "caching", prefix_cache(
        ("        if self._holders[block] == 0:\n            del self._idle[block]\n", ""))),
    # Which keys to add decided before its blocks are taken: a key this call evicts is lost.
    Mutant("prefix_evicted_key_not_added_again", "caching", prefix_cache(
        ("        table = hits + [self._take() for _ in range(needed)]\n"
         "        for block, key in zip(table[len(hits) :], keys[len(hits) :], strict=False):\n"
         "            self._add(block, key)\n",
         "        fresh = [key not in self._cache for key in keys[len(hits) :]]\n"
         "        table = hits + [self._take() for _ in range(needed)]\n"
         "        for block, key, new in zip(table[len(hits) :], keys[len(hits) :], fresh):\n"
         "            if new:\n"
         "                self._add(block, key)\n"))),
    Mutant("prefix_evicts_the_most_recently_idle", "caching", replayed=True, edits=prefix_cache(
        ("self._idle.popitem(last=False)", "self._idle.popitem()"))),
    Mutant("prefix_live_id_allocated_again", "caching", prefix_cache(
        ("        if request_id in self._requests:\n"
         "            raise ValueError(f\"request {request_id} already has blocks\")\n", ""))),
    Mutant("prefix_empty_prompt_accepted", "caching", prefix_cache(
        ("        if not tokens:\n"
         "            raise ValueError(\"a prompt needs at least one token\")\n", ""))),
    Mutant("prefix_free_of_an_unknown_id_ignored", "caching", prefix_cache(
        (PREFIX_FREE_LOOKUP, PREFIX_FREE_OF_AN_UNKNOWN_ID_IGNORED))),
    Mutant("prefix_append_token_of_an_unknown_id_ignored", "caching", prefix_cache(
        ("        request = self._request(request_id)\n        token_id = index(token_id)\n",
         "        request = self._requests.get(request_id)\n        if request is None:\n"
         "            return\n        token_id = index(token_id)\n"))),
    Mutant("prefix_block_table_of_an_unknown_id_is_empty", "caching", prefix_cache(
        ("return list(self._request(request_id).table)",
         "return list(self._requests[request_id].table) if request_id in self._requests else []"))),
    Mutant("prefix_freed_id_stays_known", "caching", prefix_cache(
        ("        del self._requests[request_id]\n", ""))),
    Mutant("prefix_pool_one_block_short", "caching", prefix_cache(
        ("list(range(num_blocks - 1, -1, -1))", "list(range(num_blocks - 2, -1, -1))"))),
    Mutant("prefix_takes_in_reverse_order", "caching", prefix_cache(
        ("table = hits + [self._take() for _ in range(needed)]",
         "table = hits + [self._take() for _ in range(needed)][::-1]"))),
    # A decoded token's block taken by eviction while an empty block is free.
    Mutant("prefix_append_token_evicts_first", "caching", prefix_cache(
        ("            request.table.append(self._take())\n",
         "            if self._idle:\n"
         "                block, _ = self._idle.popitem(last=False)\n"
         "                del self._cache[self._keys[block]]\n"
         "                self._keys[block] = None\n"
         "                self._empty.append(block)\n"
         "            request.table.append(self._take())\n"))),
    # A key cached again by the block that filled last: two blocks hold it.
    Mutant("prefix_key_cached_twice", "caching", prefix_cache(
        ("        if key not in self._cache:\n"
         "            self._cache[key] = block\n            self._keys[block] = key\n",
         "        self._cache[key] = block\n        self._keys[block] = key\n"))),
    Mutant("prefix_ref_count_counts_the_cache", "caching", prefix_cache(
        ("        return self._holders[block_id]\n",
         "        return self._holders[block_id] + (self._keys[block_id] is not None)\n"))),
    # The partly filled last block left out of the table.
    Mutant("prefix_block_table_of_full_blocks_only", "caching", prefix_cache(
        ("return list(self._request(request_id).table)",
         "request = self._request(request_id)\n"
         "        return request.table[: request.num_tokens // self.block_size]"))),
    Mutant("prefix_ref_count_wraps_negative_ids", "caching", prefix_cache(
        ("        if not 0 <= block_id < self.num_blocks:\n",
         "        if block_id >= self.num_blocks:\n"))),
    Mutant("prefix_decoded_block_not_cached", "caching", prefix_cache(
        ("            self._add(request.table[-1], request.last_key)\n", ""))),
    Mutant("prefix_evicts_while_an_empty_block_is_free", "caching", prefix_cache(
        ("        if self._empty:\n            block = self._empty.pop()\n",
         "        if self._empty and not self._idle:\n            block = self._empty.pop()\n"))),
    Mutant("prefix_num_free_counts_only_the_empty", "caching", prefix_cache(
        ("return len(self._empty) + len(self._idle)", "return len(self._empty)"))),
    Mutant("prefix_frees_head_first", "caching", prefix_cache(
        ("for block in reversed(request.table):", "for block in request.table:"))),
    Mutant("prefix_oom_evicts_before_failing", "caching", prefix_cache(
        (PROMPT_OOM, EVICT_ALL_IDLE))),
    Mutant("prefix_eviction_scans_the_cache", "caching", timing_only=True, replayed=True,
           edits=prefix_cache(
        ("block, _ = self._idle.popitem(last=False)",
         "block = list(self._idle)[0]\n            del self._idle[block]"))),
    # Lowest empty id first, by a min over a set of them: O(empty blocks) a take.
    Mutant("prefix_lowest_empty_block_by_min", "caching", timing_only=True, edits=prefix_cache(
        ("self._empty = list(range(num_blocks - 1, -1, -1))",
         "self._empty = set(range(num_blocks))"),
        ("            block = self._empty.pop()\n",
         "            block = min(self._empty)\n            self._empty.remove(block)\n"),
        ("self._empty.append(block)", "self._empty.add(block)"))),
    # Every decoded token counts the blocks with no holder: O(num_blocks) a token.
    Mutant("prefix_append_token_counts_the_free_blocks", "caching", timing_only=True,
           replayed=True, edits=prefix_cache(
        ("        token_id = index(token_id)\n"
         "        if request.num_tokens % self.block_size == 0:\n"
         "            if not self.num_free:\n",
         "        token_id = index(token_id)\n        free = self._holders.count(0)\n"
         "        if request.num_tokens % self.block_size == 0:\n            if not free:\n"))),
]
# fmt: on
MUTANTS_BY_ID = {mutant.id: mutant for mutant in MUTANTS}
# Mutants whose part's every failure breaks one rule (`rules.py`), by the rule.
CAUSES = {
    "decode_adds_its_block_one_token_late": DECODE_BLOCK,
    "prefix_evicts_the_most_recently_idle": EVICTION_ORDER,
}


def timing_check_ids(part: str) -> set[str]:
    return {f"{part}/{name}" for name in check_names(f"{part}_timing")}


@pytest.fixture(scope="module")
def graded(
    request: pytest.FixtureRequest, tmp_path_factory, shared_gradings: Path
) -> dict[str, Future[Graded]]:
    """Every selected mutant (all of them for the cascade test) graded on every CPU part it
    reaches, two at a time (keyed by id; test_counterexamples.py reads some of the same
    gradings), each mutant of the time budget test graded on its part with a tight budget
    (keyed by id + "-cut"), and each of the shrinking test graded again without shrinking
    (keyed by id + "-unshrunk")."""
    root: Path = tmp_path_factory.mktemp("mutants")

    def job(mutant: Mutant):
        return lambda: grade_shared(shared_gradings, mutant.id, mutant.options, edits=mutant.edits)

    def cut_short(mutant: Mutant):
        folder = build_submission(root / f"{mutant.id}-cut", edits=mutant.edits)
        return lambda: grade(folder, "--parts", mutant.part, "--part-timeout", "2")

    unshrunk = selected(request, "unshrunk")
    cascade_test = any(item.originalname == test_bugs_stay_in_their_part.__name__
                       for item in module_items(request))  # fmt: skip
    mutants = MUTANTS if cascade_test else selected(request, "mutant") + unshrunk
    jobs = {m.id: job(m) for m in mutants}
    jobs |= {f"{m.id}-cut": cut_short(m) for m in selected(request, "shrinking")}
    jobs |= {
        f"{m.id}-unshrunk": lambda m=m: grade_shared(
            shared_gradings, m.id, (*m.options, *VERDICTS_ONLY), edits=m.edits
        )
        for m in unshrunk
    }
    return concurrently(jobs)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.id for mutant in MUTANTS])
def test_mutant_loses_points_in_its_part(mutant: Mutant, graded: dict[str, Future[Graded]]):
    result = graded[mutant.id].result()
    part = mutant.part
    result.assert_clean()
    assert result.max_score(part) > 0, f"part {part} has no checks: nothing can catch it"
    caught = result.caught(part)
    assert caught, f"no check of part {part} catches {mutant.id}\n{result.describe(part)}"
    assert result.score(part) < result.max_score(part), result.describe(part)
    missed = rules_missed(COVERAGE, mutant.id, caught)
    assert not missed, f"rules of docs/coverage.toml whose checks miss {mutant.id}: {missed}"
    told = [check["id"] for graded in result.report["parts"].values()
            for check in graded["checks"] if NOT_AS_ASKED in check["message"]]  # fmt: skip
    assert not told, f"{mutant.id}'s own results, told its timed work was not done as asked: {told}"
    if mutant.timing_only:
        beyond_timing = set(result.not_passed(part)) - timing_check_ids(part)
        assert not beyond_timing, (
            f"{mutant.id} is correct, only slow, but lost points in {sorted(beyond_timing)}\n"
            f"{result.describe(part)}"
        )


@pytest.mark.parametrize(
    "shrinking", [MUTANTS_BY_ID["free_ignores_other_references"]], ids=lambda mutant: mutant.id
)
def test_a_search_cut_short_by_the_time_budget_fails_as_timed_out(
    shrinking: Mutant, graded: dict[str, Future[Graded]]
) -> None:
    """A check cut short by the part's time budget fails with "timed out", like every later
    check of the part: not as a grader error, nor as an import failure. Where the budget cuts
    depends on the machine's speed (2 s: on an idle 2-core machine, the part's first random
    search, still shrinking its failure; on a slower one, an earlier check, or the worker's
    start); the verdict must not."""
    result = graded[f"{shrinking.id}-cut"].result()
    checks = result.part(shrinking.part)["checks"]
    cut = [check for check in checks if CUT_SHORT in check["message"] + check["traceback"]]
    assert cut, f"the time budget cut nothing short\n{result.describe(shrinking.part)}"
    wrong = [check["id"] for check in cut if not check["message"].startswith("timed out")]
    assert not wrong, f"checks cut short that say otherwise\n{result.describe(shrinking.part)}"


@pytest.mark.parametrize(
    "unshrunk", [MUTANTS_BY_ID["allocate_returns_a_duplicate"]], ids=lambda mutant: mutant.id
)
def test_shrinking_changes_no_verdict(unshrunk: Mutant, graded: dict[str, Future[Graded]]) -> None:
    """`--shrinks 0` gives every check the status and points that the profile's shrinking gives
    (timings aside, which vary from run to run): only the counterexamples differ."""
    assert unshrunk.replayed, f"{unshrunk.id} is graded without shrinking already"
    gradings = [graded[unshrunk.id].result(), graded[f"{unshrunk.id}-unshrunk"].result()]
    shrinks = [grading.report["environment"]["shrinks"] for grading in gradings]
    assert shrinks == [PROFILES["quick"].shrinks, 0]
    shrunk, not_shrunk = (
        [
            check
            for part in grading.report["parts"].values()
            for check in part["checks"]
            if check["severity"] != "speed"
        ]
        for grading in gradings
    )

    def verdicts(checks: list[dict]) -> list[tuple[str, str, float]]:
        return [(check["id"], check["status"], check["points"]) for check in checks]

    assert verdicts(not_shrunk) == verdicts(shrunk)
    assert "failed" in {check["status"] for check in shrunk}
    counterexamples = [
        [check["counterexample"] for check in checks] for checks in (shrunk, not_shrunk)
    ]
    assert counterexamples[0] != counterexamples[1], (
        "was --shrinks 0 ignored? no counterexample differs"
    )


@pytest.mark.parametrize("mutant", [MUTANTS_BY_ID[m] for m in CAUSES], ids=list(CAUSES))
def test_one_bug_is_one_diagnosis_and_one_question(
    mutant: Mutant, graded: dict[str, Future[Graded]]
) -> None:
    """Every failure of the mutant's part breaks one rule: the diagnosis is that rule, said
    once, and the interviewer asks about it once, with its check's question."""
    report = graded[mutant.id].result().report
    cause = CAUSES[mutant.id]
    assert diagnosis(report, "en") == [said({"cause": cause, "severity": HARMS[cause]}, "en")]
    texts = debriefs()
    asked = [q["ask"] for part in debrief(report, "en") for q in part["questions"] if q["check"]]
    assert asked == [texts["checks"][texts["causes"][cause]]["en"]["ask"]]


@pytest.mark.parametrize(
    "mutant", [MUTANTS_BY_ID["prefix_evicts_the_most_recently_idle"]], ids=lambda mutant: mutant.id
)
def test_an_order_slip_costs_its_checks_once_as_contract_and_no_timing(
    mutant: Mutant, graded: dict[str, Future[Graded]]
) -> None:
    """An eviction that takes the block idle shortest corrupts nothing: its failures are
    contract, and its timings, whose results are its code's own, are not timed, not charged."""
    checks = graded[mutant.id].result().part(mutant.part)["checks"]
    failed = [check for check in checks if check["status"] == "failed"]
    assert failed
    assert {check["severity"] for check in failed} == {"contract"}, failed
    timings = [check for check in checks if check["severity"] == "speed"]
    assert timings
    assert all(check["message"].startswith("not timed") for check in timings)
    assert {check["status"] for check in timings} == {"skipped"}


def test_bugs_stay_in_their_part(graded: dict[str, Future[Graded]]) -> None:
    """For every mutant, the points lost outside its own part are at most `CASCADE_LIMIT` of
    those lost in it: the parts table sends a reviewer to the right part."""
    rows = []
    for mutant in MUTANTS:
        result = graded[mutant.id].result()
        result.assert_clean()
        rows.append(losses(mutant.id, mutant.part, result.report))
    beyond = [row.mutant for row in rows if row.cascade > CASCADE_LIMIT]
    assert not beyond, f"mutants that cost other parts too much: {beyond}\n{table(rows)}"
