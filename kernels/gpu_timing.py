"""GPU timing of a paged-attention decode: the suite, its inputs, and the timed loop.

Standalone (stdlib and torch only): the grader copies this file into the sandboxed worker
(`grader.sandbox.TOOLS`) and runs `time_suite` there on the candidate's `paged_attention`
module, where no kit package is importable. The grading process and `kernels.gpu_check` import
it too, to rebuild the very inputs a timed call saw and to measure the copy bandwidth.

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
(`input_sets`) are rotated from call to call. Tables come from a seeded CPU generator; the
pools (up to 4 GiB a set) from a seeded generator on the device itself, because CPU random
numbers for them would take minutes. Both are deterministic for a given device and torch, so
the grading process rebuilds them bit for bit on its own GPU. Every call also gets a fresh
query (`make_query`, seeded by the round's seed and the call's index): an output memoised
from an earlier call is wrong for the new query.

The timed call (`time_calls`)
-----------------------------
Warm-up calls first (past Triton's JIT and any autotuning). Then, for each timed call:
synchronise the device; start the host clock; zero a buffer twice the L2's size (evicting the
inputs, so each call reads them from memory) and enqueue a short sleep kernel (it keeps the
device busy while the host launches the call, so the wrapper's Python overhead is hidden as it
is behind the previous step in a serving loop); record a CUDA event; make the call; record a
second event; synchronise; stop the host clock. The time is the events' elapsed time: device
time from the first event to the last work of the call on the current stream, plus any stall
the call causes (a host sync inside it, host work longer than the sleep). The host time spans
the whole window, so it is never below the event time, and far above it only when work ran
outside the timed stream (`clock_disagreement`).

After the call returns, a few output rows `(sequence, head)` are drawn (`sample_rows`) and sent
back for the grading process to re-check against the float64 oracle. They are drawn only after
the call, from a generator seeded by the grader's per-round seed and the call's index: nothing
the kernel is given says which rows will be read, so a kernel that skips, approximates or
reuses any share of its rows is caught with a probability that grows with every call. A
candidate could predict the rows only by reading this tool's state from inside its own
process, introspection the static scan flags for review.

Bytes moved (`bytes_moved`): K and V of the real tokens once each (under GQA a kv head is
counted once, however many query heads read it), q, the output, and the table entries and
lengths read. It is a floor on the traffic: achieved GB/s is these bytes over the time.
"""

import hashlib
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

WARMUP_CALLS = 2  # per shape, before its timed calls: past JIT compilation and autotuning
SAMPLES_PER_CALL = 2  # output rows re-checked against the oracle, per timed call
ROTATION_BYTES = 4 << 30  # input sets per shape: as many as fit here, between 2 and 4
FALLBACK_L2_BYTES = 128 << 20  # when torch does not report the L2's size
PAD_CYCLES = 200_000  # the sleep kernel before each timed call: ~100 us at 2 GHz
COPY_BYTES = 1 << 30  # copy-bandwidth buffer: far past any L2
COPY_REPEATS = 10
WALL_SLACK_MS = 2.0  # host time may exceed twice the event time by this much (median)


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
    """How many input sets of `shape` are rotated: 2 to 4, as many as `ROTATION_BYTES` hold."""
    pool = math.prod(shape.pool_shape) * element_bytes(shape)
    return max(2, min(4, ROTATION_BYTES // (2 * pool)))


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


def make_query(shape: Shape, seed: int, call: int) -> torch.Tensor:
    """The query of call `call` of the round seeded `seed`, on the CPU: `[batch, heads, dim]`."""
    generator = torch.Generator().manual_seed(seed_of(shape, "query", seed, call))
    size = (shape.batch, shape.num_heads, shape.head_dim)
    return torch.randn(size, generator=generator).to(shape.torch_dtype)


def call_inputs(
    shape: Shape, seed: int, call: int, kv_sets: Sequence[tuple[torch.Tensor, ...]]
) -> tuple[torch.Tensor, ...]:
    """The arguments of call `call`: its fresh query and the input set its turn comes to."""
    kv = kv_sets[call % len(kv_sets)]
    return (make_query(shape, seed, call).to(kv[0].device), *kv)


def sample_rows(shape: Shape, seed: int, call: int, count: int) -> tuple[list[int], list[int]]:
    """The `(sequence, head)` rows of call `call`'s output that are re-checked: `count`
    distinct ones (fewer if the output has fewer)."""
    generator = torch.Generator().manual_seed(seed_of(shape, "rows", seed, call))
    rows = torch.randperm(shape.batch * shape.num_heads, generator=generator)[:count].tolist()
    seqs, heads = zip(*(divmod(row, shape.num_heads) for row in rows), strict=True)
    return list(seqs), list(heads)


def l2_flush_bytes(properties: Any) -> int:
    """Twice the L2's size (`properties`: `torch.cuda.get_device_properties`), or a fallback."""
    l2 = getattr(properties, "L2_cache_size", 0) or FALLBACK_L2_BYTES
    return 2 * l2


class HostEvent:
    """`torch.cuda.Event`'s timing on the host clock: the stand-in on CPU, where the kit's tests
    check the loop's bookkeeping. Its times mean nothing: the kit never times on the CPU."""

    def record(self) -> None:
        self.seconds = time.perf_counter()

    def elapsed_time(self, end: "HostEvent") -> float:
        return (end.seconds - self.seconds) * 1e3


def time_calls(
    decode: Callable[..., torch.Tensor],
    shape: Shape,
    *,
    seed: int,
    calls: int,
    device: str | torch.device = "cuda",
    warmup: int = WARMUP_CALLS,
    samples: int = SAMPLES_PER_CALL,
) -> dict:
    """Time `calls` calls of `decode` on `shape` after `warmup` untimed ones.

    Returns `bytes` (`bytes_moved`), `input_sets`, per timed call `event_ms`, `wall_ms` and
    `finite` (the whole output free of NaN and Inf), and `rows`: `[calls, samples, head_dim]`,
    the output rows `sample_rows` names, in q's dtype. Raises ValueError if an output has the
    wrong shape or dtype.
    """
    device = torch.device(device)
    cuda = device.type == "cuda"
    kv_sets = [make_kv(shape, index, device) for index in range(input_sets(shape))]
    if cuda:
        flush_bytes = l2_flush_bytes(torch.cuda.get_device_properties(device))
        flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    else:
        start, end = HostEvent(), HostEvent()

    def synchronize() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    for call in range(-warmup, 0):
        expect_output(decode(*call_inputs(shape, seed, call, kv_sets)), shape)
    result = {"bytes": bytes_moved(shape), "input_sets": len(kv_sets)}
    event_ms, wall_ms, finite, rows = [], [], [], []
    inputs = ()
    for call in range(calls):
        inputs = call_inputs(shape, seed, call, kv_sets)
        synchronize()
        wall_start = time.perf_counter()
        if cuda:
            flush.zero_()
            torch.cuda._sleep(PAD_CYCLES)
        start.record()
        out = decode(*inputs)
        end.record()
        synchronize()
        wall_ms.append((time.perf_counter() - wall_start) * 1e3)
        event_ms.append(start.elapsed_time(end))
        expect_output(out, shape)
        finite.append(bool(torch.isfinite(out).all()))
        seqs, heads = sample_rows(shape, seed, call, samples)
        rows.append(out[seqs, heads].cpu())
        del out, inputs
    del kv_sets
    if cuda:
        del flush
        torch.cuda.empty_cache()
    size = (0, samples, shape.head_dim)
    stacked = torch.stack(rows) if rows else torch.empty(size, dtype=shape.torch_dtype)
    return result | {"event_ms": event_ms, "wall_ms": wall_ms, "finite": finite, "rows": stacked}


def expect_output(out: Any, shape: Shape) -> None:
    """Raise ValueError unless `out` is a `[batch, heads, head_dim]` tensor in the suite's dtype."""
    expected = (shape.batch, shape.num_heads, shape.head_dim)
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"paged_attention_decode returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != expected or out.dtype != shape.torch_dtype:
        raise ValueError(
            f"paged_attention_decode returned {list(out.shape)} {out.dtype}, "
            f"not {list(expected)} {shape.torch_dtype} (q's shape and dtype)"
        )


def time_suite(
    module: Any,
    names: Sequence[str],
    *,
    seed: int,
    calls: int,
    warmup: int = WARMUP_CALLS,
) -> dict[str, dict]:
    """`time_calls` of `module.paged_attention_decode` on each named shape of `SUITE`, natively
    on CUDA.

    The worker's entry point (`Submission.tool("gpu_timing", "time_suite", ...)`). Raises
    RuntimeError without a CUDA device: the kit never times Triton's interpreter.
    """
    if not torch.cuda.is_available():
        raise RuntimeError(
            "time_suite needs a CUDA device: the kit never times Triton's interpreter"
        )
    decode = module.paged_attention_decode
    return {
        name: time_calls(decode, SUITE[name], seed=seed, calls=calls, warmup=warmup)
        for name in names
    }


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
    samples: int,
    oracle: Callable[..., torch.Tensor],
    kv_sets: Sequence[tuple[torch.Tensor, ...]],
) -> torch.Tensor:
    """What `time_calls` should return as `rows` for this round: `[calls, samples, head_dim]`,
    computed by `oracle` (`paged_attention_decode_reference`'s signature) on `kv_sets`, the
    round's input sets rebuilt with `make_kv`."""
    rows = torch.zeros(calls, samples, shape.head_dim, dtype=torch.float64)
    for call in range(calls):
        inputs = call_inputs(shape, seed, call, kv_sets)
        for index, (seq, head) in enumerate(
            zip(*sample_rows(shape, seed, call, samples), strict=True)
        ):
            rows[call, index] = oracle(*row_case(inputs, shape, seq, head))[0, 0]
    return rows


def clock_disagreement(event_ms: Sequence[float], wall_ms: Sequence[float]) -> str:
    """Why the CUDA-event times of a shape cannot be trusted against the host's, or ""."""
    if any(event > wall * 1.01 + 0.01 for event, wall in zip(event_ms, wall_ms, strict=True)):
        return "a CUDA-event time exceeds the host time around it"
    event, wall = statistics.median(event_ms), statistics.median(wall_ms)
    if wall > 2 * event + WALL_SLACK_MS:
        return (
            f"the host time ({wall:.3f} ms) is far above the CUDA-event time ({event:.3f} ms): "
            "work outside the timed stream?"
        )
    return ""


def copy_bandwidth(device: str | torch.device = "cuda", nbytes: int = COPY_BYTES) -> float:
    """The device's copy bandwidth in bytes per second, bytes read and written both counted:
    the best of `COPY_REPEATS` device-to-device copies of `nbytes`, timed with CUDA events."""
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
