"""The answer key's part 1 allocator and part 6 reference counts, case by case.

The properties over random call sequences are in test_stateful.py; these are the named cases
a reader checks first.
"""

from collections.abc import Callable

import pytest

from solutions.block_allocator import BlockAllocator, OutOfBlocks


def snapshot(allocator: BlockAllocator) -> tuple[int, list[int]]:
    """Everything a caller can observe: the free count and every block's reference count."""
    return allocator.num_free, [allocator.ref_count(b) for b in range(allocator.num_blocks)]


def test_fresh_pool_hands_out_distinct_ids_in_range() -> None:
    allocator = BlockAllocator(8)
    assert (allocator.num_blocks, allocator.num_free) == (8, 8)
    first, rest = allocator.allocate(3), allocator.allocate(5)
    assert sorted(first + rest) == list(range(8))
    assert allocator.num_free == 0
    assert all(allocator.ref_count(b) == 1 for b in range(8))


def test_allocate_zero_gives_nothing() -> None:
    allocator = BlockAllocator(2)
    assert allocator.allocate(0) == []
    assert allocator.num_free == 2


def test_empty_pool() -> None:
    allocator = BlockAllocator(0)
    assert allocator.num_free == 0
    assert allocator.allocate(0) == []
    with pytest.raises(RuntimeError):
        allocator.allocate(1)


@pytest.mark.parametrize("num_blocks", [-1, -100])
def test_negative_pool_is_refused(num_blocks: int) -> None:
    with pytest.raises(ValueError):
        BlockAllocator(num_blocks)


def test_negative_allocation_is_refused_and_changes_nothing() -> None:
    allocator = BlockAllocator(4)
    before = snapshot(allocator)
    with pytest.raises(ValueError):
        allocator.allocate(-1)
    assert snapshot(allocator) == before


def test_out_of_blocks_is_all_or_nothing() -> None:
    allocator = BlockAllocator(4)
    allocator.allocate(1)
    before = snapshot(allocator)
    with pytest.raises(OutOfBlocks, match=r"^OOM"):
        allocator.allocate(4)
    assert snapshot(allocator) == before
    assert len(allocator.allocate(3)) == 3  # the three free blocks are still there
    assert issubclass(OutOfBlocks, RuntimeError)


def test_freed_blocks_are_reused() -> None:
    allocator = BlockAllocator(3)
    held = allocator.allocate(3)
    allocator.free(held)
    assert allocator.num_free == 3
    assert sorted(allocator.allocate(3)) == sorted(held)


def test_free_takes_any_iterable() -> None:
    allocator = BlockAllocator(4)
    held = allocator.allocate(4)
    allocator.free(b for b in held)
    assert allocator.num_free == 4


@pytest.mark.parametrize(
    ("bad_ids", "why"),
    [
        (lambda held, free_id: [held[0], held[0]], "freed twice in one call"),
        (lambda held, free_id: [held[0], free_id], "never allocated"),
        (lambda held, free_id: [-1], "negative id"),
        (lambda held, free_id: [4], "id == num_blocks"),
        (lambda held, free_id: [*held, 1_000_000], "out of range after good ids"),
        (lambda held, free_id: [held[0], "1"], "not an integer"),
    ],
)
def test_bad_free_raises_and_frees_nothing(
    bad_ids: Callable[[list[int], int], list], why: str
) -> None:
    allocator = BlockAllocator(4)
    held = allocator.allocate(2)
    free_id = next(b for b in range(4) if allocator.ref_count(b) == 0)
    before = snapshot(allocator)
    with pytest.raises(ValueError):
        allocator.free(bad_ids(held, free_id))
    assert snapshot(allocator) == before, why


def test_double_free_across_calls() -> None:
    allocator = BlockAllocator(2)
    (block,) = allocator.allocate(1)
    allocator.free([block])
    with pytest.raises(ValueError):
        allocator.free([block])
    assert allocator.num_free == 2


def test_shared_block_is_free_only_after_its_last_reference() -> None:
    allocator = BlockAllocator(2)
    (block,) = allocator.allocate(1)
    allocator.incref(block)
    allocator.incref(block)
    assert allocator.ref_count(block) == 3
    allocator.free([block, block])  # two references in one call
    assert (allocator.ref_count(block), allocator.num_free) == (1, 1)
    allocator.free([block])
    assert (allocator.ref_count(block), allocator.num_free) == (0, 2)


def test_free_more_references_than_held_frees_nothing() -> None:
    allocator = BlockAllocator(2)
    (block,) = allocator.allocate(1)
    allocator.incref(block)
    with pytest.raises(ValueError):
        allocator.free([block, block, block])
    assert allocator.ref_count(block) == 2


@pytest.mark.parametrize("block_id", [0, 5, -1])
def test_incref_of_a_free_or_foreign_block_is_refused(block_id: int) -> None:
    allocator = BlockAllocator(5)
    before = snapshot(allocator)
    with pytest.raises(ValueError):
        allocator.incref(block_id)
    assert snapshot(allocator) == before


def test_ref_count_of_a_free_block_is_zero() -> None:
    allocator = BlockAllocator(3)
    assert [allocator.ref_count(b) for b in range(3)] == [0, 0, 0]
