"""The transcript: a failing check's calls as a script that imports what it uses, pastes into the
REPL, and ends in an assert (or in the call that raised) that fails on the candidate's code and
passes on code that follows the contract.

Each script here is run with `python` on a tiny package standing in for a submission: a pool
that hands out ids, right (`GOOD`) or wrong (`BAD`).
"""

import pytest
import torch

from grader.sandbox.proxy import RemoteError
from grader.sandbox.transcript import (
    PACKAGE_HERE,
    SHOWN_RESULT_CHARS,
    Line,
    Shown,
    Transcript,
    one_line,
)
from tests.replay import assert_pastes_into_the_repl, run

GOOD = """
class Pool:
    def __init__(self, size):
        self.free = list(range(size))
        self.size = size

    def take(self, n):
        if n < 0:
            raise ValueError(f"take({n})")
        taken, self.free = self.free[:n], self.free[n:]
        return taken

    def give(self, ids):
        if any(not 0 <= i < self.size or i in self.free for i in ids):
            raise ValueError(f"give({ids})")
        self.free += ids
"""
BAD = GOOD.replace('raise ValueError(f"take({n})")', "return []").replace(
    "self.free += ids", "self.free += ids + ids"
)


@pytest.fixture
def kit(tmp_path):
    """`kit(source)`: a folder named other than the package `pkg`, holding its `pool.py`,
    `source`: the script runs in it."""

    def make(source: str):
        (tmp_path / "not-pkg").mkdir(exist_ok=True)
        (tmp_path / "not-pkg" / "pool.py").write_text(source)
        return tmp_path / "not-pkg"

    return make


def transcript_of_a_pool() -> tuple[Transcript, list[int]]:
    """`pool = Pool(4)` and `pool.take(2)`, as the proxy records them; the ids taken."""
    transcript = Transcript("pkg")
    transcript.imports["pool"] = {"Pool"}
    transcript.record("Pool(4)", code="pool = Pool(4)", value=object())
    ids = [0, 1]
    transcript.record("pool.take(2)", f"-> {ids}", value=ids)
    return transcript, ids


def raised(transcript: Transcript, call: str, message: str) -> RemoteError:
    """`call` recorded as the proxy records a call that raised `ValueError(message)`."""
    error = RemoteError("ValueError", message, "")
    error.recorded = (transcript, transcript.record(call, f"raises {error}", raised=True))
    return error


def test_a_failed_check_ends_in_an_assert_that_shows_both_sides(kit) -> None:
    transcript, ids = transcript_of_a_pool()
    name = transcript.source(ids, "ids")
    transcript.record("pool.give([ids[0]])")
    transcript.record("len(pool.free)", "-> 4", value=4, read=True)
    transcript.fail("len(pool.free)", f"4 - len({name}) + 1")
    script = transcript.render("the pool has 4 free blocks, expected 3")
    lines = script.splitlines()
    here = [line.format(package="pkg") for line in PACKAGE_HERE]
    assert lines[:6] == [*here, "from pkg.pool import Pool", "pool = Pool(4)"]
    assert lines[6] == "ids = pool.take(2)  # -> [0, 1]"
    assert lines[-4:] == [
        "# fails: the pool has 4 free blocks, expected 3",
        "got = len(pool.free)",
        "expected = 4 - len(ids) + 1",
        'assert got == expected, f"expected {expected!r}, got {got!r}"',
    ]
    assert_pastes_into_the_repl(script)
    failed = run(kit(BAD), script)
    assert failed.failed_at_the_last_line(), failed
    assert "AssertionError: expected 3, got 4" in failed.stderr
    assert run(kit(GOOD), script).returncode == 0


def test_an_expected_exception_is_asserted_with_a_helper_not_a_with_block(kit) -> None:
    transcript, _ = transcript_of_a_pool()
    raised(transcript, "pool.give([9])", "give([9])").expected(ValueError)
    transcript.record("len(pool.free)", "-> 2", value=2, read=True)
    transcript.fail("len(pool.free)", "2")
    script = transcript.render("a refused give changed the pool")
    assert "with " not in script
    assert "suppress" not in script
    assert "assert raises(ValueError, lambda: pool.give([9]))  # raises ValueError" in script
    assert script.index("def raises(kind, call):") < script.index("pool = Pool(4)")
    assert_pastes_into_the_repl(script)
    assert run(kit(GOOD), script).returncode == 0


def test_a_tolerated_exception_is_not_asserted() -> None:
    transcript, _ = transcript_of_a_pool()
    raised(transcript, "pool.give([9])", "give([9])").expected(Exception, required=False)
    assert str(transcript.lines[-1]).startswith("raises(Exception, lambda: pool.give([9]))")


def test_a_call_that_had_to_raise_and_returned_is_the_last_assert(kit) -> None:
    transcript, _ = transcript_of_a_pool()
    transcript.record("pool.take(-1)", "-> []", value=[])
    transcript.fail_to_raise(ValueError)
    script = transcript.render("take(-1) must raise ValueError, but returned normally")
    assert script.splitlines()[-1] == (
        'assert raises(ValueError, lambda: pool.take(-1)), "expected ValueError, got no exception"'
    )
    assert_pastes_into_the_repl(script)
    failed = run(kit(BAD), script)
    assert failed.failed_at_the_last_line(), failed
    assert run(kit(GOOD), script).returncode == 0


def test_an_unexpected_exception_is_the_script_s_last_statement(kit) -> None:
    transcript, _ = transcript_of_a_pool()
    raised(transcript, "pool.give([3, 3])", "give([3, 3])")
    script = transcript.render("unexpected exception from the submission: ValueError")
    lines = script.splitlines()
    assert lines[-2] == "# fails: unexpected exception from the submission: ValueError"
    assert lines[-1].startswith("pool.give([3, 3])  # raises ValueError")
    failed = run(kit(GOOD), script)
    assert failed.failed_at_the_last_line()
    assert "ValueError: give([3, 3])" in failed.stderr


def test_a_message_of_the_candidates_never_becomes_code_in_the_script() -> None:
    transcript, _ = transcript_of_a_pool()
    raised(transcript, "pool.give([3])", 'bad\nimport os; os.system("echo pwned")\r\nx = 1')
    script = transcript.render("unexpected exception from the submission: ValueError")
    assert not [line for line in script.splitlines() if line.startswith(("import os", "x = 1"))]
    assert script.splitlines()[-1].startswith("pool.give([3])  # raises ValueError: bad ")


def test_a_failure_no_check_stated_ends_in_assert_false() -> None:
    transcript, _ = transcript_of_a_pool()
    script = transcript.render("something was wrong")
    assert script.splitlines()[-1] == "assert False, 'something was wrong'"


def test_a_value_is_shown_as_where_it_came_from() -> None:
    transcript, ids = transcript_of_a_pool()
    free = [2, 3]
    transcript.record("pool.free", f"-> {free}", value=free, read=True)
    assert transcript.source(free, "free") == "pool.free"  # the last line: read again
    transcript.record("pool.take(1)", "-> [2]", value=[2])
    assert transcript.source(free, "free") == "free"  # a copy, as it was then
    assert str(transcript.lines[-2]) == "free = list(pool.free)  # -> [2, 3]"
    assert transcript.source(ids, "ids") == "ids"
    assert transcript.code([ids, Shown(2, "free[0]")]) == "[ids, free[0]]"
    assert transcript.source(7) == "7"  # a plain value no line gave


@pytest.mark.parametrize("value", [
    [[block, block + 1] for block in range(1000)],  # a workload's evidence: ids per allocation
    [[[1] * 30, "x" * 300], None, [2]],
    [Shown(1, "a" * 200), [3]],
    [[1, 2], None],
    [[1, 2], torch.ones(2), (3, "a\nb")],
    [[block] for block in range(100)] + [torch.zeros(2)],
])  # fmt: skip
def test_a_value_cut_for_its_comment_is_shown_as_the_whole_would_be(value: list) -> None:
    transcript = Transcript("submission")
    cut = transcript.code(value, SHOWN_RESULT_CHARS)
    whole = transcript.code(value)
    assert one_line(f"-> {cut}") == one_line(f"-> {whole}")
    if len(whole) > 10 * SHOWN_RESULT_CHARS:  # many short items: only the first are written
        assert len(cut) < 2 * SHOWN_RESULT_CHARS


def test_a_name_given_in_a_quiet_block_that_succeeded_is_forgotten() -> None:
    transcript, _ = transcript_of_a_pool()
    with transcript.quiet():
        free = [2, 3]
        transcript.record("pool.free", f"-> {free}", value=free, read=True)
        transcript.record("pool.take(0)", "-> []", value=[])
        transcript.source(free, "free")
    assert transcript.code(free) == "[2, 3]"


def test_calls_made_aside_leave_a_written_script_as_it_was_even_when_one_fails() -> None:
    """A timing's calls made again after its counterexample was written (`Timed.again`)."""
    transcript, _ = transcript_of_a_pool()
    transcript.fail("allocator.num_free", "2")
    written = transcript.render("wrong")

    def found_wrong_again() -> None:
        with transcript.aside():
            transcript.needs("import torch")
            transcript.fresh("again")  # a name given aside: given back
            transcript.record("allocator.allocate(3)", "-> [0, 1, 2]")
            transcript.fail("allocator.num_free", "0")
            raise AssertionError("found wrong again")

    with pytest.raises(AssertionError, match="found wrong again"):
        found_wrong_again()
    assert transcript.render("wrong") == written
    assert transcript.fresh("again") == "again"


def test_a_line_can_be_preceded_by_setup() -> None:
    transcript, ids = transcript_of_a_pool()
    line = transcript.producer(ids)
    assert isinstance(line, Line)
    transcript.insert_before(line, ("counted = []",))
    assert [str(line) for line in transcript.lines[-2:]] == [
        "counted = []",
        "pool.take(2)  # -> [0, 1]",
    ]


def test_a_kernel_script_switches_on_triton_s_interpreter_first() -> None:
    transcript = Transcript("pkg", interpreted=True)
    assert "TRITON_INTERPRET" not in transcript.render()  # no kernel imported
    transcript.imports["paged_attention"] = {"paged_attention_decode"}
    transcript.needs("from kernels.cases import make_case")
    head = transcript.render().splitlines()
    assert head == [
        "import os",
        'os.environ["TRITON_INTERPRET"] = "1"',
        "from kernels.cases import make_case",
        *(line.format(package="pkg") for line in PACKAGE_HERE),
        "from pkg.paged_attention import paged_attention_decode",
    ]
