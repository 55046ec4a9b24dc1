"""Timing a candidate against the reference in the same run, as a ratio, never as a time.

What is measured is each worker's CPU time, not the wall clock: the grading process reads it
from the kernel (`Sandbox.cpu_seconds`), so the worker cannot forge it, and other work on the
machine (`grade-all`'s parallel gradings, a busy CI host) moves it far less than it stretches
wall-clock times (caches and shared cores still move it a little). A call is charged from the
end of its worker's previous timed call, so work a worker defers to the gaps between calls (a
background thread while the reference is timed) is charged too. Where the CPU time cannot be
read (no Linux /proc), the wall clock stands in.

A time counts only with evidence that the work was done as asked: what a call asks for (the
sizes of the allocations, the block tables, the weights of the sums) is drawn in this process for
that very call, and the pool it works on when the pool is made; the call returns what the work
yields (the ids handed out, weighted sums over the rows gathered), which this process checks
against what it asked (`Timed`). A workload the worker replaced by one that did other work, on
other sizes, or remembered an earlier answer where the answer hangs on what the call asked,
fails its check: "the timed work was not done as asked". (On part 7's mostly empty pool only the
chain of each request is drawn: an answer remembered per chain passes, and only the flag on an
implausibly fast candidate stands between a worker that skips the work and the points.) Evidence
that differs from the contract is told apart from work not done as asked by the candidate's own
methods: the same call made again on the same state from this process, one call of theirs at a
time, untimed (`Timed.again`). Where that gives the same evidence, the work was done as asked and
its results are the code's own: the check fails with `ResultsDiffer`, which the grading leaves
ungraded where a check of the part that times nothing fails too (`grade.not_timed`).

Each round runs every measured call once, one after the other, interleaved so that drift
(frequency scaling, caches) hits all alike, and in the same order every round, so that each
worker's call follows the same calls of its own each time; pytest-benchmark drives the rounds up
to the first decision. The least CPU time of each over the rounds is kept, the least disturbed
one. A verdict that fails is confirmed before it stands: the rounds are run again and each call
keeps its least time over both (`time_confirmed`). A verdict that passes by far is not measured
further: where, after a third of the rounds (`rounds_before_clear`), every ratio is within half
its limit and no candidate call is near implausibly fast (`clearly_passes`), the measurement
stops there; a ratio nearer its limit, or over it, gets every round. More rounds would have
turned such a pass into a failure only where the least times moved by a factor 2 in the
reference's favour after the first third, and into a flag for an implausibly fast candidate only
where the candidate's least time fell by half: no honest candidate fails for the rounds not run.
Where a round costs more than `ROUND_SECONDS` of CPU, a measurement runs only as many rounds as
that pays for, never fewer than `MIN_ROUNDS` (`affordable`): the reference's rounds cost
hundredths of a second, so only a candidate tens of times slower gets there (an eviction that
scans 100,000 cached blocks: its check took 51 s, not 282, with the same verdict). The report's
timing table shows these very CPU times.

Every timing check ends in the same verdict (`judge_ratio`): its benchmark recorded for the report
whatever the outcome, then a candidate implausibly faster than the reference flagged and not
rewarded, then its ratio held to the check's limit. A check that times a workload in several
states of its pool (nearly full, nearly empty) names its calls "<call>, <state>" (`by_state`)
and is judged on the state whose ratio is the highest (`judge_states`), every state's benchmark
recorded.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grader.said import said
from grader.sandbox.process import CPU_TIME_READABLE, Sandbox
from grader.sandbox.proxy import RemoteError

# A candidate this much faster than the reference is flagged for review and not rewarded: the
# reference is no straw man, and the timed loop runs in the candidate's own process.
IMPLAUSIBLE_SPEEDUP = 10.0

# The CPU seconds a measurement may spend per round the profile asks for, and the fewest rounds
# it runs however slow they are (`affordable`).
ROUND_SECONDS = 1.0
MIN_ROUNDS = 3
# A measurement stops early where its verdict passes by CLEAR_MARGIN: every ratio at most its
# limit / CLEAR_MARGIN, no candidate call within CLEAR_MARGIN of implausibly fast
# (`clearly_passes`).
CLEAR_MARGIN = 2.0

# `record_benchmark(name, candidate_seconds, reference_seconds, ratio, limit)`: the fixture that
# puts a timing in the report (`grader.scoring.fixtures`).
RecordBenchmark = Callable[[str, float, float, float, float], None]


class ResultsDiffer(AssertionError):
    """A timed call whose evidence differs from the contract's (`misstep` says how), where the
    candidate's methods, called one by one from this process on the same state, give the same:
    the work was done as asked, and its results are the code's own."""

    def __init__(self, misstep: str) -> None:
        super().__init__(said("its results differ from the contract: {misstep}", misstep=misstep))
        self.misstep = misstep


@dataclass(frozen=True)
class Timed:
    """One whole workload in a worker, timed by its sandbox. `ask()` draws what a call asks for,
    afresh each time (in this process: nothing the worker can prepare); `run(asked)` is the
    worker call, the only part timed, which returns evidence of its work; `verify(asked,
    evidence)` checks that evidence here: what is wrong with it (its counterexample written),
    or None. `again(asked)`, where given, makes the same call again on the same state made
    afresh, untimed, out of the counterexample, each of the workload's calls of the candidate's
    methods made from this process: the evidence their code gives (`gives_again`)."""

    sandbox: Sandbox
    ask: Callable[[], Any]
    run: Callable[[Any], Any]
    verify: Callable[[Any, Any], str | None]
    again: Callable[[Any], Any] | None = None

    def cpu_seconds(self) -> float:
        """Run the workload once; the CPU time the worker's processes spent since the end of its
        previous timed call (the wall-clock time of the call where CPU time is not readable).
        Wrong evidence, or an exception from the candidate's code, that their methods give
        again (`gives_again`) are their results (`ResultsDiffer`); any other is work not done as
        asked."""
        asked = self.ask()
        try:
            evidence, seconds = self.timed_run(asked)
        except RemoteError as error:
            if not error.candidates:  # the answer key's worker: the grader's own failure
                raise
            raised = said("it raised {error}", error=error)
            if self.gives_again(asked, error):
                raise ResultsDiffer(raised) from error
            raise AssertionError(
                said("the timed work was not done as asked: {misstep}", misstep=raised)
            ) from error
        misstep = self.verify(asked, evidence)
        if misstep is None:
            return seconds
        if self.gives_again(asked, evidence):
            raise ResultsDiffer(misstep)
        raise AssertionError(
            said("the timed work was not done as asked: {misstep}", misstep=misstep)
        )

    def timed_run(self, asked: Any) -> tuple[Any, float]:
        """The worker call's evidence, and its CPU seconds."""
        if not CPU_TIME_READABLE:
            started = time.perf_counter()
            evidence = self.run(asked)
            return evidence, time.perf_counter() - started
        before = self.sandbox.cpu_mark
        if before is None:
            before = self.sandbox.cpu_seconds()
        evidence = self.run(asked)
        self.sandbox.cpu_mark = self.sandbox.cpu_seconds()
        return evidence, self.sandbox.cpu_mark - before

    def gives_again(self, asked: Any, outcome: Any) -> bool:
        """Whether `again` gives `outcome`, what the worker call gave for `asked`: the same
        evidence, or an exception of the same type from the candidate's code. Not where the
        call cannot be made again, or the methods give anything else."""
        if self.again is None:
            return False
        try:
            evidence = self.again(asked)
        except RemoteError as error:  # raised in the worker
            return isinstance(outcome, RemoteError) and error.type_name == outcome.type_name
        except AssertionError:  # what made the state again found it wrong
            return False
        except Exception as error:  # the workload, run here, on what the methods returned
            return isinstance(outcome, RemoteError) and type(error).__name__ == outcome.type_name
        return not isinstance(outcome, RemoteError) and evidence == outcome


def fresh(calls: dict[str, Timed]) -> dict[str, Timed]:
    """`calls`, charged from now on: the setup calls made before do not count."""
    for timed in calls.values():
        timed.sandbox.cpu_mark = None
    return calls


def implausible(ratio: float) -> bool:
    """Whether `ratio` (candidate / reference) is over `IMPLAUSIBLE_SPEEDUP` times in the
    candidate's favour: flagged for review, never rewarded."""
    return ratio * IMPLAUSIBLE_SPEEDUP < 1


def assert_plausible(ratio: float, what: str) -> None:
    """`ratio` (candidate / reference) must not be implausibly small."""
    assert not implausible(ratio), said(
        "{what} ran {speedup}x faster than the reference's, which is not plausible: "
        "flagged for review, not rewarded",
        what=what,
        speedup=f"{1 / ratio:.0f}",
    )


def judge_ratio(
    record_benchmark: RecordBenchmark,
    name: str,
    seconds: tuple[float, float],
    limit: float,
    what: str,
    too_slow: Callable[[float], str],
) -> None:
    """A timing check's verdict on benchmark `name`: the candidate's and the reference's
    `seconds`, their ratio against `limit`. The benchmark is recorded first, whatever the
    verdict; then the check fails if the candidate ran implausibly faster than the reference
    (`what` names the workload), else if the ratio is over `limit`, with `too_slow(ratio)` as
    its message."""
    candidate, reference = seconds
    ratio = candidate / reference
    record_benchmark(name, candidate, reference, ratio, limit)
    assert_plausible(ratio, what)
    assert ratio <= limit, too_slow(ratio)


@dataclass(frozen=True)
class StateTiming:
    """A check's figures in one state of its pool: its benchmark's `name`, the candidate's and
    the reference's `seconds`, and the `ratio` held to the check's limit."""

    name: str
    seconds: tuple[float, float]
    ratio: float

    @property
    def speed(self) -> float:
        """The candidate's seconds over the reference's."""
        return self.seconds[0] / self.seconds[1]


def judge_states(
    record_benchmark: RecordBenchmark,
    timings: dict[str, StateTiming],
    limit: float,
    what: str,
    too_slow: Callable[[str, float], str],
) -> None:
    """`judge_ratio`'s verdict over the states of `timings`: every state's benchmark recorded, in
    order, whatever the verdict; then the check fails if the candidate ran implausibly faster
    than the reference in any state, else if the state whose ratio is the highest is over
    `limit`, with `too_slow(state, ratio)` as its message."""
    for timing in timings.values():
        candidate, reference = timing.seconds
        record_benchmark(timing.name, candidate, reference, timing.ratio, limit)
    for timing in timings.values():
        assert_plausible(timing.speed, what)
    worst = worst_state(timings)
    assert timings[worst].ratio <= limit, too_slow(worst, timings[worst].ratio)


def by_state(best: dict[str, float]) -> dict[str, dict[str, float]]:
    """`best`, its calls named "<call>, <state>", as {state: {call: seconds}}."""
    states: dict[str, dict[str, float]] = {}
    for name, seconds in best.items():
        call, _, state = name.rpartition(", ")
        states.setdefault(state, {})[call] = seconds
    return states


def growth_calls(
    state: str, candidate: tuple[Timed, Timed], reference: tuple[Timed, Timed]
) -> dict[str, Timed]:
    """A growth check's calls in `state` (each pair: on the small pool, on the large one), named
    for `time_states`: each worker's small call, then its large one, the same every round, so
    that neither follows other calls of its own than the other's does."""
    return {
        f"candidate small, {state}": candidate[0],
        f"reference small, {state}": reference[0],
        f"candidate large, {state}": candidate[1],
        f"reference large, {state}": reference[1],
    }


def time_states(
    benchmark: Any,
    calls: dict[str, Timed],
    rounds: int,
    ratio: Callable[[dict[str, float]], float],
    limit: float,
) -> dict[str, dict[str, float]]:
    """`time_confirmed` of `calls`, named "<call>, <state>", a failing verdict where `ratio` of
    any state's times is over `limit`, a clear one where every state's `clearly_passes`: each
    state's least seconds (`by_state`)."""

    def fails(best: dict[str, float]) -> bool:
        return any(ratio(times) > limit for times in by_state(best).values())

    def clear(best: dict[str, float]) -> bool:
        return all(clearly_passes(times, ratio, limit) for times in by_state(best).values())

    return by_state(time_confirmed(benchmark, calls, rounds, fails, clear))


def state_timings(
    best: dict[str, dict[str, float]],
    name: Callable[[str], str],
    ratio: Callable[[dict[str, float]], float],
    pool: str = "",
) -> dict[str, StateTiming]:
    """Each state's figures in `best` (`time_states`): its benchmark `name(state)`, the
    candidate's and the reference's seconds on their `pool` ("large"; "" where each has one)
    and `ratio` of its times."""
    candidate, reference = (f"{who} {pool}".strip() for who in ("candidate", "reference"))
    return {
        state: StateTiming(name(state), (times[candidate], times[reference]), ratio(times))
        for state, times in best.items()
    }


def any_implausible(timings: dict[str, StateTiming]) -> bool:
    """Whether the candidate ran implausibly fast in any state: `judge_states` flags it, and no
    counterexample may say otherwise."""
    return any(implausible(timing.speed) for timing in timings.values())


def worst_state(timings: dict[str, StateTiming]) -> str:
    """The state whose ratio is the highest: the one a check is judged on."""
    return max(timings, key=lambda state: timings[state].ratio)


def one_round(calls: dict[str, Timed]) -> dict[str, float]:
    """CPU seconds of one call of each of `calls`, in their order."""
    return {name: timed.cpu_seconds() for name, timed in calls.items()}


def least(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each call's least seconds over `rounds`."""
    return {name: min(seconds[name] for seconds in rounds) for name in rounds[0]}


def affordable(rounds: int, round_seconds: float) -> int:
    """How many of `rounds` a measurement runs when a round costs `round_seconds` of CPU: all of
    them where that is within `ROUND_SECONDS`, else as many as `rounds * ROUND_SECONDS` pays for,
    but at least `MIN_ROUNDS` (and never more than `rounds`)."""
    paid_for = int(rounds * ROUND_SECONDS / round_seconds) if round_seconds > 0 else rounds
    return min(rounds, max(MIN_ROUNDS, paid_for))


def rounds_before_clear(rounds: int) -> int:
    """How many of `rounds` a measurement runs before it may stop as a clear pass: a third of
    them, at least `MIN_ROUNDS`."""
    return max(MIN_ROUNDS, rounds // 3)


def clearly_passes(
    best: dict[str, float], ratio: Callable[[dict[str, float]], float], limit: float
) -> bool:
    """Whether `best` (least seconds of calls named "candidate..." and "reference...") passes by
    `CLEAR_MARGIN`: `ratio` of them at most `limit / CLEAR_MARGIN`, and each candidate call at
    least `CLEAR_MARGIN / IMPLAUSIBLE_SPEEDUP` of its reference call's time (stricter than the
    flag, which holds only the judged calls to it)."""
    if ratio(best) > limit / CLEAR_MARGIN:
        return False
    pairs = [(seconds, best["reference" + name.removeprefix("candidate")])
             for name, seconds in best.items() if name.startswith("candidate")]  # fmt: skip
    return all(candidate * IMPLAUSIBLE_SPEEDUP >= CLEAR_MARGIN * reference
               for candidate, reference in pairs)  # fmt: skip


def time_interleaved(
    benchmark: Any,
    calls: dict[str, Timed],
    rounds: int,
    clear: Callable[[dict[str, float]], bool] | None = None,
) -> dict[str, float]:
    """The least CPU seconds per call of each of `calls`, over the `affordable` part of `rounds`
    interleaved rounds after one warm-up round: the first, which prices them (past the first
    calls' one-off costs), then the others, driven by pytest-benchmark up to
    `rounds_before_clear`, where the measurement stops if `clear` says its least seconds pass by
    far, and in a plain loop after that."""
    one_round(fresh(calls))  # the warm-up
    measured = [one_round(calls)]
    planned = affordable(rounds, sum(measured[0].values()))
    first = planned if clear is None else min(planned, rounds_before_clear(rounds))
    if first > 1:
        benchmark.pedantic(lambda: measured.append(one_round(calls)), rounds=first - 1)
    best = least(measured)
    if first == planned or (clear is not None and clear(best)):
        return best
    return least([best, *(one_round(calls) for _ in range(planned - first))])


def time_confirmed(
    benchmark: Any,
    calls: dict[str, Timed],
    rounds: int,
    fails: Callable[[dict[str, float]], bool],
    clear: Callable[[dict[str, float]], bool] | None = None,
) -> dict[str, float]:
    """`time_interleaved` (its rounds cut short where `clear`); where its figures `fails` the
    check, the rounds once more (those `affordable`) and each call's least time over both: a
    failing verdict stands only if it is measured twice."""
    best = time_interleaved(benchmark, calls, rounds, clear)
    if not fails(best):
        return best
    again = affordable(rounds, sum(best.values()))
    return least([best, *(one_round(calls) for _ in range(again))])


def time_once(calls: dict[str, Timed]) -> dict[str, float]:
    """CPU seconds of one call of each (a probe before the real measurement)."""
    return one_round(fresh(calls))


def confirmed_probe(probes: dict[str, Timed], limit: float) -> dict[str, float]:
    """One round of `probes` ("c" the candidate's call, "r" the reference's), measured once more
    where "c" took over `limit` times "r": like every failing verdict, a hopeless probe stands
    only if it is measured twice (each call's least time)."""
    probe = time_once(probes)
    if probe["c"] > limit * probe["r"]:
        probe = least([probe, time_once(probes)])
    return probe


def speed_ratio(best: dict[str, float]) -> float:
    """The candidate's time over the reference's."""
    return best["candidate"] / best["reference"]


def growths(best: dict[str, float]) -> dict[str, float]:
    """The candidate's and the reference's cost growth from the small pool to the large one."""
    return {who: best[f"{who} large"] / best[f"{who} small"] for who in ("candidate", "reference")}


def growth_ratio(best: dict[str, float]) -> float:
    """The candidate's cost growth from the small pool to the large one, over the reference's."""
    growth = growths(best)
    return growth["candidate"] / growth["reference"]
