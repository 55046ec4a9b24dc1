"""Continuous batching over plain lists: a waiting list read from a moving head index."""

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
        self._info: dict[int, list] = {}  # id -> [prompt_len, max_new, generated, Request]
        self._w: list[int] = []
        self._h = 0
        self._run: list[int] = []

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        bs = self.manager.block_size
        if prompt_len < 1 or max_new_tokens < 1:
            raise ValueError("prompt_len and max_new_tokens must be >= 1")
        if request_id in self._info:
            raise ValueError(f"request {request_id} already known")
        if -(-(prompt_len + max_new_tokens) // bs) > self.manager.num_blocks:
            raise ValueError(f"request {request_id} can never fit")
        self._info[request_id] = [prompt_len, max_new_tokens, 0, None]
        self._w.append(request_id)

    def _push_front(self, rid: int) -> None:
        if self._h:
            self._h -= 1
            self._w[self._h] = rid
        else:
            self._w.insert(0, rid)

    def _pop_front(self) -> int:
        rid = self._w[self._h]
        self._h += 1
        if self._h > 32 and 2 * self._h > len(self._w):
            del self._w[: self._h]
            self._h = 0
        return rid

    def step(self) -> StepOutput:
        m, run, out = self.manager, self._run, StepOutput()
        i = 0
        while i < len(run):
            rid = run[i]
            e = self._info[rid]
            while True:
                try:
                    m.allocate_for_decode(e[3])
                    break
                except RuntimeError:
                    v = run.pop()
                    ve = self._info[v]
                    m.free(ve[3])
                    ve[3] = None
                    self._push_front(v)
                    out.preempted.append(v)
                    if v == rid:
                        break
            if e[3] is None:
                break
            e[2] += 1
            out.scheduled.append(rid)
            i += 1
        if not out.preempted:
            bs = m.block_size
            while self._h < len(self._w) and len(run) < self.max_num_seqs:
                e = self._info[self._w[self._h]]
                p = e[0] + e[2]
                if len(m.free_blocks) < -(-(p + 1) // bs):
                    break
                rid = self._pop_front()
                r = Request(rid, p)
                m.allocate_for_prefill(r)
                m.allocate_for_decode(r)
                e[2] += 1
                e[3] = r
                run.append(rid)
                out.scheduled.append(rid)
        keep = []
        for rid in run:
            e = self._info[rid]
            if e[2] == e[1]:
                m.free(e[3])
                e[3] = None
                out.finished.append(rid)
            else:
                keep.append(rid)
        self._run = keep
        return out

    def has_unfinished(self) -> bool:
        return bool(self._run) or self._h < len(self._w)
