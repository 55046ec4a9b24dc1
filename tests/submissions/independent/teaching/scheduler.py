"""A continuous-batching scheduler with preemption (part 5), written as a worked example.

How to read this file: `step()` is deliberately short and reads like the three-line recipe of
the contract (decode, admit, finish). Each stage is its own helper method:

- `_advance`  gives one running request its next token, preempting on a shortage;
- `_preempt`  throws the newest running request's blocks away and requeues it;
- `_admit`    seats waiting requests, first come first served, while seats and blocks last;
- `_retire`   frees the requests that have produced all their tokens.

Two containers hold the requests that are not finished:

- `self._waiting`, a `collections.deque` in arrival order. Preempted requests are put back at
  its head (`appendleft`), so they are the first to be admitted again.
- `self._running`, a plain list in admission order, oldest first and newest last. Preemption
  always takes the newest, which is simply `pop()` from the end.

Request ids are arbitrary ints (negative ones too), so we never sort or compare them; the order
of everything comes from the order of these containers.
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
    """The scheduler's notes about one request.

    `prompt_len` and `max_new_tokens` are what the user asked for and never change.
    `tokens_generated` survives preemption: when the job is recomputed, the tokens it already
    generated are simply treated as part of a longer prompt. `cache_request` is the manager's
    `Request` while the job is running, and `None` while it waits.
    """

    request_id: int
    prompt_len: int
    max_new_tokens: int
    tokens_generated: int = 0
    cache_request: Request | None = None

    def effective_prompt_len(self) -> int:
        """The prompt length to recompute with: the original prompt plus what was generated."""
        return self.prompt_len + self.tokens_generated

    def is_done(self) -> bool:
        """Whether every requested token has been generated."""
        return self.tokens_generated >= self.max_new_tokens


def _ceil_div(numerator: int, denominator: int) -> int:
    """Integer ceiling of `numerator / denominator`."""
    return (numerator + denominator - 1) // denominator


class Scheduler:
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        """Keep `manager` and `max_num_seqs`; set up the waiting queue and the running list."""
        self.manager = manager
        self.max_num_seqs = max_num_seqs
        self._waiting: deque[_Job] = deque()
        self._running: list[_Job] = []
        # Every id ever added (waiting, running or finished): a finished id stays taken.
        self._known_ids: set[int] = set()

    # ------------------------------------------------------------------------------------
    # Public interface
    # ------------------------------------------------------------------------------------

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        """Queue a request; ValueError for bad sizes, a known id, or one that can never fit."""
        if prompt_len < 1:
            raise ValueError(f"prompt_len must be >= 1, got {prompt_len}")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if request_id in self._known_ids:
            raise ValueError(f"request id {request_id} has already been used")

        # At its very longest the request holds prompt_len + max_new_tokens tokens. If even
        # the whole pool could not hold that, admitting it would only lead to endless
        # preemption, so we refuse it up front.
        blocks_at_the_end = _ceil_div(prompt_len + max_new_tokens, self.manager.block_size)
        if blocks_at_the_end > self.manager.num_blocks:
            raise ValueError(
                f"request {request_id} needs {blocks_at_the_end} blocks at its longest, "
                f"the pool has only {self.manager.num_blocks}"
            )

        self._known_ids.add(request_id)
        self._waiting.append(_Job(request_id, prompt_len, max_new_tokens))

    def step(self) -> StepOutput:
        """One iteration: decode, then admit (only if nothing was preempted), then finish."""
        report = StepOutput()

        # Stage 1: every running job, oldest admission first, gets one token. We walk by
        # position because `_advance` may shorten the list (preemption pops from its end):
        # jobs beyond the current position can disappear, jobs before it never do.
        position = 0
        while position < len(self._running):
            job = self._running[position]
            self._advance(job, report)
            position += 1

        # Stage 2: new jobs only get seats in a step that did not have to preempt anyone.
        if not report.preempted:
            self._admit(report)

        # Stage 3: free the jobs that just produced their last token.
        self._retire(report)
        return report

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        return bool(self._waiting) or bool(self._running)

    # ------------------------------------------------------------------------------------
    # The stages of a step
    # ------------------------------------------------------------------------------------

    def _advance(self, job: _Job, report: StepOutput) -> None:
        """Give `job` its next token, preempting the newest running jobs until it fits.

        If the job preempted turns out to be `job` itself (it was the newest one left), it has
        been sent back to the waiting queue and gets no token in this step.
        """
        while True:
            try:
                self.manager.allocate_for_decode(job.cache_request)
            except RuntimeError:
                victim = self._preempt(report)
                if victim is job:
                    return
                continue  # some memory came back: try the same job again
            job.tokens_generated += 1
            report.scheduled.append(job.request_id)
            return

    def _preempt(self, report: StepOutput) -> _Job:
        """Evict the most recently admitted running job and put it at the head of the queue.

        Its blocks go back to the pool; its generated tokens are remembered, so when it is
        admitted again it is recomputed with them counted into its prompt.
        """
        victim = self._running.pop()
        self.manager.free(victim.cache_request)
        victim.cache_request = None
        self._waiting.appendleft(victim)
        report.preempted.append(victim.request_id)
        return victim

    def _admit(self, report: StepOutput) -> None:
        """Seat waiting jobs in queue order while there are seats and blocks for them.

        A job needs blocks for its (effective) prompt plus the one token it generates on
        admission: `ceil((prompt_len + 1) / block_size)`. We stop at the first job that does
        not fit rather than skipping ahead, so nobody is overtaken.
        """
        while self._waiting and len(self._running) < self.max_num_seqs:
            candidate = self._waiting[0]
            prompt_tokens = candidate.effective_prompt_len()
            blocks_wanted = _ceil_div(prompt_tokens + 1, self.manager.block_size)
            if blocks_wanted > len(self.manager.free_blocks):
                return

            cache_request = Request(candidate.request_id, prompt_tokens)
            try:
                self.manager.allocate_for_prefill(cache_request)
                self.manager.allocate_for_decode(cache_request)
            except RuntimeError:
                # Should not happen after the check above, but if the manager disagrees with
                # our arithmetic we give back whatever was taken and stop admitting.
                self.manager.free(cache_request)
                return

            self._waiting.popleft()
            candidate.cache_request = cache_request
            candidate.tokens_generated += 1
            self._running.append(candidate)
            report.scheduled.append(candidate.request_id)

    def _retire(self, report: StepOutput) -> None:
        """Free every job that has generated all its tokens, oldest admission first."""
        still_running: list[_Job] = []
        for job in self._running:
            if job.is_done():
                self.manager.free(job.cache_request)
                job.cache_request = None
                report.finished.append(job.request_id)
            else:
                still_running.append(job)
        self._running = still_running
