"""The checks' shared helpers as they write counterexamples: the property a failed assertion
states (`expect`, `same`, `raises`), the held ids shown by where they came from (`Held`), and
the worker's workloads as plain functions (`workloads.function_source`)."""

import pytest

from grader.checks import allocator_timing, caching_timing, gather_timing
from grader.checks.support.expect import Held, expect, raises, same
from grader.checks.support.workloads import WORKER_WORKLOADS, function_source
from grader.sandbox.proxy import RemoteError
from grader.sandbox.transcript import Transcript
from tests.replay import assert_pastes_into_the_repl

WORKER_FUNCTIONS = (
    "allocate_free_rounds",
    "prompt_free_rounds",
    "chain_decode_rounds",
    "shuffle_tables",
    "signs",
    "weighed_rounds",
    "mixed",
    "gather_rounds",
    "slot_mapping_rounds",
)
CHECK_FUNCTIONS = (  # what the timing checks' counterexamples define besides the workloads
    *(
        (name, allocator_timing.THIS_FILE)
        for name in ("free_ids_of", "allocation_sizes", "first_misstep")
    ),
    ("whole_number_pool", gather_timing.THIS_FILE),
    *(
        (name, caching_timing.THIS_FILE)
        for name in ("fill_prompt", "chain_tokens", "chain_picks", "chain_misstep")
    ),
)


def pool_transcript() -> tuple[Transcript, list[int], list[int]]:
    """Two allocations recorded: `ids = allocator.allocate(2)`, `ids2 = allocator.allocate(2)`."""
    transcript = Transcript("pkg")
    first, second = [3, 3], [5, 0]  # an allocator that handed out id 3 twice
    transcript.record("allocator.allocate(2)", "-> [3, 3]", value=first)
    transcript.record("allocator.allocate(2)", "-> [5, 0]", value=second)
    return transcript, first, second


def test_held_ids_are_shown_by_where_they_were_handed_out() -> None:
    transcript, first, second = pool_transcript()
    held = Held(transcript, 8)
    assert held.add(first) == "ids"
    assert held.add(second) == "ids2"
    assert held.ids() == {0, 3, 5}
    assert held.code(3) == "ids[0]"
    assert held.code(0) == "ids2[1]"
    # both places of id 3 count: another allocator gave two ids there
    assert held.set_code() == "{*ids, *ids2}"
    held.drop([5])
    assert held.set_code() == "{*ids, ids2[1]}"
    assert held.code(9) == "9"  # out of range: the id itself
    free = held.code(4)  # not held: its place among the free ids
    assert free == "sorted(set(range(8)) - {*ids, ids2[1]})[2]"
    assert held.shown([3, 4, -1]).code == f"[ids[0], {free}, -1]"
    assert eval(free, {"ids": first, "ids2": second}) == 4
    held.drop([3, 0])
    assert held.set_code() == "set()"


def test_a_free_id_is_shown_by_its_place_among_the_free_ids_of_the_pool() -> None:
    """Its place counts only the held ids in the pool: one out of range (an allocator that handed
    out -1 or 8) is left out of `set(range(8))` as well."""
    transcript = Transcript("pkg")
    handed_out = [-1, 2, 8, 5]
    transcript.record("allocator.allocate(4)", "-> [-1, 2, 8, 5]", value=handed_out)
    held = Held(transcript, 8)
    held.add(handed_out)
    for block in (0, 1, 3, 4, 6, 7):
        assert eval(held.code(block), {"ids": handed_out}) == block


def test_a_failed_expectation_ends_the_script_and_fails_with_the_message() -> None:
    transcript = Transcript("pkg")
    written = []

    def code() -> str:
        written.append(True)
        return "len(pool.free)"

    expect(transcript, True, "unused", got=code, expected="3")
    assert not written
    assert not transcript.ending
    with pytest.raises(AssertionError, match=r"^3 blocks should be free$"):
        expect(transcript, False, "3 blocks should be free", got=code, expected="3", op="<=")
    assert transcript.ending == [
        "got = len(pool.free)",
        "expected = 3",
        'assert got <= expected, f"expected at most {expected!r}, got {got!r}"',
    ]


def test_same_shows_the_read_that_gave_the_value() -> None:
    transcript = Transcript("pkg")
    transcript.record("allocator.num_free", "-> 2", value=2, read=True)
    with pytest.raises(AssertionError, match="num_free is wrong"):
        same(transcript, 2, 3, "num_free is wrong")
    assert transcript.ending[:2] == ["got = allocator.num_free", "expected = 3"]


def test_a_call_that_must_raise_and_returned_ends_the_script() -> None:
    transcript = Transcript("pkg")
    with (
        pytest.raises(AssertionError, match="must raise ValueError, but returned normally"),
        raises(transcript, ValueError, "allocate(-1)"),
    ):
        transcript.record("allocator.allocate(-1)", "-> []", value=[])
    assert transcript.lines == []
    assert transcript.ending == [
        "assert raises(ValueError, lambda: allocator.allocate(-1)), "
        '"expected ValueError, got no exception"'
    ]


def raise_recorded(transcript: Transcript, kind: str, message: str) -> None:
    """The proxy's doing when a recorded call raised `kind(message)` in the worker."""
    error = RemoteError(kind, message, "")
    line = transcript.record("allocator.allocate(-1)", f"raises {error}", raised=True)
    error.recorded = (transcript, line)
    raise error


def test_a_call_that_raised_the_wrong_exception_ends_the_script() -> None:
    transcript = Transcript("pkg")
    with (
        pytest.raises(AssertionError, match="but raised RuntimeError: OOM"),
        raises(transcript, ValueError, "allocate(-1)"),
    ):
        raise_recorded(transcript, "RuntimeError", "OOM")
    assert transcript.lines == []
    assert transcript.ending[0].startswith("assert raises(ValueError, lambda: allocator.allocate")


@pytest.mark.parametrize(
    ("name", "module"),
    [*((name, WORKER_WORKLOADS) for name in WORKER_FUNCTIONS), *CHECK_FUNCTIONS],
    ids=[*WORKER_FUNCTIONS, *(name for name, _ in CHECK_FUNCTIONS)],
)
def test_a_workload_is_a_plain_function_a_script_can_define(name: str, module) -> None:
    """Plain: no docstring, no annotations, and no `said`, which a script does not have."""
    lines = function_source(name, module)
    assert lines[0].startswith(f"def {name}(")
    assert ":" not in lines[0].removesuffix(":")
    assert '"""' not in "\n".join(lines)
    assert "said(" not in "\n".join(lines)
    assert lines[-1] == ""
    assert_pastes_into_the_repl("\n".join([*lines, "x = 1"]))
    namespace: dict = {}
    exec("\n".join(lines), namespace)
    assert callable(namespace[name])


def test_a_check_functions_message_is_its_english_in_a_script() -> None:
    namespace: dict = {}
    exec("\n".join(function_source("first_misstep", allocator_timing.THIS_FILE)), namespace)
    misstep = namespace["first_misstep"]({1, 2}, [1], [[5]])
    assert misstep == "allocation 0 (of 1) handed out 5, not a free block"
    assert misstep == allocator_timing.first_misstep({1, 2}, [1], [[5]])
