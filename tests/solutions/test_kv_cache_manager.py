"""The answer key's parts 2, 3 and 6, case by case: the tutorial's scenario, block size 1,
out-of-blocks atomicity, misuse, and fork / copy-on-write."""

import itertools

import pytest
import torch

from kernels.reference import gather_reference
from solutions.kv_cache_manager import KVCacheManager, Request
from tests.solutions.checks import assert_refused

HEAD_DIM = 8


def write_token(manager: KVCacheManager, req: Request, position: int, value: float) -> None:
    """Write `value` into every lane of one token's cache row, as a model's forward pass would."""
    slot = manager.slot_mapping(req)[position]
    manager.physical_kv_cache.view(-1, manager.head_dim)[slot] = value


def new_request(manager: KVCacheManager, request_id: int, prompt_len: int) -> Request:
    req = Request(request_id, prompt_len)
    manager.allocate_for_prefill(req)
    return req


def test_tutorial_scenario() -> None:
    """10 blocks of 4 tokens; a prompt of 6 takes 2 blocks; decoding to 9 tokens takes a 3rd;
    the 999.0 written at the last token's slot reads back through the gather."""
    manager = KVCacheManager(num_blocks=10, block_size=4, head_dim=HEAD_DIM)
    req = new_request(manager, 0, 6)
    assert len(req.block_table) == 2
    assert len(manager.free_blocks) == 8

    for expected_blocks in (2, 2, 3):  # tokens 7 and 8 fit in block 2; token 9 opens block 3
        manager.allocate_for_decode(req)
        assert len(req.block_table) == expected_blocks
    assert req.seq_len == 9
    assert len(manager.free_blocks) == 7

    write_token(manager, req, 8, 999.0)
    cache = manager.get_physical_cache(req)
    assert cache.shape == (9, HEAD_DIM)
    assert torch.equal(cache[8], torch.full((HEAD_DIM,), 999.0))
    assert torch.equal(cache[:8], torch.zeros(8, HEAD_DIM))

    manager.free(req)
    assert req.block_table == []
    assert len(manager.free_blocks) == 10


def test_block_size_one_takes_a_block_per_token() -> None:
    manager = KVCacheManager(num_blocks=5, block_size=1, head_dim=HEAD_DIM)
    req = new_request(manager, 0, 2)
    assert len(req.block_table) == 2
    for seq_len in (3, 4, 5):
        manager.allocate_for_decode(req)
        assert (req.seq_len, len(req.block_table)) == (seq_len, seq_len)
    with pytest.raises(RuntimeError):
        manager.allocate_for_decode(req)
    assert (req.seq_len, len(req.block_table)) == (5, 5)


def test_empty_prompt_takes_no_block_until_its_first_token() -> None:
    manager = KVCacheManager(num_blocks=2, block_size=4, head_dim=HEAD_DIM)
    req = new_request(manager, 0, 0)
    assert req.block_table == []
    assert manager.get_physical_cache(req).shape == (0, HEAD_DIM)
    assert manager.slot_mapping(req).shape == (0,)
    manager.allocate_for_decode(req)
    assert (req.seq_len, len(req.block_table)) == (1, 1)


@pytest.mark.parametrize(
    ("num_blocks", "block_size", "head_dim"), [(-1, 4, 8), (4, 0, 8), (4, 4, 0)]
)
def test_bad_sizes_are_refused(num_blocks: int, block_size: int, head_dim: int) -> None:
    with pytest.raises(ValueError):
        KVCacheManager(num_blocks, block_size, head_dim)


def test_negative_prompt_is_refused() -> None:
    with pytest.raises(ValueError):
        Request(0, -1)


def test_prefill_out_of_blocks_changes_nothing() -> None:
    manager = KVCacheManager(num_blocks=3, block_size=4, head_dim=HEAD_DIM)
    req = Request(0, 13)  # needs 4 blocks
    assert_refused(RuntimeError, lambda: manager.allocate_for_prefill(req), manager, req)


def test_prefill_twice_is_refused() -> None:
    manager = KVCacheManager(num_blocks=4, block_size=4, head_dim=HEAD_DIM)
    req = new_request(manager, 0, 5)
    assert_refused(ValueError, lambda: manager.allocate_for_prefill(req), manager, req)


def test_decode_out_of_blocks_keeps_seq_len() -> None:
    manager = KVCacheManager(num_blocks=2, block_size=4, head_dim=HEAD_DIM)
    req = new_request(manager, 0, 8)  # both blocks full: the next token needs a third
    assert_refused(RuntimeError, lambda: manager.allocate_for_decode(req), manager, req)


def test_free_of_a_foreign_block_frees_nothing() -> None:
    manager = KVCacheManager(num_blocks=4, block_size=4, head_dim=HEAD_DIM)
    owner = new_request(manager, 0, 4)
    impostor = Request(1, 8)
    impostor.block_table = [owner.block_table[0], next(iter(manager.free_blocks))]
    assert_refused(ValueError, lambda: manager.free(impostor), manager, owner, impostor)


def test_fork_shares_every_block() -> None:
    manager = KVCacheManager(num_blocks=4, block_size=4, head_dim=HEAD_DIM)
    parent = new_request(manager, 0, 6)
    child = manager.fork(parent, 1)
    assert (child.request_id, child.seq_len, child.block_table) == (1, 6, parent.block_table)
    assert child.block_table is not parent.block_table
    assert len(manager.free_blocks) == 2


@pytest.mark.parametrize("writer", ["parent", "child"])
def test_copy_on_write_keeps_the_other_request_intact(writer: str) -> None:
    manager = KVCacheManager(num_blocks=4, block_size=4, head_dim=HEAD_DIM)
    parent = new_request(manager, 0, 6)
    for position in range(6):
        write_token(manager, parent, position, float(position + 1))
    child = manager.fork(parent, 1)
    requests = {"parent": parent, "child": child}
    other = requests["child" if writer == "parent" else "parent"]
    other_cache = manager.get_physical_cache(other)

    manager.allocate_for_decode(requests[writer])
    write_token(manager, requests[writer], 6, -7.0)

    assert torch.equal(manager.get_physical_cache(other), other_cache)
    written = manager.get_physical_cache(requests[writer])
    assert torch.equal(written[:6], other_cache)  # the copy carried the shared prefix over
    assert torch.equal(written[6], torch.full((HEAD_DIM,), -7.0))
    assert requests[writer].block_table[0] == other.block_table[0]  # full block: still shared
    assert requests[writer].block_table[1] != other.block_table[1]  # last block: copied
    assert len(manager.free_blocks) == 1


def test_no_copy_when_the_shared_last_block_is_full() -> None:
    manager = KVCacheManager(num_blocks=4, block_size=4, head_dim=HEAD_DIM)
    parent = new_request(manager, 0, 4)
    child = manager.fork(parent, 1)
    manager.allocate_for_decode(child)  # token 4 opens a new block: nothing to copy
    assert child.block_table[0] == parent.block_table[0]
    assert len(child.block_table) == 2
    assert len(manager.free_blocks) == 2


def test_copy_on_write_out_of_blocks_changes_nothing() -> None:
    manager = KVCacheManager(num_blocks=2, block_size=4, head_dim=HEAD_DIM)
    parent = new_request(manager, 0, 6)  # takes both blocks, the last one half full
    child = manager.fork(parent, 1)
    assert_refused(RuntimeError, lambda: manager.allocate_for_decode(child), manager, parent, child)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_fork_then_free_in_any_order(order: tuple[int, ...]) -> None:
    """A parent, a child and a grandchild, each decoding once, freed in every order: blocks
    come back only with their last holder, and the survivors' caches never change."""
    manager = KVCacheManager(num_blocks=8, block_size=4, head_dim=HEAD_DIM)
    parent = new_request(manager, 0, 5)
    for position in range(5):
        write_token(manager, parent, position, float(position + 1))
    child = manager.fork(parent, 1)
    grandchild = manager.fork(child, 2)
    family = [parent, child, grandchild]
    for value, req in enumerate(family):
        manager.allocate_for_decode(req)
        write_token(manager, req, req.seq_len - 1, 100.0 + value)

    caches = [manager.get_physical_cache(r) for r in family]
    for step, index in enumerate(order):
        manager.free(family[index])
        alive = [i for i in range(3) if i not in order[: step + 1]]
        for i in alive:
            assert torch.equal(manager.get_physical_cache(family[i]), caches[i])
        held = {b for i in alive for b in family[i].block_table}
        assert len(manager.free_blocks) == manager.num_blocks - len(held)
    assert len(manager.free_blocks) == manager.num_blocks


def test_gather_and_slot_mapping_read_through_the_block_table() -> None:
    """A scattered block table over a pool of random data: the gather is bit-exact, stops at
    seq_len, and agrees with the slot mapping."""
    generator = torch.Generator().manual_seed(0)
    manager = KVCacheManager(num_blocks=16, block_size=4, head_dim=HEAD_DIM)
    manager.physical_kv_cache.copy_(torch.randn(16, 4, HEAD_DIM, generator=generator))
    manager.allocate_for_prefill(Request(0, 9))  # so the next request's blocks are not 0, 1, ...
    req = new_request(manager, 1, 10)

    cache = manager.get_physical_cache(req)
    expected = gather_reference(manager.physical_kv_cache, req.block_table, req.seq_len)
    assert cache.dtype == torch.float32
    assert torch.equal(cache.double(), expected)
    slots = manager.slot_mapping(req)
    assert slots.dtype == torch.long
    assert torch.equal(manager.physical_kv_cache.view(-1, HEAD_DIM)[slots], cache)


def test_gather_is_a_copy() -> None:
    manager = KVCacheManager(num_blocks=2, block_size=4, head_dim=HEAD_DIM)
    req = new_request(manager, 0, 3)
    manager.get_physical_cache(req).fill_(5.0)
    assert torch.equal(manager.physical_kv_cache, torch.zeros(2, 4, HEAD_DIM))
