"""Traces for part 5's checks: requests arriving between steps, run through a scheduler.

A `SchedulerTrace` gives each request its id, arrival step, prompt length and token count, over
a pool that fits each request alone (the contract's `add_request` refuses the others). Ids are
any distinct ints, in any order relative to arrival: a scheduler that orders or indexes its
requests by id, where the contract orders them by arrival or admission, is found. `run_trace`
drives a scheduler in a worker through it and keeps what each step reported; the checks then
judge the `Run`. Only public behaviour is observed: the step outputs, `has_unfinished()` and the
pool's free count.

Part 5's checks search the same traces, each judging one rule. A trace's run is kept once a check
has run it to its end (`KEPT`), and the later checks judge the kept run (`judged`): a scheduler
runs each trace about once, not once per rule. A kept run can only pass a rule; a rule it does not
pass is judged again on a live run, which alone fails a check, with the counterexample that run
writes. A kept run stands in only while its worker takes calls as they come: after a call that did
not return in time, or once the budget is spent, every rule is judged live, and refused as before.
A scheduler whose runs depend on what ran before in its worker (state kept between schedulers) is
judged on its first run of each trace.

A scheduler that follows the contract makes progress at every step with work to do: the oldest
running request fits alone, so it is never preempted and gets a token; with nothing running the
whole pool is free and the queue's head fits. Tokens are never lost (a preempted request keeps them
in its prompt), so a trace drains within `SchedulerTrace.max_steps`: one idle step per step before
the last arrival, then at least one token per step.
"""

from collections.abc import Callable, Iterator
from copy import copy
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from hypothesis import strategies as st

from grader.checks.support.expect import expect
from grader.said import Said, said
from grader.sandbox.proxy import Remote, Submission, fields_of_earlier, method, rename
from grader.sandbox.transcript import Line, Transcript
from kernels.reference import cdiv


@dataclass(frozen=True)
class Arrival:
    request_id: int
    step: int  # added just before this step
    prompt_len: int
    max_new_tokens: int


@dataclass(frozen=True)
class SchedulerTrace:
    """Requests in arrival order (distinct ids), over `num_blocks` blocks of `block_size`."""

    arrivals: tuple[Arrival, ...]
    num_blocks: int
    block_size: int
    max_num_seqs: int

    def __post_init__(self) -> None:
        steps = [arrival.step for arrival in self.arrivals]
        if not self.arrivals or steps != sorted(steps) or len(set(self.ids)) != len(self.ids):
            raise ValueError(
                said(
                    "a trace's ids must be distinct and its arrivals in step order: {trace}",
                    trace=f"{self!r}",
                )
            )

    @property
    def ids(self) -> tuple[int, ...]:
        """The request ids in arrival order."""
        return tuple(arrival.request_id for arrival in self.arrivals)

    def arrival(self, request_id: int) -> Arrival:
        """The request with this id; KeyError for an id the trace never adds."""
        for arrival in self.arrivals:
            if arrival.request_id == request_id:
                return arrival
        raise KeyError(request_id)

    def ids_code(self, count: int | None = None) -> str:
        """The first `count` ids (all by default) as a counterexample writes them: a `range`
        where they are 0, 1, ..., else a list."""
        ids = self.ids[:count]
        return f"range({len(ids)})" if ids == tuple(range(len(ids))) else repr(list(ids))

    @property
    def max_steps(self) -> int:
        """The most steps a scheduler that follows the contract needs to finish every request."""
        return self.arrivals[-1].step + sum(arrival.max_new_tokens for arrival in self.arrivals)

    def as_lists(self) -> list[list[int]]:
        """`[arrival_step, prompt_len, max_new_tokens]` per request, for the report."""
        return [[a.step, a.prompt_len, a.max_new_tokens] for a in self.arrivals]


@st.composite
def traces(draw: st.DrawFn) -> SchedulerTrace:
    """1 to 10 requests arriving over steps 0 to 8, with distinct ids from -4 to 99 in any
    order; pools from the tightest (the largest request alone) to roomy (every request at once);
    blocks of 1 to 16 tokens; 1 to 8 seats. Shrinking takes ids towards 0, 1, ... in arrival
    order where the order does not matter."""
    block_size = draw(st.integers(1, 16))
    requests = draw(
        st.lists(
            st.tuples(st.integers(0, 8), st.integers(1, 48), st.integers(1, 24)),
            min_size=1,
            max_size=10,
        )
    )
    requests.sort(key=lambda request: request[0])
    count = len(requests)
    ids = draw(st.lists(st.integers(-4, 99), min_size=count, max_size=count, unique=True))
    arrivals = [Arrival(id_, *request) for id_, request in zip(ids, requests, strict=True)]
    needs = [cdiv(a.prompt_len + a.max_new_tokens, block_size) for a in arrivals]
    tight, roomy = max(needs), sum(needs)
    num_blocks = draw(st.integers(tight, min(roomy, 2 * tight)) | st.integers(tight, roomy))
    return SchedulerTrace(tuple(arrivals), num_blocks, block_size, draw(st.integers(1, 8)))


# A long-tailed workload for the report's tokens-per-step plot: most requests want a few tokens,
# a few want many. Static batching holds a batch's seats until its longest request ends.
LONG_TAILED = SchedulerTrace(
    arrivals=tuple(
        Arrival(request_id, step, prompt_len, max_new_tokens)
        for request_id, (step, prompt_len, max_new_tokens) in enumerate([
            (0, 17, 8), (0, 42, 12), (0, 23, 6), (0, 60, 96), (0, 31, 10), (0, 12, 7),
            (0, 45, 16), (0, 28, 5), (0, 36, 64), (0, 19, 9), (0, 53, 11), (0, 25, 6),
            (0, 40, 14), (0, 16, 8), (0, 48, 48), (0, 33, 10), (8, 22, 12), (8, 57, 6),
            (8, 30, 9), (8, 44, 128), (16, 26, 7), (16, 39, 10), (16, 18, 5), (16, 50, 8),
        ])
    ),
    num_blocks=64,
    block_size=16,
    max_num_seqs=8,
)  # fmt: skip


# Ids against arrival order, tried first by every seed: requests 5, 3 and 4 arrive together and
# are admitted in that order; step 1's decode preempts 4 (the newest, not the highest id), and 5
# and 3 finish together in step 2 (oldest admission first, not the lowest id first).
IDS_AGAINST_ARRIVAL = SchedulerTrace(
    arrivals=(Arrival(5, 0, 1, 3), Arrival(3, 0, 1, 3), Arrival(4, 0, 1, 3)),
    num_blocks=4,
    block_size=2,
    max_num_seqs=3,
)


# Every seat taken: nine requests arrive together in a pool that holds them all, so step 0
# admits eight (the seats, not the blocks, are the limit) and the ninth waits for a seat. A
# scheduler that keeps fewer seats than `max_num_seqs` gives another trace.
EVERY_SEAT = SchedulerTrace(
    arrivals=tuple(Arrival(request_id, 0, 1, 2) for request_id in range(9)),
    num_blocks=9,
    block_size=4,
    max_num_seqs=8,
)


@dataclass(frozen=True)
class Step:
    """What one `step()` reported."""

    scheduled: list[int]
    preempted: list[int]
    finished: list[int]

    def __str__(self) -> str:
        return self.described()

    def described(self) -> Said:
        """What the step did, as a counterexample's comment says it."""
        return said(
            "scheduled {scheduled}, preempted {preempted}, finished {finished}",
            scheduled=self.scheduled,
            preempted=self.preempted,
            finished=self.finished,
        )


@dataclass
class Run:
    """A trace as a scheduler ran it: stopped once every request was reported finished, or at
    `trace.max_steps`."""

    trace: SchedulerTrace
    steps: list[Step] = field(default_factory=list)
    # has_unfinished() right after each step's arrivals were added: (step, answer)
    unfinished_after_adds: list[tuple[int, object]] = field(default_factory=list)
    asked: dict[int, Line] = field(default_factory=dict)  # by step: where that answer was read
    unfinished_at_end: object = None  # has_unfinished() after the last step
    free_at_end: int = 0  # len(manager.free_blocks) after the last step

    @property
    def not_finished(self) -> list[int]:
        """Ids never reported finished."""
        finished = {r for step in self.steps for r in step.finished}
        return [r for r in self.trace.ids if r not in finished]

    @property
    def drained(self) -> bool:
        return not self.not_finished

    def arrived_by(self, step: int) -> int:
        """How many requests were added before `step`."""
        return sum(1 for arrival in self.trace.arrivals if arrival.step <= step)

    def ids_by(self, step: int) -> tuple[int, ...]:
        """The ids of the requests added before `step`, in arrival order."""
        return self.trace.ids[: self.arrived_by(step)]

    def assert_ran(self, transcript: Transcript) -> None:
        """A check of what the steps did needs a step that did something."""
        expect(
            transcript,
            any(step.scheduled for step in self.steps),
            said(
                "no request was scheduled in {steps} steps, so there is nothing to judge "
                "here (see the no-deadlock check)",
                steps=len(self.steps),
            ),
            got="sum(len(step.scheduled) for step in steps)",
            expected="0",
            op="!=",
            before=run_to_the_end(self.trace),
        )

    def tokens_code(self, request_id: int, before: int | None = None) -> str:
        """The tokens request `request_id` got in the counterexample's steps (before step
        `before`)."""
        steps = "steps" if before is None else f"steps[:{before}]"
        return f"sum({request_id} in step.scheduled for step in {steps})"


def run_to_the_end(trace: SchedulerTrace) -> tuple[str, ...]:
    """What a counterexample judging a whole run does first: it steps on until every request
    is reported finished, within the trace's bound (none more where the candidate's run ended:
    an implementation that follows the contract may need more steps than it did)."""
    finished = "{r for step in steps for r in step.finished}"
    return (
        f"while len(steps) < {trace.max_steps} and not {finished} >= set({trace.ids_code()}):",
        "    steps.append(scheduler.step())",
        "",
    )


def request_ids(transcript: Transcript, value: object, what: str, code: str) -> list[int]:
    """A StepOutput field (`code` in the counterexample): a list of request ids."""
    ok = type(value) is list and all(type(item) is int for item in value)
    expect(
        transcript,
        ok,
        said(
            "{what} must be a list of request ids (ints), got {value}",
            what=what,
            value=f"{value!r}",
        ),
        got=f"[type(r).__name__ for r in {code}]"
        if type(value) is list
        else f"type({code}).__name__",
        expected=f"['int'] * len({code})" if type(value) is list else "'list'",
    )
    return value


FIELDS = ("scheduled", "preempted", "finished")


def run_step(submission: Submission, scheduler: Remote, number: int) -> Step:
    """`scheduler.step()`, step `number`, kept in the counterexample's `steps`; its fields read
    quietly, in the same round trip, and shown as a comment on its line."""
    transcript, shown = submission.transcript, f"steps[{number}]"
    reads = submission.batch([method(scheduler, "step"), fields_of_earlier(0, shown, *FIELDS)])
    out = next(reads)
    line = transcript.lines[-1]
    expect(
        transcript,
        isinstance(out, Remote),
        said(
            "scheduler.step() must return a StepOutput (with scheduled, preempted and "
            "finished), got {out}",
            out=f"{out!r}",
        ),
        got=lambda: f"type({transcript.source(out, 'out')}).__name__",
        expected="'StepOutput'",
    )
    line.code = f"steps.append({line.expression})"
    rename(out, shown)
    with transcript.quiet():
        step = Step(*(
            request_ids(transcript, value, f"scheduler.step().{name}", f"{shown}.{name}")
            for name, value in zip(FIELDS, next(reads), strict=True)
        ))  # fmt: skip
    line.outcome = step.described()
    return step


@dataclass(frozen=True)
class Kept:
    """A scheduler's kept run of a trace, standing in for the scheduler: `run_steps` yields its
    steps and makes no call. Its transcript is a blank one for the rule to write a failure in,
    which is then judged again on a live run."""

    run: Run
    transcript: Transcript


# Each scheduler's runs that went to their end, by trace: what its steps and reads returned.
KEPT: WeakKeyDictionary[Submission, dict[SchedulerTrace, Run]] = WeakKeyDictionary()


def judged(
    rule: Callable[..., None], schedulers: tuple[Submission, ...], trace: SchedulerTrace
) -> None:
    """`rule(*schedulers, trace)`, judged on each scheduler's kept run of `trace` where there is
    one and its worker would take calls as they come (a live run would be made, not refused). A
    rule that does not pass on the kept runs (an assertion fails, or another Exception is raised)
    is judged again with every scheduler live, so that only a live run fails a check and its
    counterexample is the one that run writes."""
    kept = [
        KEPT.get(scheduler, {}).get(trace) if scheduler.sandbox.calls_freely() else None
        for scheduler in schedulers
    ]
    if any(run is not None for run in kept):
        stand_ins = [
            scheduler if run is None else Kept(run, Transcript(scheduler.transcript.package))
            for scheduler, run in zip(schedulers, kept, strict=True)
        ]
        try:
            rule(*stand_ins, trace)
            return
        except Exception:  # judged live below, where a failure counts
            pass
    rule(*schedulers, trace)


def replayed(kept: Run, run: Run) -> Iterator[Step]:
    """`kept`'s steps yielded into `run` as `run_steps` yields a live run's."""
    answers = dict(kept.unfinished_after_adds)
    for number, step in enumerate(kept.steps):
        if number in answers:
            run.unfinished_after_adds.append((number, answers[number]))
            run.asked[number] = copy(kept.asked[number])  # a failure may rename it
        run.steps.append(step)
        yield step
    run.unfinished_at_end, run.free_at_end = kept.unfinished_at_end, kept.free_at_end


def run_steps(submission: Submission | Kept, run: Run) -> Iterator[Step]:
    """Run `run.trace` through the submission's `Scheduler` over a fresh `KVCacheManager`,
    yielding each step's report as it comes (kept in `run.steps`), so that a check can stop at
    the first step that breaks its rule. Once the trace is over, `run`'s last fields are read,
    and the run is kept (`KEPT`). Given a `Kept` run, its steps come back instead.

    The transcript holds the run as code: the requests added before their steps (then
    `has_unfinished()`), every step with what it reported, and at the end `has_unfinished()`
    and the free count.
    """
    if isinstance(submission, Kept):
        yield from replayed(submission.run, run)
        return
    trace, transcript = run.trace, submission.transcript
    transcript.reset()
    manager_module = submission.module("kv_cache_manager")
    manager = manager_module.KVCacheManager(trace.num_blocks, trace.block_size, 1)
    scheduler = submission.module("scheduler").Scheduler(manager, trace.max_num_seqs)
    transcript.define("steps = []")
    added, unfinished = 0, set()
    while (added < len(trace.arrivals) or unfinished) and len(run.steps) < trace.max_steps:
        number = len(run.steps)
        arrivals = trace.arrivals[added : run.arrived_by(number)]
        for arrival in arrivals:
            scheduler.add_request(arrival.request_id, arrival.prompt_len, arrival.max_new_tokens)
            unfinished.add(arrival.request_id)
            added += 1
        if arrivals:
            run.unfinished_after_adds.append((number, scheduler.has_unfinished()))
            run.asked[number] = transcript.lines[-1]
        step = run_step(submission, scheduler, number)
        run.steps.append(step)
        unfinished -= set(step.finished)
        yield step
    run.unfinished_at_end = scheduler.has_unfinished()
    run.free_at_end = len(manager.ref("free_blocks"))
    KEPT.setdefault(submission, {})[trace] = run


def run_trace(submission: Submission | Kept, trace: SchedulerTrace) -> Run:
    """`trace` run to its end (see `run_steps`)."""
    run = Run(trace)
    for _ in run_steps(submission, run):
        pass
    return run
