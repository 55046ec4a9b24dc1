"""Continuous-batching scheduler with preemption by recomputation.

Every request gets an arrival ticket (a strictly increasing counter). Both the waiting list and
the running list are kept sorted by ticket with `bisect.insort`. That is the same order the
statement asks for: admission is first come, first served, so every running request arrived
before every waiting one; the newest running request therefore has the smallest ticket when
preempted, and putting it back by ticket puts it at the head of the waiting list.
"""

import bisect
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


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Job:
    """Bookkeeping for one request across preemptions."""

    def __init__(self, ticket: int, request_id: int, prompt_len: int, max_new_tokens: int):
        self.ticket = ticket
        self.request_id = request_id
        self.prompt_len = prompt_len
        self.max_new_tokens = max_new_tokens
        self.generated = 0  # tokens produced so far; survives preemption
        self.req: Request | None = None  # set only while running

    def context_len(self) -> int:
        """The prompt a (re)admission must prefill: original prompt plus generated tokens."""
        return self.prompt_len + self.generated

    def done(self) -> bool:
        return self.generated >= self.max_new_tokens


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self._next_ticket = 0
        self._jobs: dict[int, _Job] = {}  # every id ever accepted, finished ones included
        self._by_ticket: dict[int, _Job] = {}
        # Both lists hold tickets, ascending. running[-1] is the newest admission,
        # waiting[0] the head of the queue.
        self._waiting: list[int] = []
        self._running: list[int] = []

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        if prompt_len < 1:
            raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if request_id in self._jobs:
            raise ValueError(f"request id {request_id} is already known")
        blocks = _ceil_div(prompt_len + max_new_tokens, self.manager.block_size)
        if blocks > self.manager.num_blocks:
            raise ValueError(
                f"request {request_id} needs {blocks} blocks, the pool has "
                f"{self.manager.num_blocks}"
            )
        job = _Job(self._next_ticket, request_id, prompt_len, max_new_tokens)
        self._next_ticket += 1
        self._jobs[request_id] = job
        self._by_ticket[job.ticket] = job
        bisect.insort(self._waiting, job.ticket)

    def _preempt_newest(self, out: StepOutput) -> _Job:
        ticket = self._running.pop()
        job = self._by_ticket[ticket]
        self.manager.free(job.req)
        job.req = None
        bisect.insort(self._waiting, ticket)  # lands at index 0, see the module docstring
        out.preempted.append(job.request_id)
        return job

    def step(self) -> StepOutput:
        out = StepOutput()

        # 1. Decode, oldest admission first. The list may shrink from its end while we walk.
        i = 0
        while i < len(self._running):
            job = self._by_ticket[self._running[i]]
            while True:
                try:
                    self.manager.allocate_for_decode(job.req)
                except RuntimeError:
                    if self._preempt_newest(out) is job:
                        break
                    continue
                job.generated += 1
                out.scheduled.append(job.request_id)
                break
            i += 1

        # 2. Admit, only in a step without preemption, first come first served.
        if not out.preempted:
            while self._waiting and len(self._running) < self.max_num_seqs:
                job = self._by_ticket[self._waiting[0]]
                need = _ceil_div(job.context_len() + 1, self.manager.block_size)
                if len(self.manager.free_blocks) < need:
                    break
                del self._waiting[0]
                req = Request(job.request_id, job.context_len())
                self.manager.allocate_for_prefill(req)
                self.manager.allocate_for_decode(req)
                job.req = req
                job.generated += 1
                bisect.insort(self._running, job.ticket)
                out.scheduled.append(job.request_id)

        # 3. Finish, oldest admission first (running is in ticket order).
        still: list[int] = []
        for ticket in self._running:
            job = self._by_ticket[ticket]
            if job.done():
                self.manager.free(job.req)
                job.req = None
                out.finished.append(job.request_id)
            else:
                still.append(ticket)
        self._running = still
        return out

    def has_unfinished(self) -> bool:
        return bool(self._waiting) or bool(self._running)
