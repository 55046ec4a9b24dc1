"""The tiny transformer served over a submission's prefix cache (part 7): proof that it reuses KV.

Standalone (stdlib and torch at module level): the grader copies this file into the sandboxed
worker beside `engine.py` (`grader.sandbox.launch.TOOLS`) and runs `serve` there on the
candidate's `prefix_cache` module, where no kit package is importable. Its model is
`engine.py`'s `TinyTransformer` (with two layers: `MODEL`), not a copy: in the kit this module
imports `engine` as its package's sibling; in the worker, where a tool is a module of no package
(`from . import engine` cannot work there) and the kit is not importable, it loads the copy
beside it by its path, as the worker loads its own siblings (`worker.load_sibling`).

The workload (`PrefixTrace`)
----------------------------
Prompts made of seeded texts that repeat, as a serving engine's prompts do: a system prompt
that every conversation starts with, a user-turn marker one block long, few-shot examples, a
chat whose every turn's prompt is the previous turn's prompt and answer followed by more, and an
unrelated prompt. A request's prompt is its segments joined: a text's name, or the id of an
earlier request, which stands for that request's prompt and generated tokens (the request then
waits for it to finish). Two prompts hold a run of blocks that an earlier prompt holds after the
same block (the user marker) but at another position, after another prefix: the second few-shot
example alone, and a new chat on the document that the first chat's second turn pasted. A
cache that keys a block without the chain of its parents serves them the other prompt's KV.

The serving loop (`serve`)
--------------------------
The engine owns the data: per layer, a K and a V pool of `num_blocks * block_size` slots, each
`[num_kv_heads, head_dim]`, indexed through the cache's block ids; the candidate's `PrefixCache`
owns the ids. Requests join in order, up to `max_live` at once, as they arrive. At a prompt,
`allocate_prompt` says how many of its tokens are cached: the model runs on the others only,
each layer writing their K and V into the pools at their slots (through `block_table`) and
attending, with plain dense attention, over every position's K and V read back from the pools,
the cached ones included. Each generated token fed back goes through `append_token` and is run
the same way, alone. A request that has all its tokens is freed, so that later prompts find its
blocks cached and idle; the pool is small enough that some are evicted first (for the answer
key, the few-shot prompt served last finds only part of its blocks still cached).

The check (`compare`) is the grader's, in its own process (`grader/integration.py`): at every
position the engine computed, its greedy token against dense decoding of the request alone, as
`engine.compare` does (near-ties excused). That covers the prompt positions after the cached
ones too, not only the generated tokens: greedy decoding with random weights soon repeats one
token whatever the context, so the predictions at the prompt's computed positions are the
evidence that the K and V read from cached blocks are right.
"""

import importlib.util
import math
import operator
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


def sibling(name: str) -> ModuleType:
    """The kit's tool `name`, from the file beside this one (loaded by its path)."""
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"kit_tool_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __package__:  # in the kit: grader.sandbox.tools
    from . import engine
else:  # in the worker, a module of no package
    engine = sibling("engine")

stop = engine.stop
# `engine.py`'s model with the two layers this check has always served, so its figures stay as
# they were: its attention is plain torch, not a kernel under Triton's interpreter, so the
# second layer costs little (the engine check keeps one: `engine.py`'s "The model").
MODEL = engine.ModelConfig(num_layers=2)


# --- the workload ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PrefixTrace:
    """The pool, how many requests are served at once, the texts (`(name, length)`: seeded
    tokens, drawn in this order) and the requests, each `(arrival_step, segments,
    max_new_tokens)` with id its index; a segment is a text's name, or the id of an earlier
    request, standing for its prompt and generated tokens."""

    num_blocks: int
    block_size: int
    max_live: int
    texts: tuple[tuple[str, int], ...]
    requests: tuple[tuple[int, tuple[str | int, ...], int], ...]
    seed: int = 7


FEW_SHOT = ("system", "user", "example_1", "user", "example_2", "user")
CHECK_TEXTS = (
    ("system", 8), ("user", 4), ("example_1", 8), ("example_2", 8), ("document", 16),
    ("q0", 5), ("q1", 6), ("q2", 3), ("q3", 5), ("q4", 6), ("q5", 7), ("q6", 9), ("q7", 2),
    ("q8", 3),
)  # fmt: skip
CHECK_REQUESTS = (
    (0, (*FEW_SHOT, "q0"), 6),  # a few-shot prompt
    (0, ("system", "user", "example_2", "user", "q1"), 5),  # its second example alone
    (1, (*FEW_SHOT, "q2"), 4),  # a branch: another question after the same examples
    (2, ("system", "user", "q3"), 7),  # a chat's first turn: 17 + 7 tokens, 6 blocks
    (3, (3, "user", "document", "q4"), 6),  # its second turn: the first's prompt and answer, more
    (4, ("q6",), 9),  # a prompt that shares nothing
    (5, (4, "user", "q5"), 5),  # the chat's third turn
    (6, ("system", "user", "document", "q7"), 6),  # a new chat on the same document
    (7, (*FEW_SHOT, "q8"), 4),  # the few-shot prompt again, some of its blocks evicted
)
TRACES = {
    # The grader's check: about a second on a CPU; one block more than the smallest pool that
    # serves it, so that the few-shot prompt served last finds some of its blocks evicted.
    "check": PrefixTrace(
        num_blocks=32, block_size=4, max_live=3, texts=CHECK_TEXTS, requests=CHECK_REQUESTS
    ),
}


def texts_of(trace: PrefixTrace, vocab_size: int) -> dict[str, list[int]]:
    generator = torch.Generator().manual_seed(trace.seed)
    return {
        name: torch.randint(vocab_size, (length,), generator=generator).tolist()
        for name, length in trace.texts
    }


def prompt_of(
    segments: tuple[str | int, ...],
    texts: dict[str, list[int]],
    prompts: dict[int, list[int]] | list[list[int]],
    generated: dict[int, list[int]] | list[list[int]],
) -> list[int]:
    """The segments' tokens joined: a text's, or an earlier request's prompt and answer."""
    tokens: list[int] = []
    for segment in segments:
        tokens += (
            texts[segment] if isinstance(segment, str) else prompts[segment] + generated[segment]
        )
    return tokens


def prompts_of(trace: PrefixTrace, generated: list[list[int]], vocab_size: int) -> list[list[int]]:
    """Every request's prompt, given every request's generated tokens."""
    texts, prompts = texts_of(trace, vocab_size), []
    for _, segments, _ in trace.requests:
        prompts.append(prompt_of(segments, texts, prompts, generated))
    return prompts


# --- the engine -----------------------------------------------------------------------------


def attention_from(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """Dense attention of `n` new tokens at positions `start ..` over the K and V of every
    position up to each (`[start + n, num_kv_heads, head_dim]`), GQA as in `engine.py`."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) * q.shape[-1] ** -0.5
    future = torch.ones(q.shape[0], k.shape[0], dtype=torch.bool).triu(start + 1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.einsum("hts,shd->thd", scores.softmax(dim=-1), v)


class PrefixEngine:
    """The paged K and V pools, run through the candidate's cache."""

    def __init__(self, model: Any, cache: Any, trace: PrefixTrace) -> None:
        c = model.config
        self.model, self.cache = model, cache
        self.num_blocks, self.block_size = trace.num_blocks, trace.block_size
        shape = (self.num_blocks * self.block_size, c.num_kv_heads, c.head_dim)  # flat slots
        self.k_pools = [torch.zeros(shape) for _ in range(c.num_layers)]
        self.v_pools = [torch.zeros(shape) for _ in range(c.num_layers)]
        self.lengths: dict[int, int] = {}  # tokens of each live request in the cache

    def prompt(self, request_id: int, prompt: list[int]) -> tuple[int, list[int]]:
        """Allocate the prompt and run its tokens that are not cached: (how many prompt tokens
        the cache said it holds, the greedy token after each prompt token run)."""
        answer = self.cache.allocate_prompt(request_id, list(prompt))  # its own copy
        try:
            cached = operator.index(answer)
        except TypeError:
            raise stop(
                "allocate_prompt of request {id} returned {value}, not a number of tokens",
                id=request_id,
                value=f"{answer!r:.60}",
            ) from None
        if not 0 <= cached < len(prompt) or cached % self.block_size:
            raise stop(
                "allocate_prompt of request {id} said {cached} of its {count} prompt "
                "tokens are cached: expected a multiple of the block size {size} "
                "below {limit} (the last prompt token is always computed)",
                id=request_id,
                cached=cached,
                count=len(prompt),
                size=self.block_size,
                limit=len(prompt),
            )
        self.lengths[request_id] = len(prompt)
        return cached, self.run(request_id, prompt[cached:], cached)

    def decode(self, request_id: int, token: int) -> int:
        """Append `token` and run it: the next token."""
        self.cache.append_token(request_id, token)
        self.lengths[request_id] += 1
        return self.run(request_id, [token], self.lengths[request_id] - 1)[0]

    def free(self, request_id: int) -> None:
        self.cache.free(request_id)
        del self.lengths[request_id]

    def slots(self, request_id: int) -> torch.Tensor:
        """The flat slot of each of the request's tokens, through its block table (checked)."""
        length = self.lengths[request_id]
        table = self.cache.block_table(request_id)
        try:
            table = [operator.index(block) for block in table]
        except TypeError:
            raise stop("block_table({id}) holds something not a block id", id=request_id) from None
        if len(table) < -(-length // self.block_size):
            raise stop(
                "request {id} has {count} blocks for {length} tokens",
                id=request_id,
                count=len(table),
                length=length,
            )
        if any(not 0 <= block < self.num_blocks for block in table):
            raise stop(
                "request {id}'s block table {table} leaves the pool", id=request_id, table=table
            )
        positions = torch.arange(length)
        blocks = torch.tensor(table, dtype=torch.long)[positions // self.block_size]
        return blocks * self.block_size + positions % self.block_size

    def run(self, request_id: int, tokens: list[int], start: int) -> list[int]:
        """Run `tokens` at positions `start ..`: their K and V written into the pools, attention
        over the pools' K and V of every position; the greedy token after each."""
        slots = self.slots(request_id)
        new = slots[start:]

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            self.k_pools[layer][new] = k
            self.v_pools[layer][new] = v
            return attention_from(q, self.k_pools[layer][slots], self.v_pools[layer][slots], start)

        positions = torch.arange(start, start + len(tokens))
        return self.model.forward(torch.tensor(tokens), positions, attend).argmax(-1).tolist()


# --- serving and checking -------------------------------------------------------------------


def serve(prefix_cache: ModuleType, trace: str | PrefixTrace = "check") -> dict[str, Any]:
    """Serve `trace` (a name in `TRACES`, or a `PrefixTrace`) over the module's `PrefixCache`, on
    the CPU. Returns, JSON-able, every request's generated tokens, how many of its prompt tokens
    the cache said it held (`cached`), the engine's greedy token after each prompt token it
    computed but the last (`predicted`; the one after the last is the first generated token),
    and the figures."""
    trace = TRACES[trace] if isinstance(trace, str) else trace
    model = engine.TinyTransformer(MODEL, "cpu")
    cache = prefix_cache.PrefixCache(trace.num_blocks, trace.block_size)
    runner = PrefixEngine(model, cache, trace)
    texts = texts_of(trace, model.config.vocab_size)
    count = len(trace.requests)
    prompts: dict[int, list[int]] = {}
    generated: dict[int, list[int]] = {i: [] for i in range(count)}
    cached, predicted = [0] * count, [[] for _ in range(count)]
    waiting, live, done = list(range(count)), [], set()
    max_steps = sum(n for _, _, n in trace.requests) + max(a for a, _, _ in trace.requests) + 1
    steps, started = 0, time.perf_counter()
    while waiting or live:
        if steps == max_steps:
            raise stop("the trace is not served after {steps} steps", steps=steps)
        running = list(live)
        while waiting and len(live) < trace.max_live:  # join in order, once arrived and ready
            arrival, segments, _ = trace.requests[waiting[0]]
            earlier = [segment for segment in segments if isinstance(segment, int)]
            if (live and arrival > steps) or not done.issuperset(earlier):
                break
            request_id = waiting.pop(0)
            prompts[request_id] = prompt_of(segments, texts, prompts, generated)
            cached[request_id], chosen = runner.prompt(request_id, prompts[request_id])
            predicted[request_id] = chosen[:-1]
            generated[request_id].append(chosen[-1])
            live.append(request_id)
        for request_id in running:  # a decode step for the others
            generated[request_id].append(runner.decode(request_id, generated[request_id][-1]))
        for request_id in list(live):
            if len(generated[request_id]) == trace.requests[request_id][2]:
                runner.free(request_id)
                live.remove(request_id)
                done.add(request_id)
        steps += 1
    seconds = time.perf_counter() - started
    prompt_tokens = sum(map(len, prompts.values()))
    return {
        "requests": count,
        "tokens": sum(n for _, _, n in trace.requests),
        "steps": steps,
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_computed": prompt_tokens - sum(cached),
        "cached": cached,
        "predicted": predicted,
        "generated": [generated[i] for i in range(count)],
        "block_size": trace.block_size,
        "pool_blocks": trace.num_blocks,
        "max_live": trace.max_live,
        "seconds": round(seconds, 3),
    }


def compare(
    model: Any,
    prompts: list[list[int]],
    cached: list[int],
    predicted: list[list[int]],
    generated: list[list[int]],
) -> dict[str, Any]:
    """Every token the engine chose against dense decoding of its request alone, as
    `engine.compare` does (near-ties excused), at every position it computed: after each prompt
    token it did not read from the cache (`predicted`, then the first generated token), and after
    each generated token it fed back."""
    mismatches, near_ties, checked, first = 0, 0, 0, None
    min_margin = math.inf
    for request_id, prompt in enumerate(prompts):
        start = cached[request_id]
        chosen = predicted[request_id] + generated[request_id]
        tokens = torch.tensor(prompt + generated[request_id][:-1])
        dense = model.forward(
            tokens,
            torch.arange(len(tokens)),
            lambda _, q, k, v: engine.causal_attention(q, k, v),
        )[start:]
        judged = engine.judge(dense, chosen)
        mismatches, near_ties = mismatches + len(judged.wrong), near_ties + judged.near_ties
        min_margin = min(min_margin, judged.min_margin)
        checked += len(chosen)
        if first is None and judged.wrong:
            offset, expected, got, margin = judged.wrong[0]
            first = {
                "request": request_id,
                "position": start + offset,
                "prompt_tokens": len(prompt),
                "expected": expected,
                "got": got,
                "margin": margin,
            }
    return {
        "positions_checked": checked,
        "mismatches": mismatches,
        "near_ties": near_ties,
        "first_mismatch": first,
        "min_margin": round(min_margin, 4),
    }
