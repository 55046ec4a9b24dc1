"""Part 5 · a continuous-batching scheduler (10 points).

Static batching runs a batch until its longest request ends, so seats sit idle while short
requests wait. Continuous batching decides again at every step: finished requests leave at
once and waiting ones take their seats. With a paged KV cache, memory is taken one block at a
time, so the scheduler can also run out of blocks mid-flight: then it preempts (frees) the
newest request and recomputes it later.

Every generated token holds one cache slot (one `allocate_for_decode`). A request is done when
it has generated `max_new_tokens` tokens, i.e. `seq_len == prompt_len + max_new_tokens`.

Use only the part 2 interface of the manager (`allocate_for_prefill`, `allocate_for_decode`,
`free`, `free_blocks`, `block_size`, `num_blocks`), and make requests with `Request` from
`.kv_cache_manager`. The grader hands your scheduler the reference manager, so this part is
scored apart from parts 2 and 3.

`step()` does exactly this, in this order (the grader compares your trace step by step):
1. Decode: every running request, oldest admission first, gets one token
   (`allocate_for_decode`). When that raises RuntimeError, preempt the most recently admitted
   running request (free its blocks; it goes back to the HEAD of the waiting queue, and will be
   recomputed later with the tokens it already generated counted into its prompt), then retry
   the decode, as often as needed, unless the request preempted was the one decoding.
2. Admit: only if nothing was preempted in this step, admit waiting requests first come, first
   served, while fewer than `max_num_seqs` run and the free blocks cover
   `ceil((prompt_len + 1) / block_size)` (for a preempted request, `prompt_len` counts the
   tokens it had generated). Each admitted request gets `allocate_for_prefill`, then its first
   token (`allocate_for_decode`). Admission stops at the first request that does not fit.
3. Finish: requests that reached `max_new_tokens` are freed, oldest admission first.

Hints: keep the running requests in admission order (a list, newest last) and the waiting
ones in a `collections.deque`. Track, per request, its original prompt length and how many
tokens it has generated: a preempted request restarts with
`Request(request_id, prompt_len + generated)`.
"""

from dataclasses import dataclass, field

from .kv_cache_manager import KVCacheManager


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
    """Runs requests through a shared paged KV cache, at most `max_num_seqs` at a time."""

    def __init__(self, manager: KVCacheManager, max_num_seqs: int) -> None:
        """Keep `manager` and `max_num_seqs`; set up your waiting queue and running list."""
        self.manager = manager
        self.max_num_seqs = max_num_seqs

    def add_request(self, request_id: int, prompt_len: int, max_new_tokens: int) -> None:
        """Queue a request (it waits until a `step()` admits it). Ids are any ints, in no order
        relative to arrival: order requests by arrival and admission, never by id.

        ValueError when `prompt_len < 1`, `max_new_tokens < 1`, `request_id` is already known
        (waiting, running or finished), or the request could never fit:
        `ceil((prompt_len + max_new_tokens) / block_size) > num_blocks`.
        """
        raise NotImplementedError("Scheduler.add_request")

    def step(self) -> StepOutput:
        """One iteration: decode, then admit (only if nothing was preempted), then finish."""
        raise NotImplementedError("Scheduler.step")

    def has_unfinished(self) -> bool:
        """True while any request is waiting or running."""
        raise NotImplementedError("Scheduler.has_unfinished")
