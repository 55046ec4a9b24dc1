"""Part 5: the continuous-batching scheduler, on random traces, invariants first.

The scheduler runs on the kit's reference manager (where the kit ships it: its worker holds
stand-ins of `kv_cache_manager.py` and `block_allocator.py`, served by the kit's own worker), so
this part is scored apart from parts 1 and 2.
Each check runs hypothesis-generated traces (`scheduler_trace.traces`: arrivals between steps,
ids in any order relative to arrival, pools from tight to roomy, blocks of 1 to 16 tokens, 1 to 8
seats), after two fixed traces (ids against arrival order; every seat taken), and judges one
rule:

- the contract's invariants, 2 points each: `add_request`'s refusals, every request gets exactly its
  tokens, at most `max_num_seqs` per step, no deadlock, admission in arrival order, the newest
  running request preempted first, no block leaked. All but the preemption rule hold for any
  scheduler that batches continuously and correctly, whatever its preemption policy, so such a
  scheduler keeps 12 of these 14 points; the preemption rule names a wrong victim by itself,
  without the reference (the candidate kit has none);
- the step-by-step trace against the reference scheduler's, 4 points: the contract fixes each step
  exactly, and this check names the first step that differs.

The invariants outweigh the exact trace 7 to 2: a scheduler that is safe and live but decides
differently has most of the part right. Each check judges only its rule, on the steps that ran:
a scheduler that stalls loses the no-deadlock and token checks, not the seats, order or leaks; one
that never schedules anything has nothing to judge and fails them all.
"""

from collections.abc import Callable
from functools import partial
from itertools import zip_longest

import pytest
from hypothesis import example, given

from grader.checks.support.expect import expect, raises, same, succeeds
from grader.checks.support.scheduler_trace import (
    EVERY_SEAT,
    IDS_AGAINST_ARRIVAL,
    LONG_TAILED,
    Kept,
    Run,
    SchedulerTrace,
    Step,
    judged,
    run_steps,
    run_to_the_end,
    run_trace,
    traces,
)
from grader.said import said
from grader.sandbox.process import SubmissionFailure
from grader.sandbox.proxy import Submission
from grader.sandbox.transcript import Transcript

pytestmark = pytest.mark.part("scheduler")

OVER = said("no step: every request was reported finished")


def refused(call: str, what: str) -> str:
    """A refused call, described: "add_request(0, 1, 1), with id 0 running,"."""
    return said("{call}, with {what},", call=call, what=what)


def new_scheduler(submission, num_blocks: int, block_size: int, max_num_seqs: int):
    manager = submission.module("kv_cache_manager").KVCacheManager(num_blocks, block_size, 1)
    return submission.module("scheduler").Scheduler(manager, max_num_seqs)


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_add_request_refuses_what_can_never_run(submission):
    """add_request raises ValueError, and queues nothing, for prompt_len < 1, max_new_tokens < 1,
    an id already known (waiting, running or finished) and a request that could never fit; a
    request that exactly fills the pool is accepted."""
    transcript = submission.transcript
    scheduler = new_scheduler(submission, 4, 4, 2)
    too_long = said(
        "{tokens} tokens, more than {count} blocks of {size} can ever hold",
        tokens=17,
        count=4,
        size=4,
    )
    for prompt_len, max_new_tokens, what in [
        (0, 1, "prompt_len 0"),
        (-1, 1, said("a negative prompt_len")),
        (1, 0, "max_new_tokens 0"),
        (1, -1, said("a negative max_new_tokens")),
        (13, 4, too_long),
    ]:
        call = refused(f"add_request(0, {prompt_len}, {max_new_tokens})", what)
        with raises(transcript, ValueError, call):
            scheduler.add_request(0, prompt_len, max_new_tokens)
    same(
        transcript,
        scheduler.has_unfinished(),
        False,
        said(
            "has_unfinished() must be False after add_request refused every request: a "
            "refused request is not queued"
        ),
        got=f"{transcript.code(scheduler)}.has_unfinished()",
    )
    exactly = said(
        "its {tokens} tokens fill the {count} blocks of {size} exactly", tokens=16, count=4, size=4
    )
    with succeeds("add_request(0, 12, 4)", exactly):
        scheduler.add_request(0, 12, 4)
    scheduler.add_request(1, 1, 1)
    with raises(
        transcript, ValueError, refused("add_request(1, 2, 2)", said("id {id} waiting", id=1))
    ):
        scheduler.add_request(1, 2, 2)
    scheduler.step()  # 0 runs; 1 waits (0's 13 tokens take every block)
    with raises(
        transcript, ValueError, refused("add_request(0, 1, 1)", said("id {id} running", id=0))
    ):
        scheduler.add_request(0, 1, 1)
    outs = [scheduler.step() for _ in range(8)]
    finished = [request_id for out in outs for request_id in out.finished]
    expect(
        transcript,
        sorted(finished) == [0, 1],
        said(
            "requests 0 and 1 must each finish once within 8 more steps (the duplicates "
            "were refused, so nothing else was queued); they finished {finished}",
            finished=finished,
        ),
        got=lambda: f"sorted([{', '.join(f'*{transcript.code(out)}.finished' for out in outs)}])",
        expected="[0, 1]",
    )
    finished = said("id {id} finished", id=0)
    with raises(transcript, ValueError, refused("add_request(0, 1, 1)", finished)):
        scheduler.add_request(0, 1, 1)
    for num_blocks, block_size in [(2, 1), (3, 1), (2, 5), (5, 16)]:
        submission.transcript.reset()
        scheduler = new_scheduler(submission, num_blocks, block_size, 1)
        tokens = num_blocks * block_size
        what = said(
            "{tokens} tokens, more than {count} blocks of {size} can ever hold",
            tokens=tokens + 1,
            count=num_blocks,
            size=block_size,
        )
        with raises(transcript, ValueError, refused(f"add_request(0, {tokens}, 1)", what)):
            scheduler.add_request(0, tokens, 1)
        exactly = said(
            "its {tokens} tokens fill the {count} blocks of {size} exactly",
            tokens=tokens,
            count=num_blocks,
            size=block_size,
        )
        with succeeds(f"add_request(0, {tokens - 1}, 1)", exactly):
            scheduler.add_request(0, tokens - 1, 1)


def for_every_trace(rule: Callable[..., None], *schedulers: Submission) -> None:
    """`rule(*schedulers, trace)` on `IDS_AGAINST_ARRIVAL` and `EVERY_SEAT`, then on the
    profile's number of generated traces; a failure of a generated trace shrinks to a smallest
    trace.

    Every check searches the same traces (one test function, hence one derandomized seed), so
    a trace that breaks several rules is judged by each of them alike, and a scheduler's run of a
    trace that an earlier check ran to its end is judged as it was kept (`judged`).
    """
    rule = partial(judged, rule, schedulers)

    # Hypothesis derives the derandomized seed from this function's source: a change of its
    # text changes every grading's traces.
    @given(trace=traces())
    @example(trace=IDS_AGAINST_ARRIVAL)
    @example(trace=EVERY_SEAT)
    def every_trace(trace: SchedulerTrace) -> None:
        rule(trace)

    every_trace()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_every_request_gets_exactly_its_tokens(submission, record_section):
    """Each request is scheduled in exactly max_new_tokens steps, at most once per step, and is
    reported finished once, in the step of its last token; preempted tokens are not lost."""
    try:
        for_every_trace(every_request_gets_exactly_its_tokens, submission)
    finally:  # once, after the search: the long-tailed trace for the report
        record_scheduling(submission, record_section)


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_at_most_max_num_seqs_per_step(submission):
    """No step schedules more than max_num_seqs requests."""
    for_every_trace(at_most_max_num_seqs_per_step, submission)


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_no_deadlock(submission):
    """Every step with unfinished work gives some request a token, so the trace finishes within
    its bound; has_unfinished() is True before each step that has work (read just after that
    step's arrivals are added) and False once every request has finished."""
    for_every_trace(no_deadlock, submission)


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_admission_in_arrival_order(submission):
    """Requests get their first token in arrival order: first come, first served, and admission
    stops at the first waiting request that does not fit (nobody skips ahead)."""
    for_every_trace(admission_in_arrival_order, submission)


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_preemption_takes_the_newest_running_request(submission):
    """A step that preempts takes the most recently admitted running request first, then the
    next most recent: its `preempted` list is the newest of those running before it, newest
    first."""
    for_every_trace(preemption_takes_the_newest_running_request, submission)


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_no_blocks_leaked(submission):
    """Once every request has finished, every block of the pool is free again."""
    for_every_trace(no_blocks_leaked, submission)


@pytest.mark.points(4)
@pytest.mark.severity("contract")
def check_trace_matches_the_reference(submission, reference):
    """Every step schedules, preempts and finishes exactly what the reference scheduler does
    (the contract's step of part 5: decode oldest first, preempt the newest, admit only without a
    preemption, finish oldest first)."""
    for_every_trace(trace_matches_the_reference, submission, reference)


# -- the rules, each judged on one trace ------------------------------------------------------


def every_request_gets_exactly_its_tokens(
    submission: Submission | Kept, trace: SchedulerTrace
) -> None:
    run, transcript = Run(trace), submission.transcript
    tokens: dict[int, list[int]] = {request_id: [] for request_id in trace.ids}
    for number, step in enumerate(run_steps(submission, run)):
        for request_id in step.scheduled:
            arrived = run.ids_by(number)
            expect(
                transcript,
                request_id in arrived,
                said(
                    "step {step} scheduled request {id}, which was never added",
                    step=number,
                    id=request_id,
                ),
                got=f"[r for r in steps[{number}].scheduled if r not in "
                f"{trace.ids_code(len(arrived))}]",
                expected="[]",
            )
            same(
                transcript,
                step.scheduled.count(request_id),
                1,
                said(
                    "step {step} scheduled request {id} twice ({out}): a request gets at "
                    "most one token per step",
                    step=number,
                    id=request_id,
                    out=step,
                ),
                got=f"steps[{number}].scheduled.count({request_id})",
            )
            tokens[request_id].append(number)
            arrival = trace.arrival(request_id)
            expect(
                transcript,
                len(tokens[request_id]) <= arrival.max_new_tokens,
                said(
                    "step {step} gave request {id} (prompt_len {prompt_len}, "
                    "max_new_tokens {max_new_tokens}) token {token}: more than it asked "
                    "for (a preempted request keeps the tokens it generated, counted "
                    "into its prompt, and is done once it holds them all)",
                    step=number,
                    id=request_id,
                    prompt_len=arrival.prompt_len,
                    max_new_tokens=arrival.max_new_tokens,
                    token=len(tokens[request_id]),
                ),
                got=run.tokens_code(request_id),
                expected=str(arrival.max_new_tokens),
                op="<=",
            )
    stopped = (
        ""
        if run.drained
        else said(" (the trace stopped after {steps} steps)", steps=len(run.steps))
    )
    for arrival in trace.arrivals:
        request_id = arrival.request_id
        got, wanted = len(tokens[request_id]), arrival.max_new_tokens
        expect(
            transcript,
            got == wanted,
            said(
                "request {id} (prompt_len {prompt_len}) got {got} of its max_new_tokens "
                "= {wanted} tokens{stopped}",
                id=request_id,
                prompt_len=arrival.prompt_len,
                got=got,
                wanted=wanted,
                stopped=stopped,
            ),
            got=run.tokens_code(request_id),
            expected=str(wanted),
            before=run_to_the_end(trace),
        )
        finishes = [n for n, step in enumerate(run.steps) if request_id in step.finished]
        last = tokens[request_id][-1]
        expect(
            transcript,
            finishes == [last],
            said(
                "request {id} got its last token in step {step}, so it must be reported "
                "finished in that step and no other, but was in steps {steps}",
                id=request_id,
                step=last,
                steps=finishes,
            ),
            got=f"[n for n, step in enumerate(steps) if {request_id} in step.finished]",
            expected=f"[n for n, step in enumerate(steps) if {request_id} in step.scheduled][-1:]",
            before=run_to_the_end(trace),
        )


def at_most_max_num_seqs_per_step(submission: Submission | Kept, trace: SchedulerTrace) -> None:
    run = Run(trace)
    for number, step in enumerate(run_steps(submission, run)):
        expect(
            submission.transcript,
            len(step.scheduled) <= trace.max_num_seqs,
            said(
                "step {step} scheduled {count} requests ({out}), more than max_num_seqs = {limit}",
                step=number,
                count=len(step.scheduled),
                out=step,
                limit=trace.max_num_seqs,
            ),
            got=f"len(steps[{number}].scheduled)",
            expected=str(trace.max_num_seqs),
            op="<=",
        )
    run.assert_ran(submission.transcript)


def no_deadlock(submission: Submission | Kept, trace: SchedulerTrace) -> None:
    run, transcript = Run(trace), submission.transcript
    tokens = dict.fromkeys(trace.ids, 0)
    finished: set[int] = set()
    for number, step in enumerate(run_steps(submission, run)):
        unfinished = [
            arrival.request_id
            for arrival in trace.arrivals[: run.arrived_by(number)]
            if arrival.request_id not in finished
            and tokens[arrival.request_id] < arrival.max_new_tokens
        ]
        expect(
            transcript,
            bool(step.scheduled or not unfinished),
            said(
                "step {step} gave no request a token while requests {ids} were "
                "unfinished: a step with work to do always makes progress (the oldest "
                "running request fits alone, so preempting newer ones always makes room "
                "for it; with none running, the whole pool is free and the head of the "
                "queue fits)",
                step=number,
                ids=unfinished,
            ),
            got=f"bool(steps[{number}].scheduled)",
            expected=f"bool({unfinished_code(run, number)})",
        )
        for request_id in step.scheduled:
            if request_id in tokens:
                tokens[request_id] += 1
        finished |= set(step.finished)
    for number, answer in run.unfinished_after_adds:
        expect(
            transcript,
            answer is True,
            said(
                "has_unfinished() returned {answer} right after the requests of step "
                "{step} were added: it must be True while any request waits or runs",
                answer=f"{answer!r}",
                step=number,
            ),
            got=lambda number=number: transcript.name(run.asked[number], "unfinished"),
            expected="True",
        )
    everyone = f"set({trace.ids_code()})"
    expect(
        transcript,
        run.drained,
        said(
            "requests {ids} were never reported finished in {steps} steps "
            "(has_unfinished() then said {answer}); a scheduler that follows the "
            "contract finishes this trace within {limit} steps: one idle step per step "
            "before the last arrival, then at least one token per step",
            ids=run.not_finished,
            steps=len(run.steps),
            answer=f"{run.unfinished_at_end!r}",
            limit=trace.max_steps,
        ),
        got=f"sorted({everyone} - {{r for step in steps for r in step.finished}})",
        expected="[]",
        before=run_to_the_end(trace),
    )
    same(
        transcript,
        run.unfinished_at_end,
        False,
        said(
            "has_unfinished() returned {answer} after every request was reported "
            "finished: it must be False once nothing waits or runs",
            answer=f"{run.unfinished_at_end!r}",
        ),
        got="scheduler.has_unfinished()",
    )


def admission_in_arrival_order(submission: Submission | Kept, trace: SchedulerTrace) -> None:
    run = Run(trace)
    admitted: set[int] = set()
    for number, step in enumerate(run_steps(submission, run)):
        for request_id in step.scheduled:
            if request_id not in trace.ids:
                continue  # never added: the token check's failure
            before = trace.ids[: trace.ids.index(request_id)]
            earlier = [r for r in before if r not in admitted]
            first_runs = f"steps[:{number + 1}] for r in step.scheduled"
            expect(
                submission.transcript,
                request_id in admitted or not earlier,
                said(
                    "step {step} admitted request {id} while requests {ids}, which "
                    "arrived before it, had never run: waiting requests are admitted "
                    "first come, first served, and admission stops at the first one that "
                    "does not fit",
                    step=number,
                    id=request_id,
                    ids=earlier,
                ),
                got=f"list(dict.fromkeys(r for step in {first_runs}))",
                expected=f"list({trace.ids_code()})[: len(got)]",
            )
            admitted.add(request_id)
    run.assert_ran(submission.transcript)


def preemption_takes_the_newest_running_request(
    submission: Submission | Kept, trace: SchedulerTrace
) -> None:
    run, running = Run(trace), []  # the running requests, oldest admission first
    for number, step in enumerate(run_steps(submission, run)):
        newest = running[::-1][: len(step.preempted)]
        expect(
            submission.transcript,
            step.preempted == newest,
            said(
                "step {step} preempted {preempted}, but the most recently admitted running "
                "requests were {newest} (running before it, oldest admission first: "
                "{running}): short of blocks, a step preempts the newest running request, "
                "then the next newest, as often as needed",
                step=number,
                preempted=step.preempted,
                newest=newest,
                running=running,
            ),
            got=f"steps[{number}].preempted",
            expected=f"running[::-1][: len(steps[{number}].preempted)]",
            before=running_before(number),
        )
        running = still_running(running, step)
    run.assert_ran(submission.transcript)


def still_running(running: list[int], step: Step) -> list[int]:
    """The running requests after `step`, oldest admission first, from those before it: with
    those it admitted last (scheduled, not running before it), less the preempted and the
    finished."""
    admitted = [request_id for request_id in step.scheduled if request_id not in running]
    gone = {*step.preempted, *step.finished}
    return [request_id for request_id in running + admitted if request_id not in gone]


def running_before(number: int) -> tuple[str, ...]:
    """The counterexample's `still_running` over its first `number` steps: `running`, the
    requests running before step `number`, oldest admission first."""
    return (
        "running = []",
        f"for step in steps[:{number}]:",
        "    admitted = [r for r in step.scheduled if r not in running]",
        "    gone = step.preempted + step.finished",
        "    running = [r for r in running + admitted if r not in gone]",
        "",
    )


def no_blocks_leaked(submission: Submission | Kept, trace: SchedulerTrace) -> None:
    run = run_trace(submission, trace)
    run.assert_ran(submission.transcript)
    if run.drained or run.unfinished_at_end is False:
        expect(
            submission.transcript,
            run.free_at_end == trace.num_blocks,
            said(
                "after every request finished, len(manager.free_blocks) is {free}, not "
                "num_blocks = {num_blocks}: a finished or preempted request's blocks "
                "must all go back to the pool (manager.free)",
                free=run.free_at_end,
                num_blocks=trace.num_blocks,
            ),
            got="len(manager.free_blocks)",
            expected=str(trace.num_blocks),
            before=run_to_the_end(trace),
        )


def trace_matches_the_reference(
    submission: Submission | Kept, reference: Submission | Kept, trace: SchedulerTrace
) -> None:
    steps = zip_longest(run_steps(reference, Run(trace)), run_steps(submission, Run(trace)))
    for number, (want, have) in enumerate(steps):
        fields = "scheduled", "preempted", "finished"
        expect(
            submission.transcript,
            want == have,
            said(
                "step {step} differs from the reference scheduler's:\n  expected: "
                "{expected}\n  got:      {got}",
                step=number,
                expected=want or OVER,
                got=have or OVER,
            ),
            got=f"({', '.join(f'steps[{number}].{field}' for field in fields)})",
            expected=repr(
                tuple(getattr(want, field) for field in fields) if want else ([], [], [])
            ),
            # where the candidate's run ended first, the script makes the step it did not
            before=() if have else ("steps.append(scheduler.step())",),
        )


def unfinished_code(run: Run, number: int) -> str:
    """The requests that have work left just before step `number`, as the counterexample
    computes them from its steps (added by then, never reported finished, short of their
    tokens)."""
    wanted = {arrival.request_id: arrival.max_new_tokens for arrival in run.trace.arrivals}
    return (
        f"[r for r in {run.trace.ids_code(run.arrived_by(number))} if not any(r in step.finished "
        f"for step in steps[:{number}]) and {run.tokens_code('r', number)} < {wanted}[r]]"
    )


def record_scheduling(submission, record_section) -> None:
    """Tokens per step on `LONG_TAILED`, for the report's plot against static batching.

    It never changes this check's verdict: it runs on a transcript of its own (the check's
    counterexample stays as it was), a run that raises records nothing, and a crash or timeout it
    causes is forgotten here (the next call starts a fresh worker; a call that did not return in
    time still counts among the part's, `process.HANGS_PER_PART`).
    """
    sandbox, transcript = submission.sandbox, submission.transcript
    if sandbox.failure is not None:
        return
    submission.transcript = Transcript(transcript.package)
    try:
        run = run_trace(submission, LONG_TAILED)
    except (Exception, SubmissionFailure):
        sandbox.next_check()
        return
    finally:
        submission.transcript = transcript
    record_section(
        "scheduling",
        {
            "trace": LONG_TAILED.as_lists(),
            "num_blocks": LONG_TAILED.num_blocks,
            "block_size": LONG_TAILED.block_size,
            "max_num_seqs": LONG_TAILED.max_num_seqs,
            "tokens_per_step": [len(step.scheduled) for step in run.steps],
            "steps": len(run.steps),
            "drained": run.drained,
        },
    )
