"""Part 5: continuous batching over the paged KV cache, with preemption by recomputation.

Every step gives each running request one token (one `allocate_for_decode`), admits waiting
requests while seats and blocks allow, and frees the requests that are done. When the pool runs
dry mid-decode, the most recently admitted request is preempted: its blocks are freed and it
waits again, to be recomputed later as a longer prompt (its generated tokens counted in).

Invariant: the running list (admission order) followed by the waiting queue is always in arrival
order. Admission takes the queue's head and appends it to the running list; preemption pops the
running list's tail and pushes it back at the queue's head; finishing removes; a new request
joins the queue's tail. Hence "oldest admission" among running requests is also earliest
arrival, although a re-admission counts as a new admission: a re-admitted request is the newest
one running, exactly as it was the newest one running when it was preempted.

No deadlock, if the scheduler is the pool's only user. `add_request` refuses a request whose
`prompt_len + max_new_tokens` tokens need more blocks than the pool has, so any request fits
alone at any point of its life. The oldest running request is therefore never preempted (the
newer ones are preempted first, and once it runs alone its decode succeeds), so it gets a token
every step; and with nothing running, all blocks are free and the head of the queue is
admitted. Generated tokens are never lost (a preempted request keeps them in its prompt), so
each step with unfinished work brings some request one token closer to its end, and everything
finishes within `sum(max_new_tokens)` such steps.
"""

from collections import deque
from dataclasses import dataclass, field

from .kv_cache_manager import KVCacheManager, Request


def cdiv(a: int, b: int) -> int:
    """Ceiling division for non-negative integers: the number of size-`b` blocks `a` tokens fill."""
    return (a + b - 1) // b


@dataclass
class StepOutput:
    """What one `step()` did.

    `scheduled`: ids that got a token in this step, in the order they got it;
    `preempted`: ids preempted in this step, in order; `finished`: ids that reached
    `max_new_tokens` in this step and were freed, oldest admission first.
    """

    scheduled: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time.

    `waiting` holds requests without blocks, head first; `running` holds requests with blocks,
    in admission order (newest last). A waiting `Request`'s `seq_len` is the prompt it will be
    prefilled with: the original prompt, plus the tokens generated before a preemption.
    """

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        """Schedule over `manager`'s pool; ValueError if `max_num_seqs < 1` (nothing would run)."""
        if max_num_seqs < 1:
            raise ValueError(f"max_num_seqs must be >= 1, got {max_num_seqs}")
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        # Every id ever added (waiting, running or finished) -> the seq_len at which it is done.
        self._final_seq_lens: dict[int, int] = {}

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        """Queue a request at the tail of the waiting queue; it waits until a `step()` admits it.
        Ids are any ints, in no order relative to arrival: requests are ordered by arrival and
        admission, never by id.

        ValueError, and nothing queued, when `prompt_len < 1`, `max_new_tokens < 1`,
        `request_id` is already known (waiting, running or finished), or the request could never
        fit: `ceil((prompt_len + max_new_tokens) / block_size) > num_blocks`.
        """
        if prompt_len < 1 or max_new_tokens < 1:
            raise ValueError(
                f"prompt_len and max_new_tokens must be >= 1, got {prompt_len}, {max_new_tokens}"
            )
        if request_id in self._final_seq_lens:
            raise ValueError(f"request id {request_id} is already known")
        final_seq_len = prompt_len + max_new_tokens
        if cdiv(final_seq_len, self.manager.block_size) > self.manager.num_blocks:
            raise ValueError(
                f"request {request_id} needs {final_seq_len} token slots, more than the pool's "
                f"{self.manager.num_blocks} blocks of {self.manager.block_size} can ever hold"
            )
        self._final_seq_lens[request_id] = final_seq_len
        self.waiting.append(Request(request_id, prompt_len))

    def step(self) -> StepOutput:
        """One iteration: decode, then admit (only if nothing was preempted), then finish.

        A request admitted in this step is also finished in it when its first token is its last
        (`max_new_tokens == 1`). Skipping admission after a preemption changes no trace while
        the scheduler is the pool's only user: the queue's head is then the request preempted
        last, and it needs more blocks than are free: at least the blocks it freed, of which
        the decode that preempted it took one (or, preempted for its own decode, one more).
        """
        out = StepOutput()
        self._decode_running(out)
        if not out.preempted:
            self._admit_waiting(out)
        self._free_finished(out)
        return out

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        return bool(self.waiting or self.running)

    def _decode_running(self, out: StepOutput) -> None:
        """Give every running request one token, oldest admission first, preempting as needed.

        A preemption pops the running list's tail, so it never touches a request that already
        got its token in this step; the loop ends when the request preempted is the one
        decoding (it was the tail).
        """
        i = 0
        while i < len(self.running):
            req = self.running[i]
            if self._decode_or_preempt(req, out):
                out.scheduled.append(req.request_id)
            i += 1

    def _decode_or_preempt(self, req: Request, out: StepOutput) -> bool:
        """Give `req` one token, preempting the newest running request until it fits.

        Returns False when `req` itself had to be preempted. Retrying is safe because a decode
        that raises leaves `req` and the pool exactly as they were (strong exception guarantee).
        """
        while True:
            try:
                self.manager.allocate_for_decode(req)
                return True
            except RuntimeError:
                victim = self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                if victim is req:
                    return False

    def _preempt(self, req: Request) -> None:
        """Free `req`'s blocks and put it back at the head of the waiting queue.

        It waits as a fresh `Request` whose prompt is every token it holds (its generated
        tokens included), to be recomputed by a prefill when admitted again.
        """
        self.manager.free(req)
        self.waiting.appendleft(Request(req.request_id, req.seq_len))

    def _admit_waiting(self, out: StepOutput) -> None:
        """Admit from the head of the queue while a seat is free and the head fits.

        The head fits when the free blocks cover its prompt plus its next token:
        `ceil((seq_len + 1) / block_size)`, exactly what its prefill and first decode take, so
        neither can fail. The first request that does not fit stops admission: nobody behind
        it jumps the queue.
        """
        block_size = self.manager.block_size
        while self.waiting and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            if cdiv(req.seq_len + 1, block_size) > len(self.manager.free_blocks):
                return
            self.waiting.popleft()
            self.manager.allocate_for_prefill(req)
            self.manager.allocate_for_decode(req)
            self.running.append(req)
            out.scheduled.append(req.request_id)

    def _free_finished(self, out: StepOutput) -> None:
        """Free the running requests that hold all their tokens, oldest admission first."""
        still_running = []
        for req in self.running:
            if req.seq_len == self._final_seq_lens[req.request_id]:
                self.manager.free(req)
                out.finished.append(req.request_id)
            else:
                still_running.append(req)
        self.running = still_running
