"""What a failed check leaves in the report (`GradingPlugin.record_failure`): its counterexample
as a script that ends in what failed, and Hypothesis' notes without the advice to decorate the
grader's own test function."""

from grader.sandbox.process import NotSubmitted
from grader.sandbox.proxy import RemoteError
from grader.sandbox.transcript import Transcript
from grader.scoring.plugin import CheckResult, GradingPlugin
from grader.scoring.timing import ResultsDiffer

REPRODUCE = (
    "You can reproduce this example by temporarily adding @reproduce_failure('6.1', "
    "b'AAE=') as a decorator on your test function"
)


def failed(error: BaseException, transcript: Transcript | None) -> CheckResult:
    result = CheckResult("allocator/x", "allocator", "x", "error", 0, 2, "safety")
    GradingPlugin.record_failure(None, result, error, transcript, None)  # uses no state
    return result


def test_a_failed_assertion_leaves_a_script_that_ends_in_it() -> None:
    transcript = Transcript("pkg")
    transcript.imports["block_allocator"] = {"BlockAllocator"}
    transcript.record("BlockAllocator(2)", code="allocator = BlockAllocator(2)")
    transcript.record("allocator.num_free", "-> 1", value=1, read=True)
    transcript.fail("allocator.num_free", "2")
    error = AssertionError("a new pool of 2 blocks must have num_free == 2\nmore")
    error.add_note("Falsifying example: check_x(submission=...)")
    error.add_note(REPRODUCE)
    result = failed(error, transcript)
    assert result.status == "failed"
    assert result.counterexample.splitlines()[-4:] == [
        "# fails: a new pool of 2 blocks must have num_free == 2",
        "got = allocator.num_free",
        "expected = 2",
        'assert got == expected, f"expected {expected!r}, got {got!r}"',
    ]
    assert result.hypothesis == "Falsifying example: check_x(submission=...)"


def test_the_reproduce_failure_advice_is_dropped_from_a_longer_note() -> None:
    error = AssertionError("wrong")
    error.add_note(f"Failing test case: <state machine>\nstate.teardown()\n{REPRODUCE}")
    assert failed(error, Transcript("pkg")).hypothesis == (
        "Failing test case: <state machine>\nstate.teardown()"
    )


def test_a_check_without_calls_or_a_missing_file_has_no_counterexample() -> None:
    assert failed(AssertionError("too slow"), Transcript("pkg")).counterexample == ""
    assert failed(AssertionError("too slow"), None).counterexample == ""
    missing = failed(NotSubmitted("block_allocator.py was not submitted"), Transcript("pkg"))
    assert (missing.status, missing.counterexample) == ("failed", "")


def test_an_exception_a_timing_met_in_the_code_is_its_results_and_keeps_its_traceback() -> None:
    """A call the timing check made itself (its pool's set-up) raised in the candidate's code:
    its results, which `grade.not_timed` leaves to a check that times nothing; a timed run that
    raised keeps the candidate's traceback behind the failure."""
    speed = CheckResult("allocator/x", "allocator", "x", "error", 0, 2, "speed")
    raised = RemoteError("ValueError", "block 0 freed twice", "Traceback ...\nValueError: ...")
    GradingPlugin.record_failure(None, speed, raised, None, None)
    assert speed.results_differ == "it raised ValueError: block 0 freed twice"
    assert failed(raised, None).results_differ == ""  # a check that times nothing: its failure
    timed = CheckResult("allocator/x", "allocator", "x", "error", 0, 2, "speed")
    try:
        try:
            raise raised
        except RemoteError:
            raise ResultsDiffer("it raised ValueError: block 0 freed twice") from None
    except ResultsDiffer as error:
        GradingPlugin.record_failure(None, timed, error, None, None)
    assert timed.traceback == raised.traceback
    assert timed.results_differ == "it raised ValueError: block 0 freed twice"
