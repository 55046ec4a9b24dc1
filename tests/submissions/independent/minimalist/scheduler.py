"""Continuous batching: decode the running requests, admit waiting ones, retire finished ones."""

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


class Scheduler:
    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self.info: dict[int, list[int]] = {}  # id -> [prompt_len, max_new_tokens, generated]
        self.waiting: deque[int] = deque()
        self.running: list[Request] = []

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.manager.block_size)

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        if prompt_len < 1 or max_new_tokens < 1 or request_id in self.info:
            raise ValueError(f"bad request {request_id}")
        if self._blocks(prompt_len + max_new_tokens) > self.manager.num_blocks:
            raise ValueError(f"request {request_id} can never fit")
        self.info[request_id] = [prompt_len, max_new_tokens, 0]
        self.waiting.append(request_id)

    def _decode(self, req: Request, out: StepOutput) -> None:
        self.manager.allocate_for_decode(req)
        self.info[req.request_id][2] += 1
        out.scheduled.append(req.request_id)

    def step(self) -> StepOutput:
        out = StepOutput()
        i = 0
        while i < len(self.running):
            try:
                self._decode(self.running[i], out)
                i += 1
            except RuntimeError:
                victim = self.running.pop()
                self.manager.free(victim)
                self.waiting.appendleft(victim.request_id)
                out.preempted.append(victim.request_id)
        while not out.preempted and self.waiting and len(self.running) < self.max_num_seqs:
            prompt, _, generated = self.info[self.waiting[0]]
            if self._blocks(prompt + generated + 1) > len(self.manager.free_blocks):
                break
            req = Request(self.waiting.popleft(), prompt + generated)
            self.manager.allocate_for_prefill(req)
            self.running.append(req)
            self._decode(req, out)
        still = []
        for req in self.running:
            _, max_new, generated = self.info[req.request_id]
            if generated == max_new:
                self.manager.free(req)
                out.finished.append(req.request_id)
            else:
                still.append(req)
        self.running = still
        return out

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)
