"""Serving modelled by counting tokens and blocks, and static batching, the baseline.

A trace is a list of `(arrival_step, prompt_len, max_new_tokens)`, request ids being positions
in it; a request arriving at step `t` is queued just before step `t`, as in the grader. A step
gives each running request one token (a request admitted in it gets its prefill and its first
token), and a request is done after `max_new_tokens` tokens. `serve` runs a trace through a
`Server` until it drains.

Static batching (`static_batching`): when no batch runs, the waiting requests are taken first
come, first served while seats remain and their worst case (`prompt_len + max_new_tokens`, in
blocks) fits in the pool; the batch then runs until its longest request ends, its finished
requests keeping their seats and slots, and only then does the next start. The report plots a
candidate's scheduler against it; `simulate.py` adds the continuous-batching schemes (it is left
out of the candidate bundle: its paged server is Part 5's scheduler in another form).
"""

from collections import deque
from dataclasses import dataclass

from kernels.reference import cdiv

Arrivals = list[tuple[int, int, int]]  # (arrival_step, prompt_len, max_new_tokens); id = position


@dataclass(slots=True)
class Step:
    """What one step did, and the memory as sampled in it (before the finished are freed).

    `running`: requests holding a seat and memory; `used`: slots holding tokens; `held`: slots
    reserved or allocated; `waiting`: requests that arrived and wait; `recomputed`: the tokens
    the preempted requests held, to be prefilled again.
    """

    scheduled: list[int]
    preempted: list[int]
    finished: list[int]
    running: int = 0
    used: int = 0
    held: int = 0
    waiting: int = 0
    recomputed: int = 0


@dataclass(slots=True)
class Seq:
    """A request. Waiting, `seq_len` is the prompt its prefill will hold (after a preemption,
    with the tokens it had generated); running, the tokens it holds."""

    request_id: int
    seq_len: int
    final_len: int
    need: int  # what it needs of the pool in all: Server.need()
    start: int = 0  # contiguous reservation only: its first slot


class Server:
    """A waiting queue (head first) and a running list (admission order), refusing requests
    that could never fit; `step()` is each scheme's own."""

    def __init__(self, capacity: int, max_num_seqs: int) -> None:
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        self.capacity = capacity  # what need() is measured against
        self.max_num_seqs = max_num_seqs
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []

    def need(self, prompt_len: int, max_new_tokens: int) -> int:
        """What a request needs of the pool in all, in the pool's unit (blocks, or slots)."""
        raise NotImplementedError

    def add(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        if prompt_len < 1 or max_new_tokens < 1:
            raise ValueError(
                f"request {request_id}: prompt_len and max_new_tokens must be >= 1, "
                f"got {prompt_len}, {max_new_tokens}"
            )
        need = self.need(prompt_len, max_new_tokens)
        if need > self.capacity:
            raise ValueError(
                f"request {request_id} needs {need} of a pool of {self.capacity}: it could "
                "never run; make the pool larger or the request shorter"
            )
        self.waiting.append(Seq(request_id, prompt_len, prompt_len + max_new_tokens, need))

    def busy(self) -> bool:
        return bool(self.waiting or self.running)

    def sample(self, out: Step, held: int, used: int | None = None) -> Step:
        """Fill in the memory figures of `out`; `used` defaults to the running requests' tokens."""
        out.running = len(self.running)
        out.used = sum(seq.seq_len for seq in self.running) if used is None else used
        out.held = held
        out.waiting = len(self.waiting)
        return out

    def step(self) -> Step:
        raise NotImplementedError


class Blocked(Server):
    """A server over a pool of `num_blocks` blocks of `block_size` slots."""

    def __init__(self, num_blocks: int, block_size: int, max_num_seqs: int) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        super().__init__(num_blocks, max_num_seqs)
        self.block_size = block_size

    def need(self, prompt_len: int, max_new_tokens: int) -> int:
        return cdiv(prompt_len + max_new_tokens, self.block_size)


class Static(Blocked):
    """Static batching: each batch reserves its requests' worst case and runs until its
    longest request ends."""

    def step(self) -> Step:
        out = Step([], [], [])
        if not self.running:
            blocks = 0
            while self.waiting and len(self.running) < self.max_num_seqs:
                if blocks + self.waiting[0].need > self.capacity:
                    break
                blocks += self.waiting[0].need
                self.running.append(self.waiting.popleft())
        generating = [seq for seq in self.running if seq.seq_len < seq.final_len]
        for seq in generating:
            seq.seq_len += 1
            out.scheduled.append(seq.request_id)
            if seq.seq_len == seq.final_len:
                out.finished.append(seq.request_id)
        # A finished request's slots stay held until the batch ends, but hold no token in use.
        held = sum(seq.need for seq in self.running) * self.block_size
        self.sample(out, held, used=sum(seq.seq_len for seq in generating))
        if all(seq.seq_len == seq.final_len for seq in self.running):
            self.running = []  # the batch is over: its seats and slots come back
        return out


def serve(trace: Arrivals, server: Server) -> list[Step]:
    """Run `trace` through `server` until it drains: one `Step` per step, idle ones included."""
    for request_id, (arrival, _, _) in enumerate(trace):
        if arrival < 0:
            raise ValueError(f"request {request_id} arrives at step {arrival}: steps start at 0")
    order = sorted(range(len(trace)), key=lambda request_id: trace[request_id][0])
    # Every busy step gives some request a token (see the reference scheduler's docstring).
    bound = max((arrival for arrival, _, _ in trace), default=0) + sum(n for *_, n in trace) + 1
    steps: list[Step] = []
    added = 0
    while added < len(order) or server.busy():
        while added < len(order) and trace[order[added]][0] <= len(steps):
            server.add(order[added], *trace[order[added]][1:])
            added += 1
        steps.append(server.step())
        if len(steps) > bound:
            raise RuntimeError(f"{type(server).__name__} did not drain within {bound} steps")
    return steps


def static_batching(
    trace: Arrivals, num_blocks: int, block_size: int, max_num_seqs: int
) -> list[Step]:
    """Serve `trace` by static batching (see the module docstring), step by step."""
    return serve(trace, Static(num_blocks, block_size, max_num_seqs))
