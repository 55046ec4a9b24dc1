"""Continuous batching over a paged KV cache.

Each request moves through a tiny state machine, WAITING -> RUNNING -> FINISHED, with
preemption sending a RUNNING request back to the head of the waiting queue. `step()` runs three
phases, one method each: decode the running requests, admit waiting ones, retire finished ones.
"""

from collections import deque
from dataclasses import dataclass, field
from enum import Enum, auto

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


class Phase(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


@dataclass(eq=False)
class Job:
    """The scheduler's record of one request across preemptions."""

    request_id: int
    prompt_len: int
    max_new_tokens: int
    generated: int = 0
    phase: Phase = Phase.WAITING
    seq: Request | None = None

    @property
    def context_len(self) -> int:
        """Tokens to prefill on (re)admission: the prompt plus whatever was generated."""
        return self.prompt_len + self.generated

    @property
    def done(self) -> bool:
        return self.generated >= self.max_new_tokens


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self.jobs: dict[int, Job] = {}
        self.waiting: deque[Job] = deque()
        self.running: list[Job] = []  # admission order, newest last

    # -- public interface ------------------------------------------------------------------

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        if prompt_len < 1:
            raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if request_id in self.jobs:
            raise ValueError(f"request id {request_id} is already known")
        blocks = _ceil_div(prompt_len + max_new_tokens, self.manager.block_size)
        if blocks > self.manager.num_blocks:
            raise ValueError(
                f"request {request_id} needs {blocks} blocks, the pool has "
                f"{self.manager.num_blocks}"
            )
        job = Job(request_id, prompt_len, max_new_tokens)
        self.jobs[request_id] = job
        self.waiting.append(job)

    def step(self) -> StepOutput:
        out = StepOutput()
        self._decode_phase(out)
        if not out.preempted:
            self._admit_phase(out)
        self._finish_phase(out)
        return out

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # -- transitions -----------------------------------------------------------------------

    def _start(self, job: Job) -> None:
        """WAITING -> RUNNING: prefill the whole context, then take the first new token."""
        job.seq = Request(job.request_id, job.context_len)
        self.manager.allocate_for_prefill(job.seq)
        job.phase = Phase.RUNNING
        self.running.append(job)

    def _preempt(self, job: Job) -> None:
        """RUNNING -> WAITING (at the head of the queue), dropping its cache."""
        self.manager.free(job.seq)
        job.seq = None
        job.phase = Phase.WAITING
        self.running.remove(job)
        self.waiting.appendleft(job)

    def _retire(self, job: Job) -> None:
        """RUNNING -> FINISHED."""
        self.manager.free(job.seq)
        job.seq = None
        job.phase = Phase.FINISHED

    def _grow(self, job: Job, out: StepOutput) -> None:
        self.manager.allocate_for_decode(job.seq)
        job.generated += 1
        out.scheduled.append(job.request_id)

    # -- the three phases of a step --------------------------------------------------------

    def _decode_phase(self, out: StepOutput) -> None:
        for job in list(self.running):
            while job.phase is Phase.RUNNING:
                try:
                    self._grow(job, out)
                    break
                except RuntimeError:
                    victim = self.running[-1]
                    self._preempt(victim)
                    out.preempted.append(victim.request_id)

    def _fits(self, job: Job) -> bool:
        need = _ceil_div(job.context_len + 1, self.manager.block_size)
        return len(self.manager.free_blocks) >= need

    def _admit_phase(self, out: StepOutput) -> None:
        while self.waiting and len(self.running) < self.max_num_seqs:
            job = self.waiting[0]
            if not self._fits(job):
                break
            self.waiting.popleft()
            self._start(job)
            self._grow(job, out)

    def _finish_phase(self, out: StepOutput) -> None:
        still_running = []
        for job in self.running:
            if job.done:
                self._retire(job)
                out.finished.append(job.request_id)
            else:
                still_running.append(job)
        self.running = still_running
