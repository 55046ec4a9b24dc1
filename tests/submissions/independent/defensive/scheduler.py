"""Continuous-batching scheduler with recompute-style preemption.

Running requests are kept in a list in admission order (newest last) and waiting ones in a
deque (arrival order, preempted requests pushed back at the head). Each request's bookkeeping
lives in a small `_Entry`: the original prompt length, the token budget and how many tokens it
has produced so far, which survives a preemption.
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


def _require(condition: bool, message: str) -> None:
    """Raise ValueError with `message` unless `condition` holds."""
    if not condition:
        raise ValueError(message)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


class _Entry:
    """Scheduler-side state of one request."""

    __slots__ = ("generated", "max_new_tokens", "prompt_len", "req", "request_id")

    def __init__(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        self.request_id = request_id
        self.prompt_len = prompt_len
        self.max_new_tokens = max_new_tokens
        self.generated = 0
        self.req: Request | None = None

    @property
    def context_len(self) -> int:
        """Tokens to prefill on (re)admission: the prompt plus everything generated so far."""
        return self.prompt_len + self.generated

    @property
    def done(self) -> bool:
        return self.generated >= self.max_new_tokens


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        _require(manager is not None, "Scheduler needs a KV-cache manager")
        _require(_is_int(max_num_seqs), f"max_num_seqs must be an int, got {max_num_seqs!r}")
        _require(max_num_seqs >= 1, f"max_num_seqs must be >= 1, got {max_num_seqs}")
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self._waiting: deque[_Entry] = deque()
        self._running: list[_Entry] = []
        self._known: set[int] = set()

    # -- public API ----------------------------------------------------------------------------

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        """Queue a request; it waits until a `step()` admits it."""
        _require(_is_int(request_id), f"request_id must be an int, got {request_id!r}")
        _require(_is_int(prompt_len), f"prompt_len must be an int, got {prompt_len!r}")
        _require(_is_int(max_new_tokens), f"max_new_tokens must be an int, got {max_new_tokens!r}")
        _require(prompt_len >= 1, f"prompt_len must be >= 1, got {prompt_len}")
        _require(max_new_tokens >= 1, f"max_new_tokens must be >= 1, got {max_new_tokens}")
        _require(request_id not in self._known, f"request id {request_id} is already known")
        block_size = self.manager.block_size
        num_blocks = self.manager.num_blocks
        peak = _ceil_div(prompt_len + max_new_tokens, block_size)
        _require(
            peak <= num_blocks,
            f"request {request_id} needs {peak} blocks at its longest but the pool has only "
            f"{num_blocks}",
        )
        self._known.add(request_id)
        self._waiting.append(_Entry(request_id, prompt_len, max_new_tokens))

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        return bool(self._waiting) or bool(self._running)

    def step(self) -> StepOutput:
        """One iteration: decode, then admit (only if nothing was preempted), then finish."""
        out = StepOutput()
        self._decode_running(out)
        if not out.preempted:
            self._admit_waiting(out)
        self._retire_finished(out)
        return out

    # -- the three phases ----------------------------------------------------------------------

    def _decode_running(self, out: StepOutput) -> None:
        index = 0
        while index < len(self._running):
            entry = self._running[index]
            served = False
            while True:
                try:
                    self.manager.allocate_for_decode(entry.req)
                except RuntimeError:
                    victim = self._preempt_newest()
                    out.preempted.append(victim.request_id)
                    if victim is entry:
                        break
                    continue
                served = True
                break
            if not served:
                # `entry` was the newest running request and is now waiting again.
                continue
            entry.generated += 1
            out.scheduled.append(entry.request_id)
            index += 1

    def _admit_waiting(self, out: StepOutput) -> None:
        block_size = self.manager.block_size
        while self._waiting:
            if len(self._running) >= self.max_num_seqs:
                break
            entry = self._waiting[0]
            needed = _ceil_div(entry.context_len + 1, block_size)
            if len(self.manager.free_blocks) < needed:
                break
            req = Request(entry.request_id, entry.context_len)
            try:
                self.manager.allocate_for_prefill(req)
            except RuntimeError:
                break
            try:
                self.manager.allocate_for_decode(req)
            except RuntimeError:
                self.manager.free(req)
                break
            self._waiting.popleft()
            entry.req = req
            entry.generated += 1
            self._running.append(entry)
            out.scheduled.append(entry.request_id)

    def _retire_finished(self, out: StepOutput) -> None:
        still_running: list[_Entry] = []
        for entry in self._running:
            if not entry.done:
                still_running.append(entry)
                continue
            self.manager.free(entry.req)
            entry.req = None
            out.finished.append(entry.request_id)
        self._running = still_running

    # -- helpers -------------------------------------------------------------------------------

    def _preempt_newest(self) -> _Entry:
        """Free the most recently admitted running request and queue it at the waiting head."""
        _require(bool(self._running), "no running request left to preempt")
        victim = self._running.pop()
        self.manager.free(victim.req)
        victim.req = None
        self._waiting.appendleft(victim)
        return victim
