"""Continuous-batching scheduler with recompute-style preemption.

Each request carries an explicit state (WAITING, RUNNING or FINISHED). The running ones sit in a
list in admission order (newest last), the waiting ones in a deque (next to admit on the left).
"""

import collections
import enum
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


class State(enum.Enum):
    WAITING = 1
    RUNNING = 2
    FINISHED = 3


class Entry:
    """Book-keeping for one request across preemptions."""

    def __init__(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        self.request_id = request_id
        self.prompt_len = prompt_len
        self.max_new_tokens = max_new_tokens
        self.generated = 0
        self.state = State.WAITING
        self.req: Request | None = None

    def context_len(self) -> int:
        """Tokens to prefill on (re)admission: the prompt plus whatever was generated."""
        return self.prompt_len + self.generated

    def done(self) -> bool:
        return self.generated >= self.max_new_tokens


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self.entries: dict[int, Entry] = {}
        self.waiting: collections.deque[Entry] = collections.deque()
        self.running: list[Entry] = []

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        if prompt_len < 1:
            raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if request_id in self.entries:
            raise ValueError(f"request id {request_id} is already known")
        need = ceil_div(prompt_len + max_new_tokens, self.manager.block_size)
        if need > self.manager.num_blocks:
            raise ValueError(
                f"request {request_id} needs {need} blocks, the pool has {self.manager.num_blocks}"
            )
        e = Entry(request_id, prompt_len, max_new_tokens)
        self.entries[request_id] = e
        self.waiting.append(e)

    def _preempt_newest(self, out: StepOutput) -> Entry:
        victim = self.running.pop()
        if victim.req is not None:
            self.manager.free(victim.req)
        victim.req = None
        victim.state = State.WAITING
        self.waiting.appendleft(victim)
        out.preempted.append(victim.request_id)
        return victim

    def _decode_running(self, out: StepOutput) -> None:
        i = 0
        while i < len(self.running):
            e = self.running[i]
            preempted_self = False
            while True:
                try:
                    self.manager.allocate_for_decode(e.req)
                except RuntimeError:
                    victim = self._preempt_newest(out)
                    if victim is e:
                        preempted_self = True
                        break
                    continue
                e.generated += 1
                out.scheduled.append(e.request_id)
                break
            if preempted_self:
                break
            i += 1

    def _admit_waiting(self, out: StepOutput) -> None:
        bs = self.manager.block_size
        while len(self.waiting) > 0 and len(self.running) < self.max_num_seqs:
            e = self.waiting[0]
            need = ceil_div(e.context_len() + 1, bs)
            if len(self.manager.free_blocks) < need:
                break
            self.waiting.popleft()
            req = Request(e.request_id, e.context_len())
            self.manager.allocate_for_prefill(req)
            self.manager.allocate_for_decode(req)
            e.req = req
            e.generated += 1
            e.state = State.RUNNING
            self.running.append(e)
            out.scheduled.append(e.request_id)

    def _retire_finished(self, out: StepOutput) -> None:
        kept: list[Entry] = []
        i = 0
        while i < len(self.running):
            e = self.running[i]
            if e.done():
                self.manager.free(e.req)
                e.req = None
                e.state = State.FINISHED
                out.finished.append(e.request_id)
            else:
                kept.append(e)
            i += 1
        self.running = kept

    def step(self) -> StepOutput:
        out = StepOutput()
        self._decode_running(out)
        if len(out.preempted) == 0:
            self._admit_waiting(out)
        self._retire_finished(out)
        return out

    def has_unfinished(self) -> bool:
        return len(self.waiting) > 0 or len(self.running) > 0
