"""Part 5's kept runs (`scheduler_trace.KEPT`, `judged`): a scheduler runs a trace to its end once,
and a later rule judges what it returned without driving the scheduler again; a rule that does not
pass on a kept run is judged again on a live run, whose transcript the failure is written in.

A plain scheduler runs in a worker, counting its steps: the count shows which judgements drove it.
(These tests ship in the candidate kit, which has no answer key: the scheduler is this file's.)
"""

import time
from collections.abc import Iterator

import pytest

from grader.checks.scheduler import for_every_trace
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

MANAGER = b"""
class KVCacheManager:
    def __init__(self, num_blocks, block_size, head_dim):
        self.free_blocks = list(range(num_blocks))
"""
# Each step gives a token to the oldest unfinished requests, as many as there are seats, and
# reports the others preempted: not the contract's policy, but deterministic, which is all a kept
# run assumes.
SCHEDULER = b"""
STEPS = [0]


class StepOutput:
    def __init__(self, scheduled, preempted, finished):
        self.scheduled, self.preempted, self.finished = scheduled, preempted, finished


class Scheduler:
    def __init__(self, manager, max_num_seqs):
        self.max_num_seqs, self.tokens_left = max_num_seqs, {}

    def add_request(self, request_id, prompt_len, max_new_tokens):
        self.tokens_left[request_id] = max_new_tokens

    def has_unfinished(self):
        return bool(self.tokens_left)

    def step(self):
        STEPS[0] += 1
        ids = list(self.tokens_left)
        scheduled, preempted = ids[: self.max_num_seqs], ids[self.max_num_seqs :]
        for request_id in scheduled:
            self.tokens_left[request_id] -= 1
        finished = [request_id for request_id in scheduled if not self.tokens_left[request_id]]
        for request_id in finished:
            del self.tokens_left[request_id]
        return StepOutput(scheduled, preempted, finished)


def steps_taken():
    return STEPS[0]
"""
# Three requests for two seats: the third waits, reported preempted, until a seat is free.
TRACE = SchedulerTrace((Arrival(0, 0, 5, 3), Arrival(1, 0, 7, 4), Arrival(2, 1, 3, 6)), 4, 4, 2)
CUT_SHORT = SchedulerTrace((Arrival(0, 0, 2, 5),), 2, 4, 1)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"this test needs a sandbox: {found.reason} (make test installs bubblewrap)")
    files = {"kv_cache_manager.py": MANAGER, "scheduler.py": SCHEDULER}
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
    # copies of the kept run's lines (same_run compared their code): a failure may rename them
    assert all(judged_run.asked[number] is not run.asked[number] for number in run.asked)


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


def test_a_kept_run_stands_in_only_where_the_worker_would_take_the_calls() -> None:
    """After a call that did not return in time, or once the budget is spent, a live run's calls
    would be refused: the rule is judged live, to be refused as before."""
    found = isolation.probe("auto")
    limits = Limits(memory_bytes=4 << 30, call_seconds=600.0, import_seconds=600.0)
    own = Sandbox({"kv_cache_manager.py": MANAGER, "scheduler.py": SCHEDULER}, limits, {},
                  time.monotonic() + 1200, found)  # fmt: skip
    try:
        submission = Submission(own, "candidate")
        run_trace(submission, TRACE)
        judgements: list[type] = []

        def rule(scheduler: Submission | Kept, trace: SchedulerTrace) -> None:
            judgements.append(type(scheduler))

        judged(rule, (submission,), TRACE)
        own.hung.add(("call", "Scheduler", None, None, "step", (), ()))
        judged(rule, (submission,), TRACE)
        own.hung.clear()
        own.part_deadline = time.monotonic() - 1
        judged(rule, (submission,), TRACE)
        assert judgements == [Kept, Submission, Submission]
    finally:
        own.close()


def test_each_check_after_the_first_judges_the_runs_it_kept(sandbox: Sandbox) -> None:
    submission = Submission(sandbox, "candidate")
    judgements: list[type] = []

    def rule(scheduler: Submission | Kept, trace: SchedulerTrace) -> None:
        judgements.append(type(scheduler))
        run_trace(scheduler, trace)

    for_every_trace(rule, submission)
    taken, first = steps_taken(submission), len(judgements)
    for_every_trace(rule, submission)
    assert steps_taken(submission) == taken
    assert Submission in judgements[:first]  # (hypothesis may try a trace twice)
    assert judgements[first:] == [Kept] * first  # the same traces, each judged as it was kept
