"""Part 3: the block gather and the slot mapping, bit-exact against the grader's copy of the pool.

The checks write random data (from a generator seeded by the example, so that a counterexample
reruns the same) into a request's blocks, tails included, and read it back through
`get_physical_cache` and `slot_mapping`. The timing of both is checked elsewhere.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, run_state_machine_as_test

from grader.checks.manager_model import (
    ManagerMachine,
    ManagerModel,
    Tracked,
    assert_rows,
    assert_slots,
    cdiv,
)

pytestmark = pytest.mark.part("gather")

SCATTERED = {
    "block_size": st.integers(1, 4),
    "head_dim": st.integers(1, 4),
    "others": st.lists(st.integers(0, 8), max_size=4),
    "prompt_len": st.integers(0, 12),
    "seed": st.integers(0, 2**32 - 1),
}


def scattered_request(
    submission, block_size: int, head_dim: int, others: list[int], prompt_len: int
) -> tuple[ManagerModel, Tracked]:
    """A request prefilled after other requests came and every other one went, so that its
    blocks are seldom 0, 1, 2, ...; the pool holds exactly what all of them need."""
    num_blocks = sum(cdiv(n, block_size) for n in [*others, prompt_len])
    model = ManagerModel(submission, num_blocks, block_size, head_dim)
    fillers = [model.prefill(n) for n in others]
    for filler in fillers[::2]:
        model.free(filler)
    return model, model.prefill(prompt_len)


def fill_random(model: ManagerModel, tracked: Tracked, seed: int) -> torch.Tensor:
    """Random rows in every block of `tracked`, tails included; returns the pool they make."""
    generator = torch.Generator().manual_seed(seed)
    shape = (model.num_blocks, model.block_size, model.head_dim)
    pool = torch.zeros(shape)
    remote_pool = model.manager.ref("physical_kv_cache")
    for block in tracked.table:
        pool[block] = torch.randn(shape[1:], generator=generator)
        remote_pool[block] = pool[block]
    return pool


def assert_gathers(model: ManagerModel, tracked: Tracked, pool: torch.Tensor) -> None:
    """get_physical_cache(req) is the first seq_len rows of its blocks, in table order."""
    blocks = torch.tensor(tracked.table, dtype=torch.int64)
    expected = pool[blocks].view(-1, model.head_dim)[: tracked.seq_len]
    got = model.manager.get_physical_cache(tracked.req)
    what = f"manager.get_physical_cache({tracked.name})"
    assert_rows(got, expected, what, tracked.table, model.block_size)


@pytest.mark.points(2)
def check_gather_stops_at_seq_len(submission):
    """The rows past seq_len in the last block are not returned; each decoded token adds one."""
    model = ManagerModel(submission, 3, 4, 2)
    tracked = model.prefill(5)
    pool = fill_random(model, tracked, seed=0)
    for _ in range(3):  # seq_len 5, 6, 7, then 8: the last block fills up
        assert_gathers(model, tracked, pool)
        model.decode(tracked)
    assert_gathers(model, tracked, pool)


@pytest.mark.points(1)
def check_gather_of_an_empty_request(submission):
    """A request of seq_len 0 gathers a [0, head_dim] tensor and maps to a [0] slot mapping."""
    model = ManagerModel(submission, 2, 4, 3)
    tracked = model.prefill(0)
    assert_gathers(model, tracked, torch.zeros(2, 4, 3))
    got = model.manager.slot_mapping(tracked.req)
    assert_slots(got, [], 0, 4, f"manager.slot_mapping({tracked.name})")


@pytest.mark.points(2)
def check_gather_follows_a_scattered_block_table(submission):
    """A block table out of order: the gather and the slot mapping follow the table, not the
    order of the block ids."""
    model = ManagerModel(submission, 3, 2, 2)
    first, second = model.prefill(2), model.prefill(2)
    model.decode(first)  # token 2 takes the last free block
    model.decode(first)
    model.free(second)
    model.decode(first)  # token 4 takes second's block: first's table is [a, c, b]
    assert_gathers(model, first, fill_random(model, first, seed=1))
    got = model.manager.slot_mapping(first.req)
    assert_slots(got, first.table, first.seq_len, 2, f"manager.slot_mapping({first.name})")


@pytest.mark.points(3)
@given(**SCATTERED)
def check_gather_is_bit_exact(submission, block_size, head_dim, others, prompt_len, seed):
    """get_physical_cache returns float32 [seq_len, head_dim]: token i's row from block
    block_table[i // block_size] at offset i % block_size, bit for bit."""
    submission.transcript.reset()
    model, tracked = scattered_request(submission, block_size, head_dim, others, prompt_len)
    assert_gathers(model, tracked, fill_random(model, tracked, seed))


@pytest.mark.points(2)
@given(**SCATTERED)
def check_slot_mapping_follows_the_block_table(
    submission, block_size, head_dim, others, prompt_len, seed
):
    """slot_mapping(req) is int64 [seq_len], token i's slot block_table[i // block_size] *
    block_size + i % block_size, and physical_kv_cache.view(-1, head_dim)[slots] is the gather."""
    submission.transcript.reset()
    model, tracked = scattered_request(submission, block_size, head_dim, others, prompt_len)
    fill_random(model, tracked, seed)
    slots = model.manager.slot_mapping(tracked.req)
    what = f"manager.slot_mapping({tracked.name})"
    assert_slots(slots, tracked.table, tracked.seq_len, block_size, what)
    pool = model.manager.physical_kv_cache.view(-1, head_dim)
    gathered = model.manager.get_physical_cache(tracked.req)
    pooled = f"physical_kv_cache.view(-1, head_dim)[{what}]"
    what = f"manager.get_physical_cache({tracked.name}) against {pooled}"
    assert_rows(gathered, pool[slots], what, tracked.table, block_size)


class GatherMachine(ManagerMachine):
    """Prefill, decode and free with a fresh value written at each new token's slot: every live
    request must gather exactly its own tokens, and its slot mapping follow its table."""

    @initialize(
        num_blocks=st.integers(0, 24), block_size=st.integers(1, 4), head_dim=st.integers(1, 4)
    )
    def new_manager(self, num_blocks, block_size, head_dim):
        self.model = ManagerModel(self.submission, num_blocks, block_size, head_dim, writes=True)

    @invariant()
    def reads_back_what_was_written(self):
        self.model.check_tables()
        self.model.check_rows(slots=True)


@pytest.mark.points(6)
def check_random_writes_read_back(submission):
    run_state_machine_as_test(lambda: GatherMachine(submission))
