"""Part 5's kept runs (`scheduler_trace.KEPT`, `judged`): a scheduler runs a trace to its end once,
and a later rule judges what it returned without driving the scheduler again; a rule that does not
pass on a kept run is judged again on a live run, whose transcript the failure is written in.

The answer key's scheduler runs in a worker, counting its steps: the count shows which judgements
drove it.
"""

import time
from collections.abc import Iterator

import pytest

from grader.checks.support.expect import expect
from grader.checks.support.scheduler_trace import (
    KEPT,
    Arrival,
    Kept,
    Run,
    SchedulerTrace,
    judged,
    run_steps,
    run_trace,
)
from grader.sandbox import isolation
from grader.sandbox.process import Limits, Sandbox
from grader.sandbox.proxy import Submission
from tests.grading import SOLUTIONS

COUNTING = b"""

STEPS = [0]
_step = Scheduler.step


def counted_step(self):
    STEPS[0] += 1
    return _step(self)


Scheduler.step = counted_step


def steps_taken():
    return STEPS[0]
"""
# Three requests over a pool too small for the first two as they grow: one is preempted.
TRACE = SchedulerTrace((Arrival(0, 5, 3), Arrival(0, 7, 4), Arrival(1, 3, 6)), 4, 4, 2)
CUT_SHORT = SchedulerTrace((Arrival(0, 2, 5),), 2, 4, 1)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"this test needs a sandbox: {found.reason} (make test installs bubblewrap)")
    files = {name: (SOLUTIONS / name).read_bytes()
             for name in ("block_allocator.py", "kv_cache_manager.py")}  # fmt: skip
    files["scheduler.py"] = (SOLUTIONS / "scheduler.py").read_bytes() + COUNTING
    limits = Limits(memory_bytes=4 << 30, call_seconds=600.0, import_seconds=600.0)
    made = Sandbox(files, limits, {}, time.monotonic() + 1200, found)
    yield made
    made.close()


def steps_taken(submission: Submission) -> int:
    return submission.module("scheduler").steps_taken()


def same_run(one: Run, other: Run) -> bool:
    """The same steps and reads, each read at the same code."""
    fields = "steps", "unfinished_after_adds", "unfinished_at_end", "free_at_end"
    asked = [{number: line.code for number, line in run.asked.items()} for run in (one, other)]
    return asked[0] == asked[1] and all(getattr(one, name) == getattr(other, name)
                                        for name in fields)  # fmt: skip


def test_a_rule_judges_a_kept_run_without_driving_the_scheduler(sandbox: Sandbox) -> None:
    submission = Submission(sandbox, "candidate")
    run = run_trace(submission, TRACE)
    taken = steps_taken(submission)
    assert run.steps
    assert run.unfinished_after_adds
    assert any(step.preempted for step in run.steps)
    assert KEPT[submission][TRACE] is run
    judgements: list[tuple[object, Run]] = []

    def rule(scheduler: Submission | Kept, trace: SchedulerTrace) -> None:
        judgements.append((scheduler, run_trace(scheduler, trace)))

    judged(rule, (submission,), TRACE)
    assert steps_taken(submission) == taken
    [(scheduler, judged_run)] = judgements
    assert isinstance(scheduler, Kept)
    assert scheduler.transcript is not submission.transcript
    assert same_run(judged_run, run)
    assert judged_run is not run
    assert judged_run.asked == run.asked  # the lines of the kept run's transcript


def test_a_rule_that_fails_on_the_kept_run_fails_on_a_live_one(sandbox: Sandbox) -> None:
    submission = Submission(sandbox, "candidate")
    run = run_trace(submission, TRACE)
    taken = steps_taken(submission)
    judgements: list[object] = []

    def fails(scheduler: Submission | Kept, trace: SchedulerTrace) -> None:
        judgements.append(scheduler)
        for _ in run_steps(scheduler, Run(trace)):
            expect(scheduler.transcript, False, "the first step fails", got="1", expected="2")

    with pytest.raises(AssertionError, match="the first step fails"):
        judged(fails, (submission,), TRACE)
    assert [type(scheduler) for scheduler in judgements] == [Kept, Submission]
    assert steps_taken(submission) == taken + 1  # live, to its first step
    assert "got = 1\nexpected = 2\n" in submission.transcript.render()
    assert KEPT[submission][TRACE] is run  # a run cut short is not kept


def test_each_scheduler_is_judged_on_its_own_kept_run_or_live(sandbox: Sandbox) -> None:
    kept, fresh = Submission(sandbox, "candidate"), Submission(sandbox, "candidate")
    run = run_trace(kept, TRACE)
    taken = steps_taken(kept)
    judgements: list[tuple[type, type]] = []

    def both(one: Submission | Kept, other: Submission | Kept, trace: SchedulerTrace) -> None:
        judgements.append((type(one), type(other)))
        assert same_run(run_trace(one, trace), run_trace(other, trace))

    judged(both, (kept, fresh), TRACE)
    assert judgements == [(Kept, Submission)]
    assert steps_taken(kept) == taken + len(run.steps)  # the fresh one's run, live
    assert fresh in KEPT
    assert TRACE in KEPT[fresh]


def test_a_run_cut_short_is_not_kept_and_a_trace_without_one_runs_live(sandbox: Sandbox) -> None:
    submission = Submission(sandbox, "candidate")
    next(run_steps(submission, Run(CUT_SHORT)))
    assert CUT_SHORT not in KEPT.get(submission, {})
    judgements: list[type] = []
    judged(lambda scheduler, trace: judgements.append(type(scheduler)), (submission,), CUT_SHORT)
    assert judgements == [Submission]
