"""The shared-prefix workload of `make simulate`: automatic prefix caching, counted token by token.

Requests that start alike (most behind one of a few system prompts, and multi-turn chats whose
every turn resends the conversation so far) are served by continuous batching, scheduled as
`simulate.Paged` schedules them, over the answer key's `PrefixCache` (`solutions/prefix_cache.py`:
this module, like `simulate.py`, stays out of the candidate bundle). The same trace twice:

- **with caching**: each prompt's own tokens, so an admission shares the cached blocks its
  prompt starts with and prefills only the rest;
- **without**: the same allocator fed each admission's tokens shifted to ids no other admission
  uses, so no block is ever shared and every prompt token is prefilled.

A step decodes the running requests, oldest admission first, each taking the block its token
starts; while none is free it preempts the newest running request by recomputation (its tokens
become its prompt). Then, in a step without preemption, it admits the waiting, first come, first
served, while seats remain and the pool can give the prompt's new blocks and its first token's
(a prompt that ends a block is admitted only while the pool has all its blocks, as if none were
cached, so that a refused admission changes nothing). A freed block that is cached stays so,
idle, until the pool needs it back, the one idle longest first; "free" is empty or idle.

Figures per run: the hit rate (prompt tokens found cached over prompt tokens, over every prefill,
re-prefills after preemption included), the prompt tokens computed, the tokens computed per step
(the prompts' uncached tokens, plus one per decoding request) and the blocks held by running
requests (a block several hold counted once), sampled as `simulate.py` samples memory: after the
step's tokens are in place, before the finished requests free theirs.

The default trace (`make_trace`): 4 system prompts of 256 to 1024 random tokens, the first the
most asked for (Zipf weights 1, 1/2, 1/3, 1/4); 400 single requests and 40 chats of 2 to 8
turns starting at Poisson arrivals, 0.03 per step, each behind a system prompt; user messages
log-normal, median 40 tokens, answers as `simulate.py`'s outputs (median 200); a chat's next
turn (its prompt: the previous prompt, the answer, a new user message) arrives an exponential
time, mean 100 steps, after its previous turn finished, while it fits 4096 tokens. The pool and
seats are `simulate.py`'s: 16 384 token slots in blocks of 16, 256 seats.
"""

import json
import math
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from full_kit.simulate import (
    MAX_LEN,
    MAX_NUM_SEQS,
    OUTPUT_MEDIAN,
    POINTS,
    POOL_TOKENS,
    SIGMA,
    STATIC_BLOCK_SIZE,
    percent,
    windowed,
)
from grader.report.svg import draw
from grader.scoring.batching import Blocked, Seq, Step
from kernels.reference import cdiv
from solutions.prefix_cache import OutOfBlocks, PrefixCache

VOCAB = 32000  # token ids 0..VOCAB - 1
SYSTEM_PROMPTS, SYSTEM_LEN = 4, (256, 1024)
SINGLE, CHATS, TURNS = 400, 40, (2, 8)
ARRIVAL_RATE = 0.03  # conversations per step, Poisson
USER_MEDIAN = 40
THINK_MEAN = 100  # steps between a turn's end and the next turn's arrival, exponential
CONTEXT_LEN = 4096  # a chat ends before a turn that would not fit
BLOCK_SIZE = STATIC_BLOCK_SIZE
RUNS = {"cached": "with prefix caching", "uncached": "without prefix caching"}
FILES = ("prefix_caching.json", "prefix_tokens.svg", "prefix_blocks.svg")


@dataclass(frozen=True)
class Turn:
    """A request: its prompt and its answer (the tokens it generates), ids in 0..VOCAB - 1. A
    first turn is queued just before step `delay`; a follow-up (`after`: its previous turn's id)
    `delay` steps after the step its previous turn finished in."""

    prompt: tuple[int, ...]
    answer: tuple[int, ...]
    delay: int
    after: int | None = None


@dataclass(slots=True)
class PrefixStep(Step):
    """A step, with its prefills: `prompt` tokens admitted, `cached` of them found in the cache,
    `computed` tokens run through the model. `used` counts a shared token once per holder."""

    prompt: int = 0
    cached: int = 0
    computed: int = 0


class PrefixServer(Blocked):
    """Continuous batching over a `PrefixCache` (the module docstring); `caching=False` shifts
    each admission's token ids out of every other admission's range."""

    def __init__(
        self, trace: list[Turn], caching: bool, num_blocks: int, block_size: int, max_num_seqs: int
    ) -> None:
        super().__init__(num_blocks, block_size, max_num_seqs)
        self.tokens = [turn.prompt + turn.answer for turn in trace]
        self.caching = caching
        self.cache = PrefixCache(num_blocks, block_size)
        self.admissions = 0
        self.shift: dict[int, int] = {}  # request id -> what its token ids are shifted by

    def step(self) -> PrefixStep:
        out = PrefixStep([], [], [])
        i = 0
        while i < len(self.running):  # a preemption shortens the list from the tail
            seq = self.running[i]
            if self._make_room(seq, out):
                self._append(seq)
                out.scheduled.append(seq.request_id)
                out.computed += 1
            i += 1
        while not out.preempted and self.waiting and len(self.running) < self.max_num_seqs:
            if not self._admit(self.waiting[0], out):
                break
            self.running.append(self.waiting.popleft())
            out.scheduled.append(self.running[-1].request_id)
        self.sample(out, (self.cache.num_blocks - self.cache.num_free) * self.block_size)
        for seq in self.running:
            if seq.seq_len == seq.final_len:
                self.cache.free(seq.request_id)
                out.finished.append(seq.request_id)
        self.running = [seq for seq in self.running if seq.seq_len < seq.final_len]
        return out

    def _make_room(self, seq: Seq, out: Step) -> bool:
        """Preempt the newest running request while `seq`'s next token starts a block and none
        is free; False when `seq` itself was preempted."""
        while seq.seq_len % self.block_size == 0 and not self.cache.num_free:
            victim = self.running.pop()
            self.cache.free(victim.request_id)
            self.waiting.appendleft(victim)  # recomputed later, its tokens as its prompt
            out.preempted.append(victim.request_id)
            out.recomputed += victim.seq_len
            if victim is seq:
                return False
        return True

    def _admit(self, seq: Seq, out: PrefixStep) -> bool:
        """Blocks for `seq`'s prompt (its tokens so far) and its first token, the prefill
        counted in `out`; False, nothing changed, when the pool cannot give them."""
        rid, size = seq.request_id, self.block_size
        if seq.seq_len % size == 0 and cdiv(seq.seq_len + 1, size) > self.cache.num_free:
            return False
        shift = 0 if self.caching else (self.admissions + 1) * VOCAB
        prompt = [token + shift for token in self.tokens[rid][: seq.seq_len]]
        try:
            cached = self.cache.allocate_prompt(rid, prompt)
        except OutOfBlocks:
            return False
        self.admissions += 1
        self.shift[rid] = shift
        out.prompt += seq.seq_len
        out.cached += cached
        out.computed += seq.seq_len - cached
        self._append(seq)
        return True

    def _append(self, seq: Seq) -> None:
        token = self.tokens[seq.request_id][seq.seq_len] + self.shift[seq.request_id]
        self.cache.append_token(seq.request_id, token)
        seq.seq_len += 1


def serve(trace: list[Turn], server: PrefixServer) -> list[PrefixStep]:
    """Run `trace` through `server` until it drains: one step each, idle ones included.
    ValueError for a negative delay, or a follow-up not after an earlier turn of its own."""
    due: defaultdict[int, list[int]] = defaultdict(list)  # step -> ids queued just before it
    follower: dict[int, int] = {}
    for rid, turn in enumerate(trace):
        follows = turn.after is None or (0 <= turn.after < rid and turn.after not in follower)
        if turn.delay < 0 or not follows:
            raise ValueError(f"request {rid}: delay >= 0, after an earlier turn no other follows")
        if turn.after is None:
            due[turn.delay].append(rid)
        else:
            follower[turn.after] = rid
    steps: list[PrefixStep] = []
    while due or server.busy():
        for rid in due.pop(len(steps), []):
            server.add(rid, len(trace[rid].prompt), len(trace[rid].answer))
        steps.append(server.step())
        for rid in steps[-1].finished:
            if rid in follower:
                due[len(steps) + trace[follower[rid]].delay].append(follower[rid])
    return steps


def serve_trace(
    trace: list[Turn],
    caching: bool,
    num_blocks: int = POOL_TOKENS // BLOCK_SIZE,
    block_size: int = BLOCK_SIZE,
    max_num_seqs: int = MAX_NUM_SEQS,
) -> list[PrefixStep]:
    """Serve `trace` over a `PrefixCache` of `num_blocks` blocks, with caching or without."""
    return serve(trace, PrefixServer(trace, caching, num_blocks, block_size, max_num_seqs))


def make_trace(seed: int) -> list[Turn]:
    """The default shared-prefix trace (the module docstring), the same for the same seed."""
    rng = random.Random(seed)

    def tokens(count: int) -> tuple[int, ...]:
        return tuple(rng.randrange(VOCAB) for _ in range(count))

    def length(median: int) -> int:
        return min(MAX_LEN, max(1, round(rng.lognormvariate(math.log(median), SIGMA))))

    systems = [tokens(rng.randint(*SYSTEM_LEN)) for _ in range(SYSTEM_PROMPTS)]
    weights = [1 / rank for rank in range(1, SYSTEM_PROMPTS + 1)]
    chats = set(rng.sample(range(SINGLE + CHATS), CHATS))
    trace: list[Turn] = []
    clock = 0.0
    for conversation in range(SINGLE + CHATS):
        prompt = rng.choices(systems, weights)[0] + tokens(length(USER_MEDIAN))
        delay, after = int(clock), None
        for _ in range(rng.randint(*TURNS) if conversation in chats else 1):
            answer = tokens(length(OUTPUT_MEDIAN))
            if len(prompt) + len(answer) > CONTEXT_LEN:
                break
            trace.append(Turn(prompt, answer, delay, after))
            delay, after = round(rng.expovariate(1 / THINK_MEAN)), len(trace) - 1
            prompt += answer + tokens(length(USER_MEDIAN))
        clock += rng.expovariate(ARRIVAL_RATE)
    return trace


def summarise(steps: list[PrefixStep], block_size: int) -> dict:
    """A run's figures; `hit_rate` is a fraction, None without prompts."""
    count = max(len(steps), 1)
    prompt, cached = sum(step.prompt for step in steps), sum(step.cached for step in steps)
    blocks = [step.held // block_size for step in steps]
    return {
        "steps": len(steps),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "hit_rate": cached / prompt if prompt else None,
        "computed_prompt_tokens": prompt - cached,
        "computed_per_step": sum(step.computed for step in steps) / count,
        "blocks_mean": sum(blocks) / count,
        "blocks_peak": max(blocks, default=0),
        "preemptions": sum(len(step.preempted) for step in steps),
        "recomputed_tokens": sum(step.recomputed for step in steps),
    }


def simulate(seed: int = 0) -> dict:
    """The default trace drawn from `seed`, served with caching and without: the figures,
    JSON-able."""
    trace = make_trace(seed)
    prompts = [len(turn.prompt) for turn in trace]
    figures: dict = {
        "parameters": {
            "seed": seed,
            "system_prompts": SYSTEM_PROMPTS,
            "single_requests": SINGLE,
            "chats": CHATS,
            "requests": len(trace),
            "follow_ups": sum(turn.after is not None for turn in trace),
            "pool_tokens": POOL_TOKENS,
            "block_size": BLOCK_SIZE,
            "max_num_seqs": MAX_NUM_SEQS,
        },
        "trace": {
            "prompt_tokens": sum(prompts),
            "prompt_mean": sum(prompts) / len(trace),
            "prompt_max": max(prompts),
        },
        "runs": {},
        "series": {},
    }
    runs = {key: serve_trace(trace, caching=key == "cached") for key in RUNS}
    window = max(1, cdiv(max(len(steps) for steps in runs.values()), POINTS))
    figures["window"] = window
    for key, steps in runs.items():
        figures["runs"][key] = {"label": RUNS[key], **summarise(steps, BLOCK_SIZE)}
        figures["series"][key] = {
            "computed": windowed([step.computed for step in steps], window),
            "blocks": windowed([step.held // BLOCK_SIZE for step in steps], window),
        }
    return figures


def describe(figures: dict) -> str:
    """The workload in two lines."""
    p, trace = figures["parameters"], figures["trace"]
    return (
        f"Shared prefixes: {p['requests']} requests ({p['single_requests']} single, "
        f"{p['chats']} chats with {p['follow_ups']} follow-up turns) behind "
        f"{p['system_prompts']} system prompts; prompts of {trace['prompt_mean']:.0f} tokens "
        f"on average (at most {trace['prompt_max']:,}).\n"
        f"Pool: {p['pool_tokens']:,} token slots in blocks of {p['block_size']}, "
        f"{p['max_num_seqs']} seats."
    )


def rows(figures: dict) -> list[list[str]]:
    """The table: a header, then one row per run."""
    body = [["shared prefixes", "steps", "prefix-cache hit rate", "prompt tokens computed",
             "tokens computed/step", "blocks held: mean, peak",
             "preempted (recomputed)"]]  # fmt: skip
    for r in figures["runs"].values():
        body.append([
            r["label"],
            f"{r['steps']:,}",
            percent(None if r["hit_rate"] is None else 100 * r["hit_rate"]),
            f"{r['computed_prompt_tokens']:,} of {r['prompt_tokens']:,}",
            f"{r['computed_per_step']:.1f}",
            f"{r['blocks_mean']:.1f}, {r['blocks_peak']}",
            f"{r['preemptions']:,} ({r['recomputed_tokens']:,} tokens)",
        ])  # fmt: skip
    return body


def headline(figures: dict) -> str:
    """What caching saves, in one sentence."""
    cached, uncached = figures["runs"]["cached"], figures["runs"]["uncached"]
    return (
        f"Prefix caching on shared prefixes: {100 * cached['hit_rate']:.1f}% of prompt tokens "
        f"found cached, {cached['computed_prompt_tokens']:,} against "
        f"{uncached['computed_prompt_tokens']:,} prompt tokens computed "
        f"({uncached['computed_prompt_tokens'] / cached['computed_prompt_tokens']:.1f}x fewer), "
        f"{cached['blocks_mean']:.0f} against {uncached['blocks_mean']:.0f} blocks held per step "
        f"on average (peak {cached['blocks_peak']} against {uncached['blocks_peak']})."
    )


def chart_specs(figures: dict) -> dict[str, dict]:
    """The plots as data (`svg.draw` draws one), by file name: tokens computed and blocks held
    per step, with caching and without."""
    over_time = f"step (mean over windows of {figures['window']} steps)"

    def over_steps(title: str, y_label: str, measure: str) -> dict:
        points = {figures["runs"][key]["label"]: values[measure]
                  for key, values in figures["series"].items()}  # fmt: skip
        return {"kind": "line", "args": {"title": title, "x_label": over_time,
                                         "y_label": y_label, "series": points}}  # fmt: skip

    return {
        FILES[1]: over_steps(
            "Tokens computed per step, shared prefixes", "prompt and decoded tokens", "computed"
        ),
        FILES[2]: over_steps("Blocks held per step, shared prefixes", "blocks held", "blocks"),
    }


def write(figures: dict, out: Path) -> list[str]:
    """Write the figures (JSON) and the plots into `out`; the names written."""
    (out / FILES[0]).write_text(json.dumps(figures, indent=1) + "\n")
    for name, spec in chart_specs(figures).items():
        (out / name).write_text(draw(spec), encoding="utf-8")
    return list(FILES)
