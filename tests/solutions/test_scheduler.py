"""The answer key's part 5: hand-written traces with every step's exact output, `add_request`'s
errors, and random traces checked against exercises/README.md's invariants.

Requests are observed through public behaviour only: the step outputs, `has_unfinished()`, the
pool's free count, and a spy manager that records what the scheduler asked of it.
"""

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import example, given

from grader.checks.scheduler import running_before, still_running
from grader.checks.support.scheduler_trace import IDS_AGAINST_ARRIVAL, traces
from grader.checks.support.scheduler_trace import SchedulerTrace as Trace
from solutions.kv_cache_manager import KVCacheManager, Request
from solutions.scheduler import Scheduler, StepOutput


class SpyManager(KVCacheManager):
    """The reference manager, recording `(request_id, seq_len)` at each prefill and each free."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size, head_dim=1)
        self.prefills: list[tuple[int, int]] = []
        self.frees: list[tuple[int, int]] = []

    def allocate_for_prefill(self, req: Request) -> None:
        super().allocate_for_prefill(req)
        self.prefills.append((req.request_id, req.seq_len))

    def free(self, req: Request) -> None:
        super().free(req)
        self.frees.append((req.request_id, req.seq_len))


def new_scheduler(
    num_blocks: int, block_size: int, max_num_seqs: int, *requests: tuple[int, int]
) -> Scheduler:
    """A scheduler over a fresh spy pool, with `requests` (prompt_len, max_new_tokens) queued
    as ids 0, 1, 2, ..."""
    scheduler = Scheduler(SpyManager(num_blocks, block_size), max_num_seqs)
    for request_id, (prompt_len, max_new_tokens) in enumerate(requests):
        scheduler.add_request(request_id, prompt_len, max_new_tokens)
    return scheduler


def assert_steps(scheduler: Scheduler, *expected: tuple[list[int], list[int], list[int]]) -> None:
    """The next steps' outputs are exactly `expected`, as (scheduled, preempted, finished)."""
    for number, (scheduled, preempted, finished) in enumerate(expected):
        assert scheduler.step() == StepOutput(scheduled, preempted, finished), f"step {number}"


def assert_drained(scheduler: Scheduler) -> None:
    """Nothing is left to run, and every block is back in the pool."""
    assert not scheduler.has_unfinished()
    assert len(scheduler.manager.free_blocks) == scheduler.manager.num_blocks
    assert scheduler.step() == StepOutput()


# Hand-written traces -----------------------------------------------------------------------


def test_roomy_pool_runs_everyone_together() -> None:
    """64 blocks of 4: nobody waits for blocks; a late arrival joins at the next step."""
    scheduler = new_scheduler(64, 4, 4, (3, 2), (5, 3))
    assert scheduler.has_unfinished()
    assert_steps(scheduler, ([0, 1], [], []))  # both admitted, with their first tokens
    scheduler.add_request(2, 2, 1)
    assert_steps(
        scheduler,
        ([0, 1, 2], [], [0, 2]),  # 0 gets its 2nd and last token; 2 is admitted and done
        ([1], [], [1]),
    )
    assert_drained(scheduler)


def test_tight_pool_preempts_and_recomputes() -> None:
    """4 blocks of 2. Request 1 runs out of room at its 2nd token, is preempted while 0
    finishes, and comes back recomputed with the token it had generated in its prompt."""
    scheduler = new_scheduler(4, 2, 4, (3, 3), (1, 4))
    assert_steps(
        scheduler,
        ([0, 1], [], []),  # 0: seq 4 in 2 blocks; 1: seq 2 in 1 block; 1 block free
        ([0], [1], []),  # 0 takes the last block (seq 5); 1 needs one, none left: preempted
        ([0], [], [0]),  # no admission: 1 needs 2 blocks for 3 tokens, 1 is free
        ([1], [], []),  # 1 is recomputed: prefill of 2 tokens, then its 2nd token
        ([1], [], []),
        ([1], [], [1]),  # 1 + 4 tokens
    )
    assert_drained(scheduler)
    assert scheduler.manager.prefills == [(0, 3), (1, 1), (1, 2)]
    assert scheduler.manager.frees == [(1, 2), (0, 6), (1, 5)]


def test_preempted_requests_return_to_the_head_of_the_queue_in_order() -> None:
    """Block size 1, 8 blocks, four requests of 1 + 2 tokens filling the pool. Request 0 makes
    room by preempting 3; request 2 finds none and is itself the newest, so it is preempted
    and its decode ends there. 2 and 3 then wait ahead of any later arrival, 2 first."""
    scheduler = new_scheduler(8, 1, 4, (1, 2), (1, 2), (1, 2), (1, 2))
    assert_steps(
        scheduler,
        ([0, 1, 2, 3], [], []),  # 2 blocks each: the pool is full
        ([0, 1], [3, 2], [0, 1]),
    )
    scheduler.add_request(4, 1, 1)
    assert_steps(scheduler, ([2, 3, 4], [], [2, 3, 4]))
    assert_drained(scheduler)
    assert scheduler.manager.prefills[4:] == [(2, 2), (3, 2), (4, 1)]


def test_a_preemption_blocks_admission_for_the_step() -> None:
    """Block size 1, 6 blocks: 0 preempts 2, then 1 (not the decoding one), over two steps;
    the queue holds 1 ahead of 2, and admission waits for the step after the last preemption."""
    scheduler = new_scheduler(6, 1, 3, (1, 3), (1, 3), (1, 2))
    assert_steps(
        scheduler,
        ([0, 1, 2], [], []),  # 2 blocks each: the pool is full
        ([0, 1], [2], []),  # 0 preempts 2 and takes one of its blocks, 1 the other
        ([0], [1], [0]),  # 0 preempts 1 for its last token; no admission in this step
        ([1], [], [1]),  # 1 recomputed (3 tokens) and done; 2 needs 3 blocks, 2 are free
        ([2], [], [2]),
    )
    assert_drained(scheduler)


def test_max_num_seqs_limits_admission() -> None:
    """2 seats: request 2 waits, and a seat freed in a step's finish is taken at the next."""
    scheduler = new_scheduler(64, 4, 2, (2, 3), (2, 3), (2, 3))
    assert_steps(
        scheduler,
        ([0, 1], [], []),
        ([0, 1], [], []),
        ([0, 1], [], [0, 1]),
        ([2], [], []),
        ([2], [], []),
        ([2], [], [2]),
    )
    assert_drained(scheduler)


def test_admission_stops_at_the_first_request_that_does_not_fit() -> None:
    """4 blocks of 4. Request 0 takes 3; request 1 needs 3 of the 1 left, so request 2, which
    needs 1, waits behind it: no skipping ahead."""
    scheduler = new_scheduler(4, 4, 4, (8, 4), (8, 1), (1, 1))
    assert_steps(
        scheduler,
        ([0], [], []),
        ([0], [], []),
        ([0], [], []),
        ([0], [], [0]),  # 0 is freed after the admission phase: 1 still waits
        ([1, 2], [], [1, 2]),
    )
    assert_drained(scheduler)


def test_a_single_token_request_finishes_in_its_admission_step() -> None:
    scheduler = new_scheduler(2, 4, 1, (5, 1))
    assert_steps(scheduler, ([0], [], [0]))
    assert_drained(scheduler)
    assert scheduler.manager.frees == [(0, 6)]


def test_an_idle_scheduler_steps_to_nothing() -> None:
    scheduler = new_scheduler(1, 1, 1)
    assert not scheduler.has_unfinished()
    assert_drained(scheduler)


# add_request's errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt_len", "max_new_tokens"),
    [(0, 1), (-1, 1), (1, 0), (1, -1), (3, 6)],  # (3, 6): 9 tokens, more than 2 blocks of 4
)
def test_bad_requests_are_refused_and_not_queued(prompt_len: int, max_new_tokens: int) -> None:
    scheduler = new_scheduler(2, 4, 1)
    with pytest.raises(ValueError):
        scheduler.add_request(0, prompt_len, max_new_tokens)
    assert not scheduler.has_unfinished()
    scheduler.add_request(0, 3, 5)  # the id is still free, and 8 tokens fit exactly
    assert_steps(scheduler, *[([0], [], [])] * 4, ([0], [], [0]))
    assert_drained(scheduler)


def test_known_ids_are_refused_waiting_running_or_finished() -> None:
    """After two steps with 1 seat: 0 has finished, 1 runs, 2 waits. Re-adding any of them
    is refused and changes nothing: the trace goes on as before."""
    scheduler = new_scheduler(8, 4, 1, (1, 1), (1, 3), (1, 1))
    assert_steps(scheduler, ([0], [], [0]), ([1], [], []))
    for request_id in (0, 1, 2):
        with pytest.raises(ValueError):
            scheduler.add_request(request_id, 1, 1)
    assert_steps(scheduler, ([1], [], []), ([1], [], [1]), ([2], [], [2]))
    assert_drained(scheduler)


def test_max_num_seqs_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        Scheduler(SpyManager(4, 4), 0)


# Random traces ------------------------------------------------------------------------------


def run(trace: Trace) -> tuple[Scheduler, list[StepOutput]]:
    """Add each request before its arrival step and step until drained; every step with work
    to do must give some request a token, so the trace ends within `sum(max_new_tokens)` busy
    steps after the last arrival (no deadlock)."""
    scheduler = Scheduler(SpyManager(trace.num_blocks, trace.block_size), trace.max_num_seqs)
    bound = trace.arrivals[-1].step + sum(a.max_new_tokens for a in trace.arrivals) + 1
    outputs: list[StepOutput] = []
    added = 0
    while added < len(trace.arrivals) or scheduler.has_unfinished():
        assert len(outputs) < bound, "the trace did not drain: deadlock or livelock"
        while added < len(trace.arrivals) and trace.arrivals[added].step == len(outputs):
            arrival = trace.arrivals[added]
            scheduler.add_request(arrival.request_id, arrival.prompt_len, arrival.max_new_tokens)
            added += 1
        busy = scheduler.has_unfinished()
        outputs.append(scheduler.step())
        assert outputs[-1].scheduled or not busy, f"step {len(outputs) - 1} made no progress"
    return scheduler, outputs


def check_steps(trace: Trace, outputs: list[StepOutput]) -> None:
    """Replays the running set from the outputs alone. In each step every running request
    either gets a token or is preempted; the admitted come after the decoded, only in a step
    without preemption, and never beyond the seats."""
    running: list[int] = []
    for number, out in enumerate(outputs):
        decoded = [r for r in out.scheduled if r in running]
        admitted = out.scheduled[len(decoded) :]
        assert out.scheduled[: len(decoded)] == decoded, f"step {number}: admitted before decoded"
        assert sorted(decoded + out.preempted) == sorted(running), f"step {number}"
        assert not (out.preempted and admitted), f"step {number}: admitted after a preemption"
        assert len(out.scheduled) <= trace.max_num_seqs
        running = [r for r in running if r not in out.preempted] + admitted
        assert len(running) <= trace.max_num_seqs
        assert set(out.finished) <= set(running), f"step {number}: finished a non-running id"
        running = [r for r in running if r not in out.finished]
        # running + waiting stays in arrival order, so each list is in it:
        arrived = trace.ids.index
        assert out.scheduled == sorted(out.scheduled, key=arrived)
        assert out.preempted == sorted(out.preempted, key=arrived, reverse=True)  # newest first
        assert out.finished == sorted(out.finished, key=arrived)


def check_tokens(trace: Trace, outputs: list[StepOutput], manager: SpyManager) -> None:
    """Each request gets exactly `max_new_tokens` tokens, ends with `prompt_len + max_new_tokens`
    in the cache, and finishes once, in the step of its last token. A preempted request is
    prefilled again with every token it held when preempted."""
    tokens = Counter(r for out in outputs for r in out.scheduled)
    assert tokens == {a.request_id: a.max_new_tokens for a in trace.arrivals}
    finished = [r for out in outputs for r in out.finished]
    assert sorted(finished) == sorted(trace.ids)
    for arrival in trace.arrivals:
        request_id = arrival.request_id
        last_token = max(n for n, out in enumerate(outputs) if request_id in out.scheduled)
        assert request_id in outputs[last_token].finished
        prefills = [seq_len for r, seq_len in manager.prefills if r == request_id]
        frees = [seq_len for r, seq_len in manager.frees if r == request_id]
        assert prefills == [arrival.prompt_len, *frees[:-1]]
        assert frees[-1] == arrival.prompt_len + arrival.max_new_tokens


def check_preempted_reappear(outputs: list[StepOutput]) -> None:
    """Every preempted request gets a token again in a later step."""
    for number, out in enumerate(outputs):
        for request_id in out.preempted:
            assert any(request_id in later.scheduled for later in outputs[number + 1 :])


def check_first_admissions_in_arrival_order(trace: Trace, outputs: list[StepOutput]) -> None:
    first_admissions = list(dict.fromkeys(r for out in outputs for r in out.scheduled))
    assert first_admissions == list(trace.ids)


@given(traces())
def test_random_traces_keep_the_invariants(trace: Trace) -> None:
    scheduler, outputs = run(trace)
    check_steps(trace, outputs)
    check_tokens(trace, outputs, scheduler.manager)
    check_preempted_reappear(outputs)
    check_first_admissions_in_arrival_order(trace, outputs)
    assert len(scheduler.manager.free_blocks) == trace.num_blocks, "blocks leaked"


def running_before_each_step(trace: Trace) -> tuple[list[list[int]], list[StepOutput]]:
    """`run`'s steps, and the ids the answer key's scheduler ran before each, oldest admission
    first (its own `running` list)."""
    scheduler = Scheduler(SpyManager(trace.num_blocks, trace.block_size), trace.max_num_seqs)
    running, outputs, added = [], [], 0
    while added < len(trace.arrivals) or scheduler.has_unfinished():
        while added < len(trace.arrivals) and trace.arrivals[added].step == len(outputs):
            arrival = trace.arrivals[added]
            scheduler.add_request(arrival.request_id, arrival.prompt_len, arrival.max_new_tokens)
            added += 1
        running.append([req.request_id for req in scheduler.running])
        outputs.append(scheduler.step())
    return running, outputs


@given(traces())
@example(replace(IDS_AGAINST_ARRIVAL, num_blocks=3))  # a step that preempts two, newest first
def test_the_preemption_rules_replay_is_the_answer_keys_running_list(trace: Trace) -> None:
    """`scheduler.still_running`, and the code a counterexample replays it with, give the
    running requests of a scheduler that follows the contract before each step; each step
    preempts the newest of them, newest first."""
    running, outputs = running_before_each_step(trace)
    replayed: list[int] = []
    for number, out in enumerate(outputs):
        assert replayed == running[number], f"step {number}"
        names = {"steps": outputs}
        exec("\n".join(running_before(number)), names)
        assert names["running"] == running[number], f"step {number}: the counterexample's"
        assert out.preempted == replayed[::-1][: len(out.preempted)], f"step {number}"
        replayed = still_running(replayed, out)
