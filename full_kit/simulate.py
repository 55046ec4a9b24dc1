"""`python -m full_kit.simulate`: why paging and continuous batching win, counted token by token.

A model of serving that counts tokens and blocks only (`grader/scoring/batching.py`: traces, steps,
servers): no tensors, and no answer key imported. Its paged server is Part 5's scheduler in another
form, so this module stays out of the candidate bundle. Every scheme serves the same trace from the
same pool of slots:

- **static batching** (`batching.static_batching`): when no batch runs, the waiting requests
  are taken first come, first served while seats remain and their worst case (`prompt_len +
  max_new_tokens`, in blocks) fits in the pool; the batch then runs until its longest request
  ends, its finished requests keeping their seats and slots, and only then does the next start.
- **continuous batching over a paged pool** (`continuous_batching`): exercises/README.md part 5 step
  for step (decode oldest admission first, preempting the newest running request by recomputation
  when the pool runs dry; admit first come, first served, only in a step without preemption, while
  seats and `ceil((prompt_len + 1) / block_size)` free blocks allow; free the finished). The kit's
  tests check it against the reference scheduler, step by step. A step that re-prefills a preempted
  request costs nothing more here: the recomputed tokens are counted apart.
- **continuous batching over contiguous reservations** (`contiguous_batching`): Orca, as the
  vLLM paper (Kwon et al., SOSP 2023) re-implements it for its baselines (§6.1): on admission
  a request reserves one contiguous range of slots for its whole life, placed by a buddy
  allocator (rounded up to a power of two, aligned to its size), so a decode never fails and
  nothing is preempted. "Each request reserves its maximum length" is the paper's Orca (Max):
  the model's maximum length, 2048 tokens (OPT's), which is what a server must reserve when it
  cannot know where generation stops. The paper's other two bound it: Orca (Pow2) reserves the
  prompt plus the output length rounded up to a power of two (at most 2x over), and Orca
  (Oracle) exactly `prompt_len + max_new_tokens`, which in this kit, where a request always
  generates `max_new_tokens`, is a server that knows every output length in advance.

Memory is sampled once per step, after the step's tokens are in place and before the finished
requests give their slots back. "Slots holding tokens" is the time average of the tokens held
by the requests being served over the slots held: reserved (contiguous; static, for the batch's
worst case, until the batch ends) or allocated (paged: whole blocks). "Pool holding tokens
under load" is the share of the whole pool holding tokens, averaged over the steps that leave a
request waiting: the paper's Fig. 2 measures this (token states as a share of the KV cache,
20.4% for Orca (Max), 26.8% Pow2, 38.2% Oracle, 96.3% for vLLM with blocks of 16) while
serving more than the memory holds.

The default trace (`make_trace`): 600 requests, Poisson arrivals at 0.5 per step (faster than
any scheme serves them, so memory is the limit); prompt and output lengths log-normal with
medians 100 and 200 tokens and sigma 1.0 (long-tailed: the mean is 1.65 times the median),
rounded and clipped to 1..1024, so no request exceeds 2048 tokens. Their means (about 153 and
332) are close to those of the ShareGPT trace the paper serves (161 and 338, its Fig. 11). The
pool holds 16 384 token slots, roughly the KV cache of OPT-13B on an A100-40GB (some 12 GB
at 800 KB a token: the paper's Fig. 1 and §3), with 256 seats, so seats never limit the batch.

The command (`main`) then serves `prefix_simulation`'s shared-prefix trace with prefix caching
and without, over the answer key's `PrefixCache`, which `simulate()` itself never imports.
"""

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from grader.report.svg import draw
from grader.said import Said, recorded, said
from grader.scoring.batching import Arrivals, Blocked, Seq, Server, Step, serve, static_batching
from kernels.reference import cdiv

POOL_TOKENS = 16384
MAX_NUM_SEQS = 256
MODEL_MAX_LEN = 2048
BLOCK_SIZES = (1, 8, 16, 32, 128)
STATIC_BLOCK_SIZE = 16  # static and continuous batching are compared at vLLM's default block size
NUM_REQUESTS = 600
ARRIVAL_RATE = 0.5  # requests per step, Poisson
PROMPT_MEDIAN, OUTPUT_MEDIAN, SIGMA, MAX_LEN = 100, 200, 1.0, 1024
# The vLLM paper's Fig. 2: share of the KV cache holding token states, in percent.
PAPER = {
    "contiguous-max": 20.4,
    "contiguous-pow2": 26.8,
    "contiguous-exact": 38.2,
    "paged-16": 96.3,
}
# How many slots a request reserves, from its (prompt_len, max_new_tokens): the paper's Orca.
RESERVATIONS: dict[str, Callable[[int, int], int]] = {
    "max": lambda prompt_len, max_new_tokens: MODEL_MAX_LEN,
    "pow2": lambda prompt_len, max_new_tokens: (
        prompt_len + (1 << (max_new_tokens - 1).bit_length())
    ),
    "exact": lambda prompt_len, max_new_tokens: prompt_len + max_new_tokens,
}
PLOTTED = (f"static-{STATIC_BLOCK_SIZE}", "contiguous-max", "paged-16")
# What every full-kit report shows of the simulation (`report_figures`), kept: the same for
# every submission, read by each grading (`grade.simulation`).
REPORT_FIGURES = Path(__file__).with_name("report_figures.json")
POINTS = 150  # points per plotted series: each is the mean over a window of steps


class Paged(Blocked):
    """Continuous batching over a paged pool: exercises/README.md part 5, step for step."""

    def __init__(self, num_blocks: int, block_size: int, max_num_seqs: int) -> None:
        super().__init__(num_blocks, block_size, max_num_seqs)
        self.free = num_blocks

    def step(self) -> Step:
        out = Step([], [], [])
        i = 0
        while i < len(self.running):  # a preemption shortens the list from the tail
            seq = self.running[i]
            if self._make_room(seq, out):
                seq.seq_len += 1
                out.scheduled.append(seq.request_id)
            i += 1
        bs = self.block_size
        while not out.preempted and self.waiting and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            if cdiv(head.seq_len + 1, bs) > self.free:
                break
            self.waiting.popleft()
            self.free -= cdiv(head.seq_len + 1, bs)  # its prefill and its first token
            head.seq_len += 1
            self.running.append(head)
            out.scheduled.append(head.request_id)
        self.sample(out, (self.capacity - self.free) * bs)
        self._finish(out)
        return out

    def _make_room(self, seq: Seq, out: Step) -> bool:
        """Take the block `seq`'s next token needs (if it starts one), preempting the newest
        running request while none is free; False when `seq` itself was preempted."""
        need = 1 if seq.seq_len % self.block_size == 0 else 0
        while need > self.free:
            victim = self.running.pop()
            self.free += cdiv(victim.seq_len, self.block_size)
            self.waiting.appendleft(victim)  # recomputed later, its tokens as its prompt
            out.preempted.append(victim.request_id)
            out.recomputed += victim.seq_len
            if victim is seq:
                return False
        self.free -= need
        return True

    def _finish(self, out: Step) -> None:
        for seq in self.running:
            if seq.seq_len == seq.final_len:
                self.free += cdiv(seq.seq_len, self.block_size)
                out.finished.append(seq.request_id)
        self.running = [seq for seq in self.running if seq.seq_len < seq.final_len]


class Contiguous(Server):
    """Continuous batching where each request takes, on admission and for its whole life, one
    contiguous range of `reserve(prompt_len, max_new_tokens)` slots of a pool of `pool_tokens`,
    placed by a binary buddy allocator: the range is rounded up to a power of two and aligned
    to its size (modelled as the lowest such free range)."""

    def __init__(
        self, pool_tokens: int, reserve: Callable[[int, int], int], max_num_seqs: int
    ) -> None:
        super().__init__(pool_tokens, max_num_seqs)
        self.reserve = reserve

    def need(self, prompt_len: int, max_new_tokens: int) -> int:
        """The reservation, rounded up to a power of two."""
        reserved = self.reserve(prompt_len, max_new_tokens)
        if reserved < prompt_len + max_new_tokens:
            raise ValueError(
                f"a reservation of {reserved} slots cannot hold a request of "
                f"{prompt_len + max_new_tokens} tokens: reserve at least its final length"
            )
        return 1 << (reserved - 1).bit_length()

    def step(self) -> Step:
        out = Step([], [], [])
        for seq in self.running:  # its reservation holds every token it will have
            seq.seq_len += 1
            out.scheduled.append(seq.request_id)
        while self.waiting and len(self.running) < self.max_num_seqs:
            head = self.waiting[0]
            start = self._place(head.need)
            if start is None:
                break
            self.waiting.popleft()
            head.start = start
            head.seq_len += 1
            self.running.append(head)
            out.scheduled.append(head.request_id)
        self.sample(out, sum(seq.need for seq in self.running))
        for seq in self.running:
            if seq.seq_len == seq.final_len:
                out.finished.append(seq.request_id)
        self.running = [seq for seq in self.running if seq.seq_len < seq.final_len]
        return out

    def _place(self, size: int) -> int | None:
        """The lowest free range of `size` slots that starts at a multiple of `size` (where a
        buddy allocator can place it), or None: fragmentation can refuse a request although
        enough slots are free in all."""
        start = 0
        for seq in sorted(self.running, key=lambda seq: seq.start):
            if seq.start - start >= size:
                return start
            start = max(start, cdiv(seq.start + seq.need, size) * size)
        return start if self.capacity - start >= size else None


def continuous_batching(
    trace: Arrivals, num_blocks: int, block_size: int, max_num_seqs: int
) -> list[Step]:
    """Serve `trace` by continuous batching over a paged pool, as exercises/README.md part 5
    schedules it."""
    return serve(trace, Paged(num_blocks, block_size, max_num_seqs))


def contiguous_batching(
    trace: Arrivals, pool_tokens: int, reserve: Callable[[int, int], int], max_num_seqs: int
) -> list[Step]:
    """Serve `trace` by continuous batching over contiguous reservations of
    `reserve(prompt_len, max_new_tokens)` slots each, placed by a buddy allocator
    (`RESERVATIONS` holds the paper's three)."""
    return serve(trace, Contiguous(pool_tokens, reserve, max_num_seqs))


def summarise(steps: list[Step], pool_tokens: int) -> dict:
    """A run's figures: steps to drain, means over all its steps, the two memory shares (in
    percent; `None` where undefined)."""
    count = max(len(steps), 1)
    held = sum(step.held for step in steps)
    loaded = [step.used for step in steps if step.waiting]
    return {
        "steps": len(steps),
        "tokens": sum(len(step.scheduled) for step in steps),
        "tokens_per_step": sum(len(step.scheduled) for step in steps) / count,
        "running_mean": sum(step.running for step in steps) / count,
        "running_max": max((step.running for step in steps), default=0),
        "preemptions": sum(len(step.preempted) for step in steps),
        "recomputed_tokens": sum(step.recomputed for step in steps),
        "slots_holding_tokens": 100 * sum(step.used for step in steps) / held if held else None,
        "pool_holding_tokens_under_load": (
            100 * sum(loaded) / (len(loaded) * pool_tokens) if loaded else None
        ),
    }


def make_trace(seed: int, num_requests: int = NUM_REQUESTS, rate: float = ARRIVAL_RATE) -> Arrivals:
    """The default synthetic trace (see the module docstring), the same for the same seed."""
    rng = random.Random(seed)

    def length(median: int) -> int:
        return min(MAX_LEN, max(1, round(rng.lognormvariate(math.log(median), SIGMA))))

    trace, clock = [], 0.0
    for _ in range(num_requests):
        trace.append((int(clock), length(PROMPT_MEDIAN), length(OUTPUT_MEDIAN)))
        clock += rng.expovariate(rate)
    return trace


def schemes() -> dict[str, tuple[str, Callable[[Arrivals], list[Step]]]]:
    """Every scheme of the figures, by key: its label and how it serves a trace."""
    pool, seats, bs = POOL_TOKENS, MAX_NUM_SEQS, STATIC_BLOCK_SIZE
    table: dict[str, tuple[str, Callable[[Arrivals], list[Step]]]] = {
        f"static-{bs}": (
            said("static, blocks of {size}", size=bs),
            lambda trace: static_batching(trace, pool // bs, bs, seats),
        )
    }
    for name, paper_name in (("max", "Max"), ("pow2", "Pow2"), ("exact", "Oracle")):
        table[f"contiguous-{name}"] = (
            said("continuous, contiguous: Orca ({name})", name=paper_name),
            lambda trace, reserve=RESERVATIONS[name]: contiguous_batching(
                trace, pool, reserve, seats
            ),
        )
    for size in BLOCK_SIZES:
        table[f"paged-{size}"] = (
            said("continuous, paged: block {size}", size=size),
            lambda trace, size=size: continuous_batching(trace, pool // size, size, seats),
        )
    return table


def simulate(seed: int = 0, progress: Callable[[str], None] = lambda line: None) -> dict:
    """Every scheme on the default trace drawn from `seed`: the figures, JSON-able.

    `progress` gets one line as each scheme is done.
    """
    trace = make_trace(seed)
    prompts, outputs = [p for _, p, _ in trace], [n for *_, n in trace]
    lengths = f"log-normal, sigma {SIGMA:g}, rounded and clipped to 1..{MAX_LEN}"
    figures: dict = {
        "parameters": {
            "seed": seed,
            "requests": len(trace),
            "arrivals": f"Poisson, {ARRIVAL_RATE:g} requests per step",
            "prompt_len": f"median {PROMPT_MEDIAN}, {lengths}",
            "max_new_tokens": f"median {OUTPUT_MEDIAN}, {lengths}",
            "pool_tokens": POOL_TOKENS,
            "max_num_seqs": MAX_NUM_SEQS,
            "model_max_len": MODEL_MAX_LEN,
        },
        "trace": {
            "prompt_mean": sum(prompts) / len(trace),
            "prompt_max": max(prompts),
            "output_mean": sum(outputs) / len(trace),
            "output_max": max(outputs),
            "last_arrival": trace[-1][0],
        },
        "paper": PAPER,
        "schemes": {},
        "series": {},
    }
    runs = {}
    for key, (label, serve_trace) in schemes().items():
        started = time.perf_counter()
        runs[key] = serve_trace(trace)
        figures["schemes"][key] = {"label": label, **summarise(runs[key], POOL_TOKENS)}
        progress(f"{label}: {len(runs[key]):,} steps ({time.perf_counter() - started:.1f} s)")
    window = max(1, cdiv(max(len(runs[key]) for key in PLOTTED), POINTS))
    figures["window"] = window
    for key in PLOTTED:
        figures["series"][key] = {
            "tokens": windowed([len(step.scheduled) for step in runs[key]], window),
            "running": windowed([step.running for step in runs[key]], window),
        }
    return figures


def windowed(values: list[int], window: int) -> list[list[float]]:
    """`[step, mean]` per window of `window` steps, `step` being the window's middle."""
    return [
        [start + (len(chunk) - 1) / 2, sum(chunk) / len(chunk)]
        for start in range(0, len(values), window)
        for chunk in [values[start : start + window]]
    ]


def rows(figures: dict) -> list[list[str]]:
    """The table: a header, then one row per scheme."""
    body = [[said("scheme"), said("steps"), said("tokens/step"), said("running: mean, max"),
             said("preempted (recomputed)"), said("slots holding tokens"),
             said("pool holding tokens, under load"), said("paper")]]  # fmt: skip
    for key, s in figures["schemes"].items():
        paper = figures["paper"].get(key)
        body.append([
            s["label"],
            f"{s['steps']:,}",
            f"{s['tokens_per_step']:.1f}",
            f"{s['running_mean']:.1f}, {s['running_max']}",
            said("{count} ({tokens} tokens)", count=f"{s['preemptions']:,}",
                 tokens=f"{s['recomputed_tokens']:,}"),
            percent(s["slots_holding_tokens"]),
            percent(s["pool_holding_tokens_under_load"]),
            percent(paper),
        ])  # fmt: skip
    return body


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def table(body: list[list[str]]) -> str:
    """`rows`' table as aligned text: the first column left-aligned, the figures right-aligned."""
    widths = [max(len(row[i]) for row in body) for i in range(len(body[0]))]
    lines = [
        "  ".join(
            [row[0].ljust(widths[0])]
            + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        )
        for row in body
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def headline(figures: dict) -> str:
    """The two comparisons in one sentence each: batching, then memory."""
    s = figures["schemes"]
    static, paged, orca = s[f"static-{STATIC_BLOCK_SIZE}"], s["paged-16"], s["contiguous-max"]
    batching = said(
        "Continuous batching (paged, block {size}) against static batching on the same pool: "
        "{paged} against {static} tokens per step ({speedup}x), {paged_steps} against "
        "{static_steps} steps to drain.",
        size=STATIC_BLOCK_SIZE,
        paged=f"{paged['tokens_per_step']:.1f}",
        static=f"{static['tokens_per_step']:.1f}",
        speedup=f"{paged['tokens_per_step'] / static['tokens_per_step']:.1f}",
        paged_steps=f"{paged['steps']:,}",
        static_steps=f"{static['steps']:,}",
    )
    memory = said(
        "Pool holding tokens under load: {contiguous} reserving {max_len} contiguously (paper: "
        "{contiguous_paper}), {paged_pool} paged with blocks of {size} (paper: {paged_paper}).",
        contiguous=percent(orca["pool_holding_tokens_under_load"]),
        max_len=MODEL_MAX_LEN,
        contiguous_paper=percent(PAPER["contiguous-max"]),
        paged_pool=percent(paged["pool_holding_tokens_under_load"]),
        size=STATIC_BLOCK_SIZE,
        paged_paper=percent(PAPER["paged-16"]),
    )
    return said("{batching}\n{memory}", batching=batching, memory=memory)


def category(label: Said) -> Said:
    """A scheme's label as the bar chart's group, on two lines: "contiguous\nOrca (Max)"."""
    if "name" in label.params:
        return said("contiguous\n{name}", name=f"Orca ({label.params['name']})")
    return said("paged\nblock {size}", size=label.params["size"])


def chart_specs(figures: dict) -> dict[str, dict]:
    """The plots as data (`svg.draw` draws one), by file name: tokens per step and requests
    running over time (static batching, continuous over contiguous reservations, continuous
    over paging), and the KV memory holding tokens per scheme, beside the paper's figures."""
    s = figures["schemes"]
    over_time = said("step (mean over windows of {window} steps)", window=figures["window"])
    series = {s[key]["label"]: values for key, values in figures["series"].items()}
    memory = [key for key in s if not key.startswith("static")]
    categories = [category(s[key]["label"]) for key in memory]

    def over_steps(title: str, y_label: str, measure: str) -> dict:
        points = {label: values[measure] for label, values in series.items()}
        return {"kind": "line", "args": {"title": title, "x_label": over_time,
                                         "y_label": y_label, "series": points}}  # fmt: skip

    return {
        "tokens_per_step.svg": over_steps(
            said("Tokens generated per step"), said("tokens per step"), "tokens"
        ),
        "running.svg": over_steps(
            said("Requests running at once"), said("requests holding memory"), "running"
        ),
        "memory.svg": {
            "kind": "bar",
            "args": {
                "title": said("KV cache slots holding tokens"),
                "categories": categories,
                "series": {
                    said("of the slots reserved or allocated"): [
                        s[key]["slots_holding_tokens"] for key in memory
                    ],
                    said("of the whole pool, under load"): [
                        s[key]["pool_holding_tokens_under_load"] for key in memory
                    ],
                    said("of the KV cache, the vLLM paper's Fig. 2"): [
                        figures["paper"].get(key) for key in memory
                    ],
                },
                "unit": said("slots (%)"),
            },
        },
    }


def report_figures(figures: dict) -> dict:
    """The headline, table and charts (as data) of `figures` that every full-kit report shows,
    as `report.json` holds them (`said.recorded`). Those of the default trace are kept in
    `REPORT_FIGURES` (`keep`), and the kit's tests check that they are current."""
    return recorded(
        {
            "headline": headline(figures),
            "rows": rows(figures),
            "charts": list(chart_specs(figures).values()),
        }
    )


def keep() -> None:
    """Write the default trace's `report_figures` to `REPORT_FIGURES`, for the gradings."""
    text = json.dumps(report_figures(simulate()), ensure_ascii=False, indent=1)
    REPORT_FIGURES.write_text(text + "\n", encoding="utf-8")


def charts(figures: dict) -> dict[str, str]:
    """The plots as SVG, by file name."""
    return {name: draw(spec) for name, spec in chart_specs(figures).items()}


def main(argv: list[str]) -> int:
    # Imported here: it imports this module, and it serves over the answer key, which
    # `simulate()` (the grade report's figures) keeps clear of.
    from full_kit import prefix_simulation as prefix

    cli = argparse.ArgumentParser(
        prog="python -m full_kit.simulate",
        description="Static against continuous batching, contiguous against paged KV memory, "
        "on a synthetic long-tailed trace, then prefix caching on shared prefixes: prints the "
        "tables, writes their figures (JSON) and the plots.",
    )
    cli.add_argument("--out", type=Path, default=Path("reports/simulation"),
                     help="folder to write into (default %(default)s)")  # fmt: skip
    cli.add_argument("--seed", type=int, default=0, help="seed of the traces (default 0)")
    cli.add_argument("--keep", action="store_true",
                     help=f"after a change to the simulation: only write the figures every "
                     f"report shows to full_kit/{REPORT_FIGURES.name} (the default trace, "
                     "seed 0; --seed and --out do not apply)")  # fmt: skip
    args = cli.parse_args(argv)
    if args.keep:
        keep()
        print(f"Wrote {REPORT_FIGURES}.", file=sys.stderr)
        return 0
    started = time.perf_counter()
    print(f"Simulating {NUM_REQUESTS} requests (seed {args.seed}) under each scheme...",
          file=sys.stderr)  # fmt: skip
    figures = simulate(args.seed, lambda line: print(f"  {line}", file=sys.stderr))
    parameters, trace = figures["parameters"], figures["trace"]
    print(
        f"Arrivals: {parameters['requests']} requests, {parameters['arrivals']}; prompt_len "
        f"{parameters['prompt_len']} (mean {trace['prompt_mean']:.0f}); max_new_tokens "
        f"{parameters['max_new_tokens']} (mean {trace['output_mean']:.0f}).\n"
        f"Pool: {parameters['pool_tokens']:,} token slots, {parameters['max_num_seqs']} seats.\n"
    )
    print(table(rows(figures)))
    print(f"\n{headline(figures)}")
    print("Serving shared prefixes with prefix caching and without...", file=sys.stderr)
    shared = prefix.simulate(args.seed)
    print(f"\n{prefix.describe(shared)}\n\n{table(prefix.rows(shared))}\n")
    print(prefix.headline(shared))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "simulation.json").write_text(json.dumps(figures, indent=1) + "\n")
    for name, svg in charts(figures).items():
        (args.out / name).write_text(svg, encoding="utf-8")
    written = ["simulation.json", *charts(figures), *prefix.write(shared, args.out)]
    print(f"Wrote {', '.join(written)} to {args.out}/ "
          f"({time.perf_counter() - started:.1f} s).", file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
