"""GPU timing of a paged-attention decode: the suite, its inputs, and the timed batches.

Standalone (stdlib and torch only): the grader copies this file into the sandboxed worker
(`grader.sandbox.launch.TOOLS`) and runs `prepare_batch` and `run_batch` there on the
candidate's `paged_attention` module, where no kit package is importable. The grading process and
`full_kit.gpu_check` import it too: to rebuild the very inputs a timed call saw, to turn the times
they measure into a time per call (`per_call_ms`), to choose how many calls a batch makes
(`calibrate`, `choose_calls`), to cross-check the worker's CUDA events (`event_disagreement`) and
to measure the copy bandwidth.

The suite
---------
Batch {1, 16, 64} x context {512, 4096, 16384}; 32 query and 8 kv heads, head dim 128,
bfloat16, block size 16 (`SUITE`). Every sequence of a batch holds `context` tokens.

Inputs
------
An input set (`make_kv`) is a K and a V pool holding exactly the batch's blocks plus one padding
block, block tables shuffled over the pool, each ending with one padding entry that names the
padding block, and the lengths. The padding block, and the slots past a length in a last
block, hold NaN: a kernel that reads them turns its output NaN. Several sets per shape
(`input_sets`) are rotated from call to call: at least two, and as many as it takes for the sets
together to span `ROTATION_MIN_BYTES` (at most `MAX_INPUT_SETS`), far past the L2 of any GPU, so
that a set has been evicted by the others before its turn comes again. Tables come from a seeded
CPU generator; the pools (up to 4 GiB a set) from a seeded generator on the device itself,
because CPU random numbers for them would take minutes. Both are deterministic for a given device
and torch, so the grading process rebuilds them bit for bit on its own GPU. Every call also gets
a fresh query, drawn on the device just before the call from a generator the batch's seed starts
(`query_stream`): a query does not exist before its call, and an output memoised from an earlier
call is wrong for the new query.

How it is measured
------------------
The grading process times; the worker only runs. Nothing a worker reports is evidence of time:
this tool runs in the candidate's own process, where code can rewrite any clock, event or
function the tool calls (rewriting the clock and `Event.elapsed_time` turned 55 ms into 6.9 ms).

`prepare_batch` (a worker call the grading process does not time) builds a shape's input sets,
makes the warm-up calls (past Triton's JIT and any autotuning), synchronises the device and
returns a `Batch`, a handle the grading process passes back.

`run_batch(batch, calls=N, seed=..., kernel=True)` is the timed batch: the grading process reads
its own `time.perf_counter` around the whole worker call, round trip and all. In the worker
(`Batch.run`): synchronise the device; record a CUDA event; N times, draw the call's query and
call the kernel on it and on the next input set, keeping every output; record a second event;
synchronise the device. Then, past the sync: check every output's shape, dtype and device and
that no call returned an earlier call's buffer, stack the outputs, flag each call whose output
holds NaN or Inf, gather `SAMPLES_PER_CALL` rows of every call's output, and reply with the
events' time, the flags and the rows of all N calls. The calls are enqueued back to back, as in
a decode loop: a call takes its kernel's device time, or its wrapper's host time where that is
the longer (at the smallest shapes, where a kernel takes a few microseconds and a Triton launch
from Python ten or more), for candidate and reference alike. A call's time also holds drawing
its query (one small random-number kernel) and freeing its output once the batch is done: a few
microseconds, the same for both.

`run_batch(batch, calls=N, seed=..., kernel=False)` is the empty batch: the same worker call with
the same N and no call at all: no query and no kernel, but the same syncs, checks, stack, gather
and a reply of the same size (its "outputs" are N references to one zero tensor). The grading
process times it in the same round, just before the timed batch, with a seed of its own (the
timed batch's seed is not known before the timed batch starts). Per call, the grading process
takes (median timed batch - median empty batch) / N (`per_call_ms`): the round trip, the request
and the reply, and everything past the sync cancel; what is left is the N calls. The empty batch
subtracted from the candidate's is never above the reference's: the candidate's process could
stretch its own empty batch to shrink its calls.

N: a batch must dominate its round trip (on the order of a millisecond, more with a reply of
thousands of rows) and the round trip's jitter. `calibrate` times batches of 1, 4, 16, ...
calls, each less its empty batch, on the grading process's clock, until one takes past
`CALIBRATION_MS`; its time per call is the estimate. `choose_calls` then takes enough calls for
the reference's batch to take `TARGET_BATCH_MS` (20 ms: the round trip's jitter, a fraction of a
millisecond, stays a few percent of a batch; the slowest shapes make about 20 calls, the
smallest a thousand or more), within `max_calls` (every output of a batch is kept until the
sync: `MAX_BATCH_OUTPUT_BYTES`), and fewer where the candidate's batch would pass
`MAX_BATCH_MS`; candidate and reference make the same N, so that their empty batches compare.

The L2: no flush. The earlier per-call timing zeroed twice the L2 before each call, outside the
events' window; a batch timed whole has no outside. Inside the batch a flush would be part of
every call, tens of microseconds of memset, longer than the smallest kernels themselves; taking
it out again with an empty batch of N flushes would leave the small kernels' times a difference
of two large numbers, and the flush's dirty lines, written back while the next kernel reads,
shift time between flush and kernel. The rotation replaces it: the sets of a shape span
`ROTATION_MIN_BYTES` together, so every call reads its K and V from memory, as a call after a
flush did, with nothing else in the time. For the same reason no sleep kernel hides the wrapper
any more: it would be most of every call.

The CUDA events are a cross-check only. Their time over N is what the worker says a call took;
it is never scored. Where its median over the rounds and the grading process's time per call
are more than `1 + EVENT_TOLERANCE` times apart (`EVENT_SLACK_MS` over the batch allowed), the
timing is flagged for review (`event_disagreement`).

The rows tie the time to the work. They are drawn after the calls (`sample_rows`), from a
generator the batch's seed starts: nothing the kernel is given says which rows will be read. The
reply of a timed batch carries the rows of every call, and the grading process re-checks a few
calls', chosen after the reply, against the float64 oracle: a worker that skipped the sync, or
left work running past its reply, would have to send rows no kernel had computed yet, and a
kernel that skips, approximates or reuses any share of its rows is caught with a probability
that grows with every batch. A candidate could predict the rows or the queries only by reading
this tool's state or arguments from inside its own process, introspection the static scan flags
for review.

Bytes moved (`bytes_moved`): K and V of the real tokens once each (under GQA a kv head is
counted once, however many query heads read it), q, the output, and the table entries and
lengths read. It is a floor on the traffic: achieved GB/s is these bytes over the time.
"""

import hashlib
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

WARMUP_CALLS = 2  # per prepared batch, before its timed calls: past JIT compilation and autotuning
SAMPLES_PER_CALL = 2  # output rows sent back, per call of a batch
ROTATION_MIN_BYTES = 512 << 20  # input sets per shape: together at least this, far past any L2
MAX_INPUT_SETS = 256
MAX_CALLS = 4096  # per batch
MAX_BATCH_OUTPUT_BYTES = 512 << 20  # a batch keeps every output until its sync
TARGET_BATCH_MS = 20.0  # the reference's timed batch, on the grading process's clock
CALIBRATION_MS = 5.0  # a calibration batch this long gives the estimate N is chosen from
CALIBRATION_GROWTH = 4  # calls of the next calibration batch, times those of the last
MAX_BATCH_MS = 200.0  # a candidate's batch, at most (10x the target: the loosest speed tier)
MIN_CALL_MS = 1e-6  # a time per call is never below this (a ratio must stay finite)
EVENT_TOLERANCE = 0.25  # events and grading process may be 1.25x apart per call, either way,
EVENT_SLACK_MS = 1.0  # ... give or take this much over the batch
COPY_BYTES = 1 << 30  # copy-bandwidth buffer: far past any L2
COPY_REPEATS = 10


@dataclass(frozen=True)
class Shape:
    """One decode batch of the suite: `batch` sequences of `context` tokens each."""

    batch: int
    context: int
    num_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    block_size: int = 16
    dtype: str = "bfloat16"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def blocks_per_seq(self) -> int:
        return -(-self.context // self.block_size)

    @property
    def num_blocks(self) -> int:
        """The batch's blocks, then the padding block (the pool's last)."""
        return self.batch * self.blocks_per_seq + 1

    @property
    def pool_shape(self) -> tuple[int, int, int, int]:
        return (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)

    @property
    def query_shape(self) -> tuple[int, int, int]:
        """q's shape, and the output's."""
        return (self.batch, self.num_heads, self.head_dim)


SUITE = {
    f"batch{batch}-ctx{context}": Shape(batch, context)
    for batch in (1, 16, 64)
    for context in (512, 4096, 16384)
}


def element_bytes(shape: Shape) -> int:
    return torch.empty((), dtype=shape.torch_dtype).element_size()


def bytes_moved(shape: Shape) -> int:
    """The bytes a decode of `shape` must move at the least (see the module's docstring)."""
    element = element_bytes(shape)
    tokens = shape.batch * shape.context
    kv = 2 * tokens * shape.num_kv_heads * shape.head_dim * element
    q_and_out = 2 * shape.batch * shape.num_heads * shape.head_dim * element
    tables_and_lengths = shape.batch * (shape.blocks_per_seq + 1) * 4
    return kv + q_and_out + tables_and_lengths


def input_sets(shape: Shape) -> int:
    """How many input sets of `shape` are rotated: at least 2, and enough to span
    `ROTATION_MIN_BYTES` together (at most `MAX_INPUT_SETS`)."""
    set_bytes = 2 * math.prod(shape.pool_shape) * element_bytes(shape)
    return max(2, min(MAX_INPUT_SETS, -(-ROTATION_MIN_BYTES // set_bytes)))


def max_calls(shape: Shape) -> int:
    """The most calls a batch of `shape` makes: `MAX_CALLS`, fewer where the outputs it keeps
    would pass `MAX_BATCH_OUTPUT_BYTES`."""
    output = math.prod(shape.query_shape) * element_bytes(shape)
    return max(1, min(MAX_CALLS, MAX_BATCH_OUTPUT_BYTES // output))


def seed_of(*parts: Any) -> int:
    """A 63-bit seed from `parts` (their repr): unrelated seeds for nearby parts."""
    digest = hashlib.sha256(repr(("gpu-timing", *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def make_kv(shape: Shape, set_index: int, device: str | torch.device) -> tuple[torch.Tensor, ...]:
    """Input set `set_index` of `shape` on `device`: `(k_cache, v_cache, block_tables, seq_lens)`.

    Same device type and torch version, same tensors: the grading process rebuilds them.
    """
    device = torch.device(device)
    tables_generator = torch.Generator().manual_seed(seed_of(shape, "tables", set_index))
    owned = shape.batch * shape.blocks_per_seq
    order = torch.randperm(owned, generator=tables_generator).view(shape.batch, -1)
    padding = torch.full((shape.batch, 1), owned)  # the pool's last block
    block_tables = torch.cat([order, padding], dim=1).to(device, torch.int32)
    seq_lens = torch.full((shape.batch,), shape.context, dtype=torch.int32, device=device)

    pool_generator = torch.Generator(device).manual_seed(seed_of(shape, "pools", set_index))
    pools = []
    for _ in range(2):
        pool = torch.randn(
            shape.pool_shape, generator=pool_generator, device=device, dtype=shape.torch_dtype
        )
        pool[owned] = math.nan
        tail = shape.context % shape.block_size
        if tail:
            pool[block_tables[:, shape.blocks_per_seq - 1].long(), tail:] = math.nan
        pools.append(pool)
    return pools[0], pools[1], block_tables, seq_lens


def query_stream(shape: Shape, seed: int, device: str | torch.device) -> Iterator[torch.Tensor]:
    """The queries of the batch seeded `seed`, call after call: `[batch, heads, dim]` in the
    suite's dtype, drawn on `device` from one generator (the grading process replays it)."""
    device = torch.device(device)
    generator = torch.Generator(device).manual_seed(seed_of(shape, "query", seed))
    while True:
        yield torch.randn(
            shape.query_shape, generator=generator, device=device, dtype=shape.torch_dtype
        )


def call_inputs(
    shape: Shape, seed: int, call: int, kv_sets: Sequence[tuple[torch.Tensor, ...]]
) -> tuple[torch.Tensor, ...]:
    """The arguments of call `call` of the batch seeded `seed`: its query (the stream replayed on
    the input sets' device) and the input set its turn comes to."""
    queries = query_stream(shape, seed, kv_sets[0][0].device)
    for _ in range(call):
        next(queries)
    return (next(queries), *kv_sets[call % len(kv_sets)])


def sample_rows(
    shape: Shape, seed: int, calls: int, count: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The `(sequence, head)` rows of each call's output that the batch seeded `seed` sends back:
    two int64 tensors `[calls, count]` (fewer columns if an output has fewer rows), the rows of a
    call distinct. They depend on `calls`: rebuild them with the batch's own."""
    total = shape.batch * shape.num_heads
    generator = torch.Generator().manual_seed(seed_of(shape, "rows", seed))
    picked = torch.empty((calls, 0), dtype=torch.long)
    for drawn in range(min(count, total)):
        # Uniform over the rows not picked yet: a draw among `total - drawn`, moved past each
        # picked row at or below it, smallest first.
        row = torch.randint(total - drawn, (calls,), generator=generator)
        for taken in picked.sort(dim=1).values.unbind(dim=1):
            row += row >= taken
        picked = torch.cat([picked, row.unsqueeze(1)], dim=1)
    return picked // shape.num_heads, picked % shape.num_heads


class HostEvent:
    """`torch.cuda.Event`'s timing on the host clock: the stand-in on CPU, where the kit's tests
    check the batch's bookkeeping. Its times mean nothing: the kit never times on the CPU."""

    def record(self) -> None:
        self.seconds = time.perf_counter()

    def elapsed_time(self, end: "HostEvent") -> float:
        return (end.seconds - self.seconds) * 1e3


def expect_output(out: Any, shape: Shape, device: torch.device | None = None) -> None:
    """Raise ValueError unless `out` is a `[batch, heads, head_dim]` tensor in the suite's dtype
    (and on `device`, if given)."""
    expected = shape.query_shape
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"paged_attention_decode returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != expected or out.dtype != shape.torch_dtype:
        raise ValueError(
            f"paged_attention_decode returned {list(out.shape)} {out.dtype}, "
            f"not {list(expected)} {shape.torch_dtype} (q's shape and dtype)"
        )
    if device is not None and out.device.type != device.type:
        raise ValueError(f"paged_attention_decode returned a tensor on {out.device}, not {device}")


class Batch:
    """A shape's inputs in the worker, and the timed batches of `decode`'s calls on them (`run`).

    Built by `prepare_batch` (or directly, in one process: `full_kit.gpu_check`, the kit's tests):
    the input sets, a zero output for the empty batch, two events, then `warmup` calls."""

    def __init__(
        self,
        decode: Callable[..., torch.Tensor],
        shape: Shape,
        device: str | torch.device,
        warmup: int = WARMUP_CALLS,
    ) -> None:
        self.decode, self.shape, self.device = decode, shape, torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.kv_sets = [make_kv(shape, index, self.device) for index in range(input_sets(shape))]
        self.stand_in = torch.zeros(shape.query_shape, dtype=shape.torch_dtype, device=self.device)
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
        else:
            self.start, self.end = HostEvent(), HostEvent()
        queries = query_stream(shape, seed_of(shape, "warm-up"), self.device)
        for call in range(warmup):  # on the last sets: the first timed call's set is long evicted
            kv = self.kv_sets[-1 - call % len(self.kv_sets)]
            expect_output(decode(next(queries), *kv), shape, self.device)
        self.synchronize()

    def synchronize(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def run(
        self, calls: int, seed: int, kernel: bool = True
    ) -> tuple[float, torch.Tensor, torch.Tensor]:
        """A batch of `calls` calls seeded `seed`, or (`kernel` false) the empty batch: the same
        work without any call (see the module's docstring). Returns the events' time in ms,
        whether each call's output is free of NaN and Inf (`[calls]`), and the sampled rows of
        each call (`[calls, samples, head_dim]`, in q's dtype). Raises ValueError if an output
        has the wrong shape, dtype or device, or is an earlier call's buffer."""
        shape, decode, kv_sets = self.shape, self.decode, self.kv_sets
        if not 1 <= calls <= max_calls(shape):
            raise ValueError(f"a batch of {shape} makes 1 to {max_calls(shape)} calls, not {calls}")
        sets = len(kv_sets)
        outputs = []
        self.synchronize()
        self.start.record()
        if kernel:
            queries = query_stream(shape, seed, self.device)
            for call in range(calls):
                outputs.append(decode(next(queries), *kv_sets[call % sets]))
        self.end.record()
        self.synchronize()
        # Past the sync: the same work in the timed and the empty batch.
        if not kernel:
            outputs = [self.stand_in] * calls
        first_call = {}
        for call, out in enumerate(outputs):
            expect_output(out, shape, self.device)
            earlier = first_call.setdefault(out.data_ptr(), call)
            if kernel and earlier != call:
                raise ValueError(
                    f"paged_attention_decode returned call {earlier}'s output again at call "
                    f"{call}: a timed batch keeps every output, so each call must return a "
                    "tensor of its own (as a fresh torch.empty does)"
                )
        stacked = torch.stack(outputs)
        finite = torch.isfinite(stacked.flatten(1)).all(dim=1)
        seqs, heads = sample_rows(shape, seed, calls, SAMPLES_PER_CALL)
        index = torch.arange(calls).unsqueeze(1)  # broadcast against [calls, samples]
        rows = stacked[index.to(self.device), seqs.to(self.device), heads.to(self.device)]
        event_ms = self.start.elapsed_time(self.end)
        return event_ms, finite.cpu(), rows.cpu()


def prepare_batch(module: Any, name: str, *, warmup: int = WARMUP_CALLS) -> Batch:
    """A `Batch` of `module.paged_attention_decode` on `SUITE[name]`, natively on CUDA.

    A worker's entry point (`Submission.tool("gpu_timing", "prepare_batch", name, ...)`), which
    the grading process does not time. Raises RuntimeError without a CUDA device: the kit never
    times Triton's interpreter.
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "prepare_batch needs a CUDA device: the kit never times Triton's interpreter"
        )
    torch.cuda.empty_cache()  # what the grader's last batch held, released with this request
    return Batch(module.paged_attention_decode, SUITE[name], "cuda", warmup)


def run_batch(
    batch: Batch, *, calls: int, seed: int, kernel: bool = True
) -> tuple[float, torch.Tensor, torch.Tensor]:
    """`batch.run(calls, seed, kernel)`: a worker's entry point, the call the grading process
    times (`Submission.tool("gpu_timing", "run_batch", batch, ...)`)."""
    return batch.run(calls, seed, kernel)


def row_case(
    inputs: Sequence[torch.Tensor], shape: Shape, seq: int, head: int
) -> tuple[torch.Tensor, ...]:
    """Row `(seq, head)` of a call as a decode batch of its own, on the CPU: one sequence, one
    query head, its kv head, and only the blocks the sequence's length needs."""
    q, k_cache, v_cache, block_tables, seq_lens = inputs
    seq_len = int(seq_lens[seq])
    needed = -(-seq_len // shape.block_size)
    blocks = block_tables[seq, :needed].long()
    kv_head = head // (shape.num_heads // shape.num_kv_heads)
    k_rows, v_rows = (
        cache.index_select(0, blocks)[:, :, kv_head : kv_head + 1].cpu()
        for cache in (k_cache, v_cache)
    )
    table = torch.arange(needed, dtype=torch.int32).view(1, -1)
    length = torch.tensor([seq_len], dtype=torch.int32)
    return q[seq : seq + 1, head : head + 1].cpu(), k_rows, v_rows, table, length


def reference_rows(
    shape: Shape,
    seed: int,
    calls: int,
    checked: Sequence[int],
    samples: int,
    oracle: Callable[..., torch.Tensor],
    kv_sets: Sequence[tuple[torch.Tensor, ...]],
) -> torch.Tensor:
    """What the batch of `calls` calls seeded `seed` should send back as the rows of the calls
    `checked`: `[len(checked), samples, head_dim]` in float64, computed by `oracle`
    (`paged_attention_decode_reference`'s signature) on `kv_sets`, the shape's input sets rebuilt
    with `make_kv` on the device the batch ran on (its queries are replayed there)."""
    seqs, heads = sample_rows(shape, seed, calls, samples)
    rows = torch.zeros(len(checked), seqs.shape[1], shape.head_dim, dtype=torch.float64)
    wanted, queries = set(checked), {}
    stream = query_stream(shape, seed, kv_sets[0][0].device)
    for call in range(max(checked, default=-1) + 1):
        query = next(stream)
        if call in wanted:
            queries[call] = query
    for index, call in enumerate(checked):
        inputs = (queries[call], *kv_sets[call % len(kv_sets)])
        for sample in range(seqs.shape[1]):
            case = row_case(inputs, shape, int(seqs[call, sample]), int(heads[call, sample]))
            rows[index, sample] = oracle(*case)[0, 0]
    return rows


# -- the grading process's side: its clock's times, and what it makes of them ------------------


def per_call_ms(
    batch_ms: Sequence[float], empty_ms: Sequence[float], calls: int, empty_cap_ms: float = math.inf
) -> float:
    """A shape's time per call on the grading process's clock: the median wall time of its timed
    batches of `calls` calls, less the median of its empty batches (at most `empty_cap_ms`: the
    reference's, for a candidate), over `calls`; at least `MIN_CALL_MS`."""
    empty = min(statistics.median(empty_ms), empty_cap_ms)
    return max((statistics.median(batch_ms) - empty) / calls, MIN_CALL_MS)


def calibrate(net_ms: Callable[[int], float], most: int) -> tuple[float, int]:
    """A first time per call, and the calls it was measured on: batches of 1, 4, 16, ... calls
    (at most `most`) until one takes past `CALIBRATION_MS`. `net_ms(calls)` times one batch of
    `calls` calls less its empty batch, on the grading process's clock."""
    calls = 1
    while True:
        spent = net_ms(calls)
        if spent >= CALIBRATION_MS or calls >= most:
            return max(spent / calls, MIN_CALL_MS), calls
        calls = min(calls * CALIBRATION_GROWTH, most)


def choose_calls(shape: Shape, reference_ms: float, candidate_ms: float | None = None) -> int:
    """N, the calls of each timed batch of `shape` (the same for candidate and reference): enough
    for the reference's batch to take `TARGET_BATCH_MS` at `reference_ms` a call, fewer where the
    candidate's would pass `MAX_BATCH_MS` at `candidate_ms`; 1 to `max_calls(shape)`."""
    calls = math.ceil(TARGET_BATCH_MS / max(reference_ms, MIN_CALL_MS))
    if candidate_ms is not None:
        calls = min(calls, math.floor(MAX_BATCH_MS / max(candidate_ms, MIN_CALL_MS)))
    return max(1, min(calls, max_calls(shape)))


def event_disagreement(event_ms: Sequence[float], wall_ms: float, calls: int) -> str:
    """Why the worker's CUDA-event times per call of a shape (one per batch of `calls` calls)
    disagree with `wall_ms`, the grading process's time per call, or "". A cross-check for a
    reviewer: the events are never scored."""
    if not all(math.isfinite(event) for event in event_ms):
        return "the worker's CUDA-event time is not a number"
    if not event_ms:
        return ""
    event, slack, apart = statistics.median(event_ms), EVENT_SLACK_MS / calls, 1 + EVENT_TOLERANCE
    if event > wall_ms * apart + slack or event < wall_ms / apart - slack:
        return (
            f"the worker's CUDA events say {event * 1e3:,.1f} us a call, the grading process "
            f"measured {wall_ms * 1e3:,.1f} us (more than {apart:g}x apart): a rewritten clock "
            "or event in the worker?"
        )
    return ""


def copy_bandwidth(device: str | torch.device = "cuda", nbytes: int = COPY_BYTES) -> float:
    """The device's copy bandwidth in bytes per second, bytes read and written both counted:
    the best of `COPY_REPEATS` device-to-device copies of `nbytes`, timed with CUDA events (in
    the grading process, which runs it)."""
    device = torch.device(device)
    if device.type != "cuda":
        raise RuntimeError("copy_bandwidth needs a CUDA device")
    source = torch.ones(nbytes, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best_ms = math.inf
    for _ in range(COPY_REPEATS):
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        best_ms = min(best_ms, start.elapsed_time(end))
    del source, target
    torch.cuda.empty_cache()
    return 2 * nbytes / (best_ms / 1e3)
