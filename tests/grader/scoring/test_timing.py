"""CPU-time measurement: the worker's CPU time read from outside, rounds, confirmation, and a clear
pass cut short; wrong evidence told apart, the code's own results from work not done as asked; and
the verdict every timing check ends in (`judge_ratio`, `judge_states` over a pool's states)."""

import time
from collections.abc import Callable

import pytest

from grader.sandbox.process import Limits, Sandbox
from grader.sandbox.proxy import RemoteError, Submission
from grader.scoring.timing import (
    IMPLAUSIBLE_SPEEDUP,
    MIN_ROUNDS,
    ROUND_SECONDS,
    ResultsDiffer,
    StateTiming,
    Timed,
    affordable,
    clearly_passes,
    confirmed_probe,
    growth_calls,
    growth_ratio,
    judge_ratio,
    judge_states,
    rounds_before_clear,
    speed_ratio,
    state_timings,
    time_confirmed,
    time_interleaved,
    time_states,
)

SPIN = b"""
import os, threading

def spin(n):
    total = 0
    for i in range(n):
        total += i
    return total

def later(n):
    threading.Thread(target=spin, args=(n,)).start()

def join_threads():
    for thread in threading.enumerate():
        if thread is not threading.current_thread():
            thread.join()

def spin_in_a_child(n):
    pid = os.fork()
    if pid == 0:
        spin(n)
        os._exit(0)
    os.waitpid(pid, 0)
    return 0
"""


class FakeSandbox:
    """A worker whose CPU clock each call advances by the next of `costs`."""

    def __init__(self, costs: list[float]) -> None:
        self.costs, self.clock, self.cpu_mark = iter(costs), 0.0, None

    def cpu_seconds(self) -> float:
        return self.clock

    def run(self) -> None:
        self.clock += next(self.costs)


class FakeBenchmark:
    def pedantic(self, target, rounds: int, warmup_rounds: int = 0) -> None:
        for _ in range(warmup_rounds + rounds):
            target()


def plain(call, sandbox) -> Timed:
    """`call` timed, asking nothing and returning no evidence."""
    return Timed(sandbox, lambda: None, lambda _: call(), lambda asked, evidence: None)


def timed(costs: list[float]) -> Timed:
    sandbox = FakeSandbox(costs)
    return plain(sandbox.run, sandbox)


def test_the_least_cpu_time_after_the_warm_up_is_kept():
    calls = {"reference": timed([9.0, 2.0, 3.0]), "candidate": timed([9.0, 4.0, 5.0])}
    best = time_interleaved(FakeBenchmark(), calls, rounds=2)
    assert best == {"reference": 2.0, "candidate": 4.0}


def test_work_between_calls_is_charged_to_the_next_call():
    work = timed([1.0, 1.0])
    assert work.cpu_seconds() == 1.0
    work.sandbox.clock += 5.0  # a background thread, while another worker was timed
    assert work.cpu_seconds() == 6.0


def test_each_call_asks_afresh_and_its_evidence_is_verified_after_its_time_is_read():
    sandbox, asked, seen = FakeSandbox([1.0, 2.0]), iter(["first", "second"]), []

    def run(question: str) -> str:
        sandbox.run()
        return question.upper()

    def verify(question: str, evidence: str) -> str | None:
        seen.append((question, evidence, sandbox.cpu_mark))
        return "it shouted" if question == "second" else None

    work = Timed(sandbox, lambda: next(asked), run, verify)
    assert work.cpu_seconds() == 1.0
    with pytest.raises(AssertionError, match="not done as asked: it shouted"):
        work.cpu_seconds()
    assert seen == [("first", "FIRST", 1.0), ("second", "SECOND", 3.0)]


def shouting(again) -> Timed:
    """A workload whose every answer is wrong ("it shouted"), made again by `again`."""
    sandbox = FakeSandbox([1.0])

    def run(question: str) -> str:
        sandbox.run()
        return question.upper()

    return Timed(sandbox, lambda: "asked", run, lambda *_: "it shouted", again)


def test_wrong_evidence_that_the_code_gives_again_is_its_results_not_work_done_otherwise():
    differ = "results differ from the contract: it shouted"
    with pytest.raises(ResultsDiffer, match=differ) as error:
        shouting(lambda question: question.upper()).cpu_seconds()
    assert error.value.misstep == "it shouted"


def raises_remotely(question: str) -> str:
    raise RemoteError("OutOfBlocks", "no block left", "")


@pytest.mark.parametrize(
    "again", [None, lambda question: question, raises_remotely], ids=["none", "other", "raises"]
)
def test_wrong_evidence_the_code_does_not_give_again_is_work_not_done_as_asked(again):
    with pytest.raises(AssertionError, match="not done as asked: it shouted") as error:
        shouting(again).cpu_seconds()
    assert not isinstance(error.value, ResultsDiffer)


def test_a_failing_ratio_is_measured_again_and_a_passing_one_is_not():
    passing = {"reference": timed([1.0, 1.0]), "candidate": timed([1.0, 1.0])}
    assert time_confirmed(FakeBenchmark(), passing, 1, fails=lambda best: False) == {
        "reference": 1.0,
        "candidate": 1.0,
    }  # only warm-up + one round were drawn: a second measurement would exhaust the costs
    calls = {"reference": timed([1.0, 1.0, 1.0]), "candidate": timed([1.0, 9.0, 2.0])}
    best = time_confirmed(FakeBenchmark(), calls, 1, fails=lambda best: best["candidate"] > 3)
    assert best == {"reference": 1.0, "candidate": 2.0}


def test_rounds_that_cost_more_than_their_budget_are_fewer_but_never_under_the_minimum():
    assert affordable(15, ROUND_SECONDS) == 15  # the reference's rounds: all of them
    assert affordable(15, 2 * ROUND_SECONDS) == 7
    assert affordable(15, 100 * ROUND_SECONDS) == MIN_ROUNDS
    assert affordable(2, 100 * ROUND_SECONDS) == 2  # never more than asked
    slow = 10 * ROUND_SECONDS  # the warm-up, then MIN_ROUNDS rounds and as many to confirm
    costs = [slow] * (1 + MIN_ROUNDS) + [slow - 1] * MIN_ROUNDS + [1.0] * 30
    calls = {"reference": timed([0.0] * 40), "candidate": timed(costs)}
    best = time_confirmed(FakeBenchmark(), calls, 15, fails=lambda best: True)
    assert best == {"reference": 0.0, "candidate": slow - 1}
    assert calls["candidate"].cpu_seconds() == 1.0  # the next cost: no round more was run


NEXT = 99.0  # the cost a call draws after those a measurement may use: none of them was run


def drawn(cost: float, rounds: int) -> Timed:
    """A call costing `cost` in the warm-up and each of `rounds` rounds, then `NEXT`: rounds
    that cost hundredths of a second, like the reference's, are all `affordable`."""
    return timed([cost] * (1 + rounds) + [NEXT])


def clear_within(limit: float) -> Callable[[dict[str, float]], bool]:
    """`clearly_passes` for a speed ratio held to `limit`."""
    return lambda best: clearly_passes(best, speed_ratio, limit)


def test_a_clear_pass_stops_after_a_third_of_its_rounds():
    first = rounds_before_clear(15)
    calls = {"reference": drawn(0.01, first), "candidate": drawn(0.02, first)}
    best = time_interleaved(FakeBenchmark(), calls, 15, clear=clear_within(5.0))
    assert best == pytest.approx({"reference": 0.01, "candidate": 0.02})
    assert [call.cpu_seconds() for call in calls.values()] == pytest.approx([NEXT, NEXT])
    few = {"reference": drawn(0.01, MIN_ROUNDS), "candidate": drawn(0.01, MIN_ROUNDS)}
    time_interleaved(FakeBenchmark(), few, 6, clear=clear_within(5.0))  # never under MIN_ROUNDS
    assert [call.cpu_seconds() for call in few.values()] == pytest.approx([NEXT, NEXT])


@pytest.mark.parametrize(
    "candidate", [0.03, 0.015 / IMPLAUSIBLE_SPEEDUP], ids=["near_the_limit", "near_implausible"]
)
def test_a_pass_that_is_not_clear_gets_every_round(candidate: float):
    calls = {"reference": drawn(0.01, 15), "candidate": drawn(candidate, 15)}
    best = time_interleaved(FakeBenchmark(), calls, 15, clear=clear_within(5.0))
    assert best == pytest.approx({"reference": 0.01, "candidate": candidate})
    assert [call.cpu_seconds() for call in calls.values()] == pytest.approx([NEXT, NEXT])


def test_a_pool_passes_clearly_only_where_every_state_does():
    def pool(candidate_when_empty: float) -> dict[str, Timed]:
        return {
            "candidate, full": drawn(0.01, 15),
            "reference, full": drawn(0.01, 15),
            "candidate, empty": drawn(candidate_when_empty, 15),
            "reference, empty": drawn(0.01, 15),
        }

    clear, near = pool(0.01), pool(0.03)
    time_states(FakeBenchmark(), clear, 15, speed_ratio, 5.0)
    assert [call.cpu_seconds() for call in clear.values()] == pytest.approx([0.01] * 4)  # unrun
    best = time_states(FakeBenchmark(), near, 15, speed_ratio, 5.0)
    assert best["empty"] == pytest.approx({"candidate": 0.03, "reference": 0.01})
    assert [call.cpu_seconds() for call in near.values()] == pytest.approx([NEXT] * 4)


def test_a_clear_pass_is_within_half_the_limit_and_a_fifth_of_the_reference_time_or_more():
    assert clearly_passes({"candidate": 2.5, "reference": 1.0}, speed_ratio, 5.0)
    assert not clearly_passes({"candidate": 2.5, "reference": 1.0}, speed_ratio, 4.0)
    assert clearly_passes({"candidate": 0.25, "reference": 1.25}, speed_ratio, 5.0)  # a fifth
    assert not clearly_passes({"candidate": 0.25, "reference": 1.5}, speed_ratio, 5.0)


def test_a_growth_passes_clearly_with_each_pool_plausible():
    growth = {"candidate small": 1.0, "reference small": 1.0, "candidate large": 2.0,
              "reference large": 1.0}  # fmt: skip
    assert clearly_passes(growth, growth_ratio, 5.0)
    assert not clearly_passes(growth, growth_ratio, 3.0)  # 2x the reference's growth: over 1.5
    fast_small = growth | {"candidate small": 0.125, "candidate large": 0.25}
    assert growth_ratio(fast_small) == 2.0
    assert not clearly_passes(fast_small, growth_ratio, 5.0)  # the small pool 8x faster


def test_a_clear_pass_of_slow_rounds_runs_only_those_affordable():
    slow = 2 * ROUND_SECONDS  # each call: the round costs 4 x ROUND_SECONDS, MIN_ROUNDS are paid
    calls = {"reference": drawn(slow, MIN_ROUNDS), "candidate": drawn(slow, MIN_ROUNDS)}
    assert affordable(15, 2 * slow) < rounds_before_clear(15)
    time_interleaved(FakeBenchmark(), calls, 15, clear=clear_within(5.0))
    assert [call.cpu_seconds() for call in calls.values()] == pytest.approx([NEXT, NEXT])


def test_a_hopeless_probe_is_measured_again_and_a_hopeful_one_is_not():
    hopeful = {"c": timed([5.0]), "r": timed([1.0])}
    assert confirmed_probe(hopeful, 10.0) == {"c": 5.0, "r": 1.0}  # a second round: no costs left
    hopeless = {"c": timed([50.0, 8.0]), "r": timed([1.0, 2.0])}
    assert confirmed_probe(hopeless, 10.0) == {"c": 8.0, "r": 1.0}  # each call's least


def judged(seconds: tuple[float, float]) -> tuple[list[tuple], str | None]:
    """What `judge_ratio` recorded, with a limit of 5, and its failure message (None: passed)."""
    recorded: list[tuple] = []
    try:
        judge_ratio(
            lambda *benchmark: recorded.append(benchmark), "work", seconds, 5.0, "the work",
            lambda ratio: f"{ratio:.1f}x the reference's time",
        )  # fmt: skip
    except AssertionError as failure:
        return recorded, str(failure)
    return recorded, None


def test_the_verdict_is_recorded_whatever_it_is_and_judged_against_the_limit():
    assert judged((4.0, 1.0)) == ([("work", 4.0, 1.0, 4.0, 5.0)], None)
    assert judged((6.0, 1.0)) == ([("work", 6.0, 1.0, 6.0, 5.0)], "6.0x the reference's time")


def test_an_implausibly_fast_candidate_fails_before_its_ratio_is_judged():
    recorded, message = judged((0.05, 1.0))
    assert recorded == [("work", 0.05, 1.0, 0.05, 5.0)]
    assert message == (
        "the work ran 20x faster than the reference's, which is not plausible: flagged for "
        "review, not rewarded"
    )


def judged_states(timings: dict[str, StateTiming]) -> tuple[list[tuple], str | None]:
    """What `judge_states` recorded, with a limit of 5, and its failure message (None: passed)."""
    recorded: list[tuple] = []
    try:
        judge_states(
            lambda *benchmark: recorded.append(benchmark), timings, 5.0, "the work",
            lambda state, ratio: f"{ratio:.1f}x the reference's time {state}",
        )  # fmt: skip
    except AssertionError as failure:
        return recorded, str(failure)
    return recorded, None


def test_every_state_is_recorded_in_order_and_the_worst_is_judged():
    timings = {
        "full": StateTiming("work full", (9.0, 1.0), 9.0),
        "empty": StateTiming("work empty", (2.0, 1.0), 6.0),
    }
    assert judged_states(timings) == (
        [("work full", 9.0, 1.0, 9.0, 5.0), ("work empty", 2.0, 1.0, 6.0, 5.0)],
        "9.0x the reference's time full",
    )
    timings["full"] = StateTiming("work full", (1.0, 1.0), 1.0)
    assert judged_states(timings)[1] == "6.0x the reference's time empty"
    timings["empty"] = StateTiming("work empty", (2.0, 1.0), 2.0)
    assert judged_states(timings)[1] is None


def test_a_state_implausibly_fast_fails_whichever_state_is_the_worst():
    timings = {
        "full": StateTiming("work full", (0.05, 1.0), 0.05),
        "empty": StateTiming("work empty", (9.0, 1.0), 9.0),
    }
    recorded, message = judged_states(timings)
    assert len(recorded) == 2
    assert message.startswith("the work ran 20x faster")


def test_states_are_timed_together_and_measured_again_where_any_fails():
    def pair(large: list[float]) -> tuple[Timed, Timed]:
        return timed([1.0] * 3), timed(large)

    calls = growth_calls("a", pair([1.0] * 3), pair([1.0] * 3))
    calls |= growth_calls("b", pair([1.0, 9.0, 4.0]), pair([1.0] * 3))
    assert list(calls)[:4] == [
        "candidate small, a", "reference small, a", "candidate large, a", "reference large, a"
    ]  # fmt: skip
    best = time_states(FakeBenchmark(), calls, 1, growth_ratio, 3.0)
    assert best["a"] == dict.fromkeys(("candidate small", "reference small", "candidate large",
                                       "reference large"), 1.0)  # fmt: skip
    assert best["b"]["candidate large"] == 4.0  # 9 fails: the rounds once more
    timings = state_timings(best, lambda state: f"growth {state}", growth_ratio, "large")
    assert timings["b"] == StateTiming("growth b", (4.0, 1.0), 4.0)
    assert speed_ratio({"candidate": 3.0, "reference": 2.0}) == 1.5


@pytest.fixture
def worker():
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    sandbox = Sandbox({"spin.py": SPIN}, limits, {}, time.monotonic() + 1200)
    yield Submission(sandbox, "candidate").module("spin"), sandbox
    sandbox.close()


def test_the_worker_cpu_time_is_read_from_outside_and_counts_its_children(worker):
    module, sandbox = worker
    before = sandbox.cpu_seconds()
    module.spin(3_000_000)
    own = sandbox.cpu_seconds() - before
    module.spin_in_a_child(3_000_000)
    with_child = sandbox.cpu_seconds() - before - own
    assert own > 0.01, own
    assert with_child > own / 4, (own, with_child)  # the child's time is counted, not hidden


def test_a_thread_that_works_after_its_call_returned_is_charged(worker):
    """The thread's work counts in the call that started it or in the next timed one (which
    only waits for it): how it splits between them depends on the machine's load."""
    module, sandbox = worker
    own = plain(lambda: module.spin(3_000_000), sandbox).cpu_seconds()
    started = plain(lambda: module.later(3_000_000), sandbox).cpu_seconds()
    waited = plain(module.join_threads, sandbox).cpu_seconds()  # waits; itself costs nothing
    assert started + waited > own / 2, (own, started, waited)


def raises_another(question: str) -> str:
    raise RemoteError("IndexError", "list index out of range", "")


def crashing(again) -> Timed:
    """A workload whose worker call raises the candidate's OutOfBlocks, made again by `again`."""
    sandbox = FakeSandbox([])

    def run(question: str) -> str:
        raise RemoteError("OutOfBlocks", "no block left", "")

    return Timed(sandbox, lambda: "asked", run, lambda *_: None, again)


def test_an_exception_the_code_raises_again_is_its_results_and_any_other_is_work_done_otherwise():
    with pytest.raises(ResultsDiffer, match="it raised OutOfBlocks: no block left") as error:
        crashing(raises_remotely).cpu_seconds()
    assert isinstance(error.value.__context__, RemoteError)  # the line it raised at
    for again in (None, lambda question: question, raises_another):
        with pytest.raises(AssertionError, match="not done as asked: it raised OutOfBlocks") as no:
            crashing(again).cpu_seconds()
        assert not isinstance(no.value, ResultsDiffer)
        assert isinstance(no.value.__context__, RemoteError)


def raises_here(question: str) -> str:
    raise TypeError("'NoneType' object is not iterable")  # the workload, run on what was returned


def test_an_exception_of_the_workload_run_here_is_compared_by_its_type():
    """The workload run in this process meets the candidate's wrong return value as the worker's
    did: the same type of exception is the same outcome; wrong evidence is not."""
    worker = RemoteError("TypeError", "'NoneType' object is not iterable", "")

    def run(question: str) -> str:
        raise worker

    same = Timed(FakeSandbox([]), lambda: "asked", run, lambda *_: None, raises_here)
    with pytest.raises(ResultsDiffer, match="it raised TypeError"):
        same.cpu_seconds()
    with pytest.raises(AssertionError, match="not done as asked: it shouted") as error:
        shouting(raises_here).cpu_seconds()
    assert not isinstance(error.value, ResultsDiffer)
