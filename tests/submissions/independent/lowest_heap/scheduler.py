"""Continuous batching over a paged KV cache, as plain functions over a small state object.

`Scheduler` only holds the state and forwards each call to a module-level function: the
decode, admit and finish phases are separate functions so each reads on its own. Running
entries sit in a list in admission order (newest last); waiting ones in a deque in arrival
order, with preempted entries pushed back onto its front.
"""

from collections import deque
from dataclasses import dataclass, field

from .kv_cache_manager import KVCacheManager, Request


@dataclass
class StepOutput:
    """What one `step()` did. Given: keep as is.

    `scheduled`: ids that got a token in this step, in the order they got it;
    `preempted`: ids preempted in this step, in order; `finished`: ids that reached
    `max_new_tokens` in this step and were freed, oldest admission first.
    """

    scheduled: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)


@dataclass
class _Entry:
    """One request's bookkeeping across preemptions."""

    request_id: int
    prompt_len: int
    max_new_tokens: int
    generated: int = 0
    live: Request | None = None


@dataclass
class _State:
    manager: KVCacheManager
    max_num_seqs: int
    waiting: deque = field(default_factory=deque)
    running: list = field(default_factory=list)
    seen: set = field(default_factory=set)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _context_len(entry: _Entry) -> int:
    """Tokens a (re)admitted request starts with: its prompt plus what it already generated."""
    return entry.prompt_len + entry.generated


def _done(entry: _Entry) -> bool:
    return entry.generated >= entry.max_new_tokens


def enqueue(state: _State, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
    """Validate a new request and append it to the waiting queue."""
    if prompt_len < 1:
        raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if request_id in state.seen:
        raise ValueError(f"request id {request_id} was already added")
    manager = state.manager
    if _ceil_div(prompt_len + max_new_tokens, manager.block_size) > manager.num_blocks:
        raise ValueError(f"request {request_id} could never fit in {manager.num_blocks} blocks")
    state.seen.add(request_id)
    state.waiting.append(_Entry(request_id, prompt_len, max_new_tokens))


def _preempt_newest(state: _State, out: StepOutput) -> _Entry:
    """Free the most recently admitted running request and put it first in line."""
    victim = state.running.pop()
    state.manager.free(victim.live)
    victim.live = None
    state.waiting.appendleft(victim)
    out.preempted.append(victim.request_id)
    return victim


def decode_phase(state: _State, out: StepOutput) -> None:
    """One token for every running request, oldest first, preempting the newest on OOM."""
    index = 0
    while index < len(state.running):
        entry = state.running[index]
        while True:
            try:
                state.manager.allocate_for_decode(entry.live)
            except RuntimeError:
                if _preempt_newest(state, out) is entry:
                    break
                continue
            entry.generated += 1
            out.scheduled.append(entry.request_id)
            index += 1
            break


def admit_phase(state: _State, out: StepOutput) -> None:
    """Seat waiting requests in order while there is room, stopping at the first that won't fit."""
    manager = state.manager
    while state.waiting and len(state.running) < state.max_num_seqs:
        entry = state.waiting[0]
        context = _context_len(entry)
        if len(manager.free_blocks) < _ceil_div(context + 1, manager.block_size):
            return
        state.waiting.popleft()
        req = Request(entry.request_id, context)
        manager.allocate_for_prefill(req)
        manager.allocate_for_decode(req)
        entry.live = req
        entry.generated += 1
        state.running.append(entry)
        out.scheduled.append(entry.request_id)


def finish_phase(state: _State, out: StepOutput) -> None:
    """Free every running request that has all its tokens, oldest admission first."""
    still_running = []
    for entry in state.running:
        if _done(entry):
            state.manager.free(entry.live)
            entry.live = None
            out.finished.append(entry.request_id)
        else:
            still_running.append(entry)
    state.running = still_running


def run_step(state: _State) -> StepOutput:
    out = StepOutput()
    decode_phase(state, out)
    if not out.preempted:
        admit_phase(state, out)
    finish_phase(state, out)
    return out


def pending(state: _State) -> bool:
    return bool(state.waiting) or bool(state.running)


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self._state = _State(manager, max_num_seqs)

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        enqueue(self._state, request_id, prompt_len, max_new_tokens)

    def step(self) -> StepOutput:
        return run_step(self._state)

    def has_unfinished(self) -> bool:
        return pending(self._state)
