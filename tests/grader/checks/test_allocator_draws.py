"""Part 1's random check draws a free id by its place among the free ids (`nth_unheld`), never
listing the pool: each place gives the id that listing the pool would, for every held set of a
small pool."""

import itertools

from grader.checks.allocator import nth_unheld

POOL = 7


def test_each_place_gives_the_id_a_list_of_the_free_ids_holds_there() -> None:
    for size in range(POOL + 1):
        for held in itertools.combinations(range(POOL), size):
            free = [block for block in range(POOL) if block not in held]
            assert [nth_unheld(place, list(held)) for place in range(len(free))] == free, held
