"""Continuous-batching scheduler: a min-heap of waiting requests keyed by arrival number."""

import heapq
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


@dataclass(order=True)
class _Job:
    """A request's bookkeeping; jobs order by arrival number only."""

    arrival: int
    request_id: int = field(compare=False)
    prompt_len: int = field(compare=False)
    max_new_tokens: int = field(compare=False)
    generated: int = field(default=0, compare=False)
    req: Request | None = field(default=None, compare=False, repr=False)

    @property
    def context_len(self) -> int:
        """Prompt to (re)compute on admission: the original prompt plus tokens generated."""
        return self.prompt_len + self.generated

    @property
    def done(self) -> bool:
        return self.generated >= self.max_new_tokens


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time.

    Waiting jobs sit in a heap ordered by arrival. Admission is first come, first served and a
    preempted job is always the newest running one, so the job to put back always arrived
    before every job still waiting: its original arrival number puts it at the head again.
    """

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self._waiting: list[_Job] = []
        self._running: list[_Job] = []  # admission order, newest last
        self._known: set[int] = set()
        self._arrivals = 0

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        if prompt_len < 1:
            raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if request_id in self._known:
            raise ValueError(f"request id {request_id} is already known")
        need = _ceil_div(prompt_len + max_new_tokens, self.manager.block_size)
        if need > self.manager.num_blocks:
            raise ValueError(
                f"request {request_id} needs {need} blocks, the pool has {self.manager.num_blocks}"
            )
        self._known.add(request_id)
        heapq.heappush(self._waiting, _Job(self._arrivals, request_id, prompt_len, max_new_tokens))
        self._arrivals += 1

    def _preempt_newest(self, out: StepOutput) -> _Job:
        job = self._running.pop()
        self.manager.free(job.req)
        job.req = None
        heapq.heappush(self._waiting, job)
        out.preempted.append(job.request_id)
        return job

    def _decode_running(self, out: StepOutput) -> None:
        i = 0
        while i < len(self._running):
            job = self._running[i]
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

    def _admit_waiting(self, out: StepOutput) -> None:
        size = self.manager.block_size
        while self._waiting and len(self._running) < self.max_num_seqs:
            job = self._waiting[0]
            if len(self.manager.free_blocks) < _ceil_div(job.context_len + 1, size):
                break
            heapq.heappop(self._waiting)
            job.req = Request(job.request_id, job.context_len)
            self.manager.allocate_for_prefill(job.req)
            self.manager.allocate_for_decode(job.req)
            job.generated += 1
            self._running.append(job)
            out.scheduled.append(job.request_id)

    def _retire_finished(self, out: StepOutput) -> None:
        still = []
        for job in self._running:
            if job.done:
                self.manager.free(job.req)
                job.req = None
                out.finished.append(job.request_id)
            else:
                still.append(job)
        self._running = still

    def step(self) -> StepOutput:
        out = StepOutput()
        self._decode_running(out)
        if not out.preempted:
            self._admit_waiting(out)
        self._retire_finished(out)
        return out

    def has_unfinished(self) -> bool:
        return bool(self._waiting or self._running)
