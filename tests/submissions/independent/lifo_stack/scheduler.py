"""Continuous-batching scheduler over a paged KV cache, with preemption by recomputation.

Waiting requests queue in a `collections.deque` (preempted ones re-enter at its head); running
requests sit in a plain list in admission order, so the newest is always the last element.
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
class _Job:
    """Book-keeping for one request across admissions and preemptions."""

    request_id: int
    prompt_len: int
    max_new_tokens: int
    generated: int = 0
    seq: Request | None = None

    def context_len(self) -> int:
        """Tokens that must be (re)computed on admission: the prompt plus tokens made so far."""
        return self.prompt_len + self.generated

    def done(self) -> bool:
        """Whether every requested token has been generated."""
        return self.generated >= self.max_new_tokens


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        """Remember the manager and the seat limit; start with no requests."""
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self._waiting: deque[_Job] = deque()
        self._running: list[_Job] = []
        self._seen_ids: set[int] = set()

    def _blocks_needed(self, num_tokens: int) -> int:
        """Blocks that `num_tokens` tokens occupy in the manager's pool."""
        size = self.manager.block_size
        return (num_tokens + size - 1) // size

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        """Queue a new request at the tail of the waiting queue, after validating it."""
        if prompt_len < 1:
            raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if request_id in self._seen_ids:
            raise ValueError(f"request id {request_id} is already known")
        if self._blocks_needed(prompt_len + max_new_tokens) > self.manager.num_blocks:
            raise ValueError(f"request {request_id} can never fit in the pool")
        self._seen_ids.add(request_id)
        self._waiting.append(_Job(request_id, prompt_len, max_new_tokens))

    def _preempt_newest(self, out: StepOutput) -> _Job:
        """Free the most recently admitted running job and put it at the head of the queue."""
        victim = self._running.pop()
        if victim.seq is not None:
            self.manager.free(victim.seq)
        victim.seq = None
        self._waiting.appendleft(victim)
        out.preempted.append(victim.request_id)
        return victim

    def _decode_running(self, out: StepOutput) -> None:
        """Give each running job one token, oldest first, preempting the newest when short."""
        index = 0
        while index < len(self._running):
            job = self._running[index]
            while True:
                try:
                    self.manager.allocate_for_decode(job.seq)
                except RuntimeError:
                    if self._preempt_newest(out) is job:
                        break
                    continue
                job.generated += 1
                out.scheduled.append(job.request_id)
                index += 1
                break

    def _admit_waiting(self, out: StepOutput) -> None:
        """Admit queued jobs in order while seats and free blocks allow."""
        while self._waiting and len(self._running) < self.max_num_seqs:
            job = self._waiting[0]
            context = job.context_len()
            if len(self.manager.free_blocks) < self._blocks_needed(context + 1):
                break
            seq = Request(job.request_id, context)
            try:
                self.manager.allocate_for_prefill(seq)
            except RuntimeError:
                break
            try:
                self.manager.allocate_for_decode(seq)
            except RuntimeError:
                self.manager.free(seq)
                break
            self._waiting.popleft()
            job.seq = seq
            job.generated += 1
            self._running.append(job)
            out.scheduled.append(job.request_id)

    def _retire_finished(self, out: StepOutput) -> None:
        """Free the jobs that have all their tokens, oldest admission first."""
        still_running: list[_Job] = []
        for job in self._running:
            if job.done():
                if job.seq is not None:
                    self.manager.free(job.seq)
                job.seq = None
                out.finished.append(job.request_id)
            else:
                still_running.append(job)
        self._running = still_running

    def step(self) -> StepOutput:
        """One iteration: decode, then admit (only if nothing was preempted), then finish."""
        out = StepOutput()
        self._decode_running(out)
        if not out.preempted:
            self._admit_waiting(out)
        self._retire_finished(out)
        return out

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        return bool(self._waiting) or bool(self._running)
