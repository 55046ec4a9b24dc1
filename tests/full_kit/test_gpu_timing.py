"""Part 4's GPU timing, as far as a CPU can check it: no test here times anything.

The suite, the inputs (deterministic, NaN where a kernel must not read, rotated past any L2), the
bytes moved, the torch baseline against the oracle, the timed batch's bookkeeping (with
`HostEvent` standing in for CUDA events, and the torch baseline for a kernel), the pure logic of
the grading process's timing (the time per call from its timed and empty batches, the
calibration and the choice of N, the events' cross-check), the whole measurement with fake
workers that move a fake grading-process clock (so every figure is exact), the re-check, and the
skips and refusals without a CUDA device.
"""

import contextlib
import importlib
import json
import math
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch

from full_kit import gpu_check
from full_kit.torch_baseline import gather_sdpa_decode
from grader.sandbox.tools import gpu_timing
from grader.sandbox.tools.gpu_timing import SUITE, Shape
from kernels.cases import TOLERANCE, make_case, relative_error
from kernels.reference import paged_attention_decode_reference
from tests.grading import CHECKS_DIR, KIT_ROOT, SOLUTIONS

# Small enough for the CPU: a partial last block (20 = 2 * 8 + 4), GQA, float32.
SMALL = Shape(batch=3, context=20, num_heads=4, num_kv_heads=2, head_dim=32, block_size=8,
              dtype="float32")  # fmt: skip
TINY = Shape(batch=1, context=8, num_heads=2, num_kv_heads=1, head_dim=32, block_size=8,
             dtype="float32")  # fmt: skip
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN in the same places included."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())


def kv_sets(shape: Shape) -> list[tuple[torch.Tensor, ...]]:
    return [
        gpu_timing.make_kv(shape, index, "cpu") for index in range(gpu_timing.input_sets(shape))
    ]


# --- the suite and its inputs ---------------------------------------------------------------


def test_the_suite_is_batch_by_context_in_one_layout():
    assert {(shape.batch, shape.context) for shape in SUITE.values()} == {
        (batch, context) for batch in (1, 16, 64) for context in (512, 4096, 16384)
    }
    layouts = {
        (s.num_heads, s.num_kv_heads, s.head_dim, s.block_size, s.dtype) for s in SUITE.values()
    }
    assert layouts == {(32, 8, 128, 16, "bfloat16")}
    assert SUITE["batch16-ctx4096"] == Shape(16, 4096)


def test_bytes_moved_counts_real_tokens_q_out_and_table_reads():
    # K and V once per kv head, q and out, the 256 + 1 table entries and the length of each.
    kv = 2 * 16 * 4096 * 8 * 128 * 2
    assert (
        gpu_timing.bytes_moved(SUITE["batch16-ctx4096"])
        == kv + 2 * 16 * 32 * 128 * 2 + 16 * 257 * 4
    )
    # 20 tokens in 3 blocks of 8: the tail slots are not counted.
    assert gpu_timing.bytes_moved(SMALL) == 2 * 3 * 20 * 2 * 32 * 4 + 2 * 3 * 4 * 32 * 4 + 3 * 4 * 4


def test_input_sets_span_past_any_l2_two_at_least():
    counts = {name: gpu_timing.input_sets(shape) for name, shape in SUITE.items()}
    assert counts["batch64-ctx16384"] == counts["batch16-ctx4096"] == 2
    assert counts["batch64-ctx512"] == 4
    assert counts["batch1-ctx512"] == 249  # 2 MiB a set
    for name, shape in SUITE.items():
        set_bytes = 2 * math.prod(shape.pool_shape) * 2
        assert counts[name] * set_bytes >= gpu_timing.ROTATION_MIN_BYTES, name
        assert counts[name] == 2 or (counts[name] - 1) * set_bytes < gpu_timing.ROTATION_MIN_BYTES
    assert gpu_timing.input_sets(SMALL) == gpu_timing.MAX_INPUT_SETS  # 40 KiB a set


def test_a_batch_keeps_at_most_its_output_budget():
    assert gpu_timing.max_calls(SUITE["batch1-ctx512"]) == gpu_timing.MAX_CALLS
    outputs = 64 * 32 * 128 * 2
    assert gpu_timing.max_calls(SUITE["batch64-ctx512"]) == (512 << 20) // outputs == 1024
    assert gpu_timing.max_calls(Shape(batch=1 << 16, context=16)) == 1


def test_input_sets_are_deterministic_and_differ_from_each_other():
    first, again, other = (gpu_timing.make_kv(SMALL, index, "cpu") for index in (0, 0, 1))
    assert all(same(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[2], other[2])  # another shuffle
    assert not same(first[0], other[0])


def test_tables_shuffle_the_pool_and_nan_marks_every_slot_not_to_read():
    k_cache, v_cache, tables, lengths = gpu_timing.make_kv(SMALL, 0, "cpu")
    assert k_cache.shape == (SMALL.num_blocks, 8, 2, 32)
    assert tables.dtype == torch.int32
    assert lengths.tolist() == [20] * 3
    owned = tables[:, :-1]
    assert sorted(owned.flatten().tolist()) == list(range(SMALL.num_blocks - 1))
    assert tables[:, -1].tolist() == [SMALL.num_blocks - 1] * 3  # the padding entry
    for cache in (k_cache, v_cache):
        read = torch.zeros(cache.shape[:2], dtype=torch.bool)
        for table in owned.tolist():
            for token in range(20):
                read[table[token // 8], token % 8] = True
        nan = cache.isnan().all(dim=(2, 3))
        assert torch.equal(nan, ~read)
        assert not cache[read].isnan().any()


def test_each_call_gets_a_fresh_query_and_the_stream_replays():
    first = gpu_timing.query_stream(SMALL, 1, "cpu")
    queries = [next(first) for _ in range(4)]
    assert queries[0].shape == (3, 4, 32)
    assert queries[0].dtype == torch.float32
    assert len({tuple(q.flatten().tolist()) for q in queries}) == 4
    again = gpu_timing.query_stream(SMALL, 1, "cpu")
    assert all(torch.equal(q, next(again)) for q in queries)
    assert not torch.equal(next(gpu_timing.query_stream(SMALL, 2, "cpu")), queries[0])
    sets = kv_sets(SMALL)[:3]
    inputs = gpu_timing.call_inputs(SMALL, 1, 3, sets)
    assert torch.equal(inputs[0], queries[3])
    assert all(a is b for a, b in zip(inputs[1:], sets[0], strict=True))  # set 3 % 3


def test_each_call_gets_its_own_distinct_rows_drawn_from_the_seed():
    seqs, heads = gpu_timing.sample_rows(SMALL, 1, 50, 3)
    assert seqs.shape == heads.shape == (50, 3)
    rows = (seqs * SMALL.num_heads + heads).tolist()
    assert all(len(set(row)) == 3 for row in rows)
    assert all(0 <= s < 3 for s in seqs.flatten().tolist())
    assert all(0 <= h < 4 for h in heads.flatten().tolist())
    assert len({tuple(row) for row in rows}) > 10
    again = gpu_timing.sample_rows(SMALL, 1, 50, 3)
    assert torch.equal(seqs, again[0])
    assert torch.equal(heads, again[1])
    assert not torch.equal(seqs, gpu_timing.sample_rows(SMALL, 2, 50, 3)[0])
    # Asking for every row gives each call a permutation of them; more is capped.
    everything = gpu_timing.sample_rows(SMALL, 1, 20, 40)
    assert everything[0].shape == (20, 12)
    whole = (everything[0] * 4 + everything[1]).sort(dim=1).values
    assert torch.equal(whole, torch.arange(12).expand(20, -1))
    # Uniform over the rows: every row is drawn, first or second, in a few hundred calls.
    seqs, heads = gpu_timing.sample_rows(SMALL, 3, 300, 2)
    assert set((seqs * 4 + heads).flatten().tolist()) == set(range(12))


# --- the torch baseline ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seq_lens", "num_heads", "num_kv_heads", "head_dim", "block_size", "dtype"),
    [
        ([5, 12, 0, 1], 4, 4, 32, 8, torch.float32),
        ([17, 40], 8, 2, 64, 8, torch.bfloat16),
        ([33, 3], 4, 1, 80, 16, torch.float16),
        ([0, 0], 4, 2, 32, 8, torch.float32),
    ],
)
def test_the_torch_baseline_matches_the_oracle(
    seq_lens, num_heads, num_kv_heads, head_dim, block_size, dtype
):
    case = make_case(seq_lens, num_heads=num_heads, num_kv_heads=num_kv_heads,
                     head_dim=head_dim, block_size=block_size, dtype=dtype, seed=7)  # fmt: skip
    out = gather_sdpa_decode(*case.inputs)
    assert out.shape == case.q.shape
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    empty = case.seq_lens == 0
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    if not empty.all():
        reference = paged_attention_decode_reference(*case.inputs)
        assert relative_error(out[~empty], reference[~empty]) <= TOLERANCE[dtype]


def test_the_torch_baseline_reads_no_padding_and_honours_scale():
    tables = [[3, 1, 1, 4, 4], [1, 0, 4, 4, 4]]  # block 4 is NaN: only padding names it
    case = make_case([19, 10], tables=tables, seed=3)
    out = gather_sdpa_decode(*case.inputs, scale=0.37)
    reference = paged_attention_decode_reference(*case.inputs, scale=0.37)
    assert relative_error(out, reference) <= TOLERANCE[torch.float32]


# --- the timed batch's bookkeeping, in the worker (on the CPU here) ------------------------


def counted(decode):
    """`decode`, counting its calls in `.calls`."""

    def call(*inputs):
        call.calls += 1
        return decode(*inputs)

    call.calls = 0
    return call


def memoised(decode, copy=False):
    """A cheat: for every call, the output of the first call with q's shape (or a copy)."""
    kept = {}

    def call(q, *rest):
        out = kept.setdefault(q.shape, decode(q, *rest))
        return out.clone() if copy else out

    return call


def test_a_batch_sends_every_calls_evidence_and_rows_the_oracle_confirms():
    decode = counted(gather_sdpa_decode)
    batch = gpu_timing.Batch(decode, SMALL, "cpu")
    assert decode.calls == gpu_timing.WARMUP_CALLS
    assert len(batch.kv_sets) == gpu_timing.input_sets(SMALL)
    event_ms, finite, rows = gpu_timing.run_batch(batch, calls=6, seed=5)
    assert decode.calls == gpu_timing.WARMUP_CALLS + 6
    assert isinstance(event_ms, float)
    assert finite.dtype == torch.bool
    assert finite.tolist() == [True] * 6
    assert rows.shape == (6, gpu_timing.SAMPLES_PER_CALL, 32)
    assert rows.dtype == torch.float32
    samples, oracle = gpu_timing.SAMPLES_PER_CALL, paged_attention_decode_reference
    expected = gpu_timing.reference_rows(SMALL, 5, 6, range(6), samples, oracle, batch.kv_sets)
    assert expected.shape == rows.shape
    assert relative_error(rows.flatten(0, 1), expected.flatten(0, 1)) <= 1e-4
    # Rebuilt afresh, a subset of the calls, in any order: the same rows.
    some = gpu_timing.reference_rows(SMALL, 5, 6, [4, 1], samples, oracle, kv_sets(SMALL))
    assert torch.equal(some, expected[[4, 1]])


def test_the_empty_batch_makes_no_call_and_replies_alike():
    decode = counted(gather_sdpa_decode)
    batch = gpu_timing.Batch(decode, SMALL, "cpu", warmup=0)
    event_ms, finite, rows = gpu_timing.run_batch(batch, calls=7, seed=5, kernel=False)
    assert decode.calls == 0
    assert isinstance(event_ms, float)
    timed = gpu_timing.run_batch(batch, calls=7, seed=5)
    assert (finite.shape, finite.dtype) == (timed[1].shape, timed[1].dtype)
    assert (rows.shape, rows.dtype) == (timed[2].shape, timed[2].dtype)
    assert not rows.any()


def test_a_batch_refuses_wrong_outputs_reused_buffers_and_sizes():
    def wrong_dtype(q, *rest):
        return gather_sdpa_decode(q, *rest).double()

    with pytest.raises(ValueError, match=r"not \[3, 4, 32\] torch.float32"):
        gpu_timing.Batch(wrong_dtype, SMALL, "cpu", warmup=1)
    batch = gpu_timing.Batch(lambda *inputs: [], SMALL, "cpu", warmup=0)
    with pytest.raises(ValueError, match="returned list"):
        gpu_timing.run_batch(batch, calls=1, seed=0)
    # The same tensor twice: a batch keeps every output, so each call needs its own.
    batch = gpu_timing.Batch(memoised(gather_sdpa_decode), SMALL, "cpu", warmup=1)
    with pytest.raises(ValueError, match="returned call 0's output again at call 1"):
        gpu_timing.run_batch(batch, calls=3, seed=0)
    for calls in (0, gpu_timing.max_calls(SMALL) + 1):
        with pytest.raises(ValueError, match="calls, not"):
            gpu_timing.run_batch(batch, calls=calls, seed=0)


def test_a_memoised_output_fails_the_recheck():
    batch = gpu_timing.Batch(memoised(gather_sdpa_decode, copy=True), SMALL, "cpu", warmup=0)
    _, _, rows = gpu_timing.run_batch(batch, calls=4, seed=5)
    samples, oracle = gpu_timing.SAMPLES_PER_CALL, paged_attention_decode_reference
    expected = gpu_timing.reference_rows(SMALL, 5, 4, range(4), samples, oracle, kv_sets(SMALL))
    assert relative_error(rows[0], expected[0]) <= 1e-4
    assert relative_error(rows[1:].flatten(0, 1), expected[1:].flatten(0, 1)) > 0.1


@no_cuda
def test_the_worker_tool_and_the_copy_bandwidth_refuse_without_cuda():
    module = SimpleNamespace(paged_attention_decode=gather_sdpa_decode)
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        gpu_timing.prepare_batch(module, "batch1-ctx512")
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        gpu_timing.copy_bandwidth("cpu")


# --- the grading process's arithmetic: time per call, N, the events' cross-check ---------------


def test_the_time_per_call_is_the_timed_batch_less_the_empty_one_over_n():
    # Medians of each: 30 ms timed, 2 ms empty, over 100 calls.
    assert gpu_timing.per_call_ms([31.0, 30.0, 29.0], [2.0, 9.0, 1.5], 100) == pytest.approx(0.28)
    # The candidate's empty batch is never taken above the reference's.
    assert gpu_timing.per_call_ms([30.0], [12.0], 100, empty_cap_ms=2.0) == pytest.approx(0.28)
    assert gpu_timing.per_call_ms([30.0], [1.0], 100, empty_cap_ms=2.0) == pytest.approx(0.29)
    # A timed batch no longer than its empty one gives the floor, never zero or less.
    assert gpu_timing.per_call_ms([1.0], [2.0], 10) == gpu_timing.MIN_CALL_MS


def test_calibration_grows_the_batch_until_it_takes_long_enough():
    def net(per_call_ms, seen):
        def net_ms(calls):
            seen.append(calls)
            return calls * per_call_ms

        return net_ms

    seen = []
    assert gpu_timing.calibrate(net(0.01, seen), 4096) == (pytest.approx(0.01), 1024)
    assert seen == [1, 4, 16, 64, 256, 1024]
    seen = []
    assert gpu_timing.calibrate(net(0.001, seen), 1000) == (pytest.approx(0.001), 1000)
    assert seen == [1, 4, 16, 64, 256, 1000]
    seen = []
    assert gpu_timing.calibrate(net(60.0, seen), 4096) == (60.0, 1)
    seen = []
    assert gpu_timing.calibrate(lambda calls: -1.0, 16) == (gpu_timing.MIN_CALL_MS, 16)


def test_n_makes_the_references_batch_take_the_target_within_the_caps():
    shape = SUITE["batch16-ctx4096"]
    assert gpu_timing.TARGET_BATCH_MS == 20.0
    assert gpu_timing.choose_calls(shape, 0.1) == 200
    assert gpu_timing.choose_calls(shape, 0.1, 0.3) == 200
    assert gpu_timing.choose_calls(shape, 3.0) == 7
    assert gpu_timing.choose_calls(shape, 50.0) == 1
    assert gpu_timing.choose_calls(shape, 0.0001) == gpu_timing.max_calls(shape)
    assert gpu_timing.choose_calls(SUITE["batch64-ctx512"], 0.0001) == 1024
    # Fewer calls where the candidate's batch would pass MAX_BATCH_MS: 200 ms at 4 ms a call.
    assert gpu_timing.choose_calls(shape, 0.1, 4.0) == 50
    assert gpu_timing.choose_calls(shape, 0.1, 1000.0) == 1


def test_the_events_disagreeing_with_the_grading_process_are_flagged():
    assert gpu_timing.event_disagreement([1.0, 1.1, 0.9], 1.05, 20) == ""
    assert gpu_timing.event_disagreement([1.2], 1.0, 20) == ""
    # The measured cheat: a rewritten clock and events turned 55 ms into 6.9 ms.
    shown = gpu_timing.event_disagreement([6.9 / 20] * 3, 55.0 / 20, 20)
    assert "CUDA events say 345.0 us a call" in shown
    assert "measured 2,750.0 us" in shown
    assert "more than 1.25x apart" in shown
    assert "apart" in gpu_timing.event_disagreement([2.0], 1.0, 20)
    # The slack: 1 ms over a batch of 1000 calls of 10 us is 1 us a call.
    assert gpu_timing.event_disagreement([0.0134], 0.01, 1000) == ""
    assert gpu_timing.event_disagreement([0.0140], 0.01, 1000) != ""
    assert "not a number" in gpu_timing.event_disagreement([math.nan], 1.0, 20)
    assert "not a number" in gpu_timing.event_disagreement([math.inf], 1.0, 20)


# --- the grading process's side: scoring, flags, the whole measurement ------------------------


@pytest.fixture
def timing_check(pytestconfig):
    """The check module; its markers are the grader's, registered here as the grader does."""
    pytestconfig.addinivalue_line("markers", "part(id): the part a check module grades")
    pytestconfig.addinivalue_line("markers", "points(n): what a check is worth within its part")
    return importlib.import_module("grader.checks.kernel_timing")


def test_scoring_is_a_geometric_mean_of_ratios(timing_check):
    ratios = timing_check.speed_ratios({"a": 2.0, "b": 0.5}, {"a": 1.0, "b": 1.0})
    assert ratios == {"a": 2.0, "b": 0.5}
    assert timing_check.geometric_mean(list(ratios.values())) == pytest.approx(1.0)
    assert timing_check.geometric_mean([1.0, 4.0, 16.0]) == pytest.approx(4.0)
    assert timing_check.SPEED_TIERS == (10.0, 3.0, 1.5)


def test_review_flags(timing_check):
    name = "batch64-ctx16384"
    moved = gpu_timing.bytes_moved(SUITE[name])
    bandwidth = 4e12
    floor_ms = moved / bandwidth * 1e3
    assert timing_check.review_flags({name: floor_ms}, {name: floor_ms}, bandwidth, {}) == []
    [flag] = timing_check.review_flags({name: floor_ms / 2}, {name: floor_ms}, bandwidth, {})
    assert "past the copy bandwidth" in flag
    fast = timing_check.review_flags({name: floor_ms}, {name: 20 * floor_ms}, bandwidth, {})
    assert fast == [f"{name}: 20x faster than the reference"]
    events = timing_check.review_flags({name: floor_ms}, {name: floor_ms}, bandwidth, {name: "x"})
    assert events == [f"{name}: x"]


class FakeClock:
    """The grading process's clock in these tests: it moves only when a fake worker works."""

    def __init__(self) -> None:
        self.seconds = 1000.0

    def __call__(self) -> float:
        return self.seconds

    def advance(self, ms: float) -> None:
        self.seconds += ms / 1e3


class FakeWorkers:
    """A worker that runs the tool's `Batch` on the CPU with `decode`, as the tool would on CUDA,
    and says it launched `launches` kernels. It moves the grading process's `clock` as a GPU
    worker's calls would take: `round_trip_ms` each, plus `call_ms` per kernel call (an empty
    batch: `stretch_empty_ms`, a hostile worker's delay); its events say `call_ms` a call, times
    `event_scale`. `calls` records every worker call."""

    def __init__(self, decode, clock, call_ms, *, launches=1, round_trip_ms=0.5,
                 stretch_empty_ms=0.0, event_scale=1.0, torch_ops=()):  # fmt: skip
        self.decode, self.clock, self.call_ms, self.launches = decode, clock, call_ms, launches
        self.torch_ops = list(torch_ops)
        self.round_trip_ms, self.stretch_empty_ms = round_trip_ms, stretch_empty_ms
        self.event_scale, self.calls = event_scale, []
        self.transcript = SimpleNamespace(
            quiet=contextlib.nullcontext, define=lambda *lines, **values: None
        )

    def module(self, name):
        assert name == "paged_attention"
        return SimpleNamespace(call_counting_launches=self.call_counting_launches)

    def call_counting_launches(self, function, *inputs, strided=False):
        return self.launches, (), self.decode(*inputs)  # a view's values are the tensor's

    def tool(self, tool, function, *args, modules=(), watch=None, seconds=None,
             **kwargs):  # fmt: skip
        assert tool == "gpu_timing"
        if function == "prepare_batch":
            assert modules == ("paged_attention",)
            assert (seconds is not None) == (watch is not None)  # the first call's own limit
            (name,) = args
            self.calls.append(("prepare", name))
            batch = gpu_timing.Batch(self.decode, gpu_timing.SUITE[name], "cpu", **kwargs)
            batch.name = name
            return (self.launches, self.torch_ops, batch) if watch else batch
        assert (function, modules, watch) == ("run_batch", (), None)
        (batch,) = args
        calls, seed, kernel = kwargs["calls"], kwargs["seed"], kwargs["kernel"]
        self.calls.append(("run", batch.name, calls, seed, kernel))
        _, finite, rows = gpu_timing.run_batch(batch, calls=calls, seed=seed, kernel=kernel)
        spent = calls * self.call_ms if kernel else self.stretch_empty_ms
        self.clock.advance(self.round_trip_ms + spent)
        return calls * self.call_ms * self.event_scale, finite, rows

    def runs(self, kernel=True):
        return [call[1:4] for call in self.calls if call[0] == "run" and call[4] == kernel]


class FakeBenchmark:
    def __init__(self):
        self.extra_info = {}

    def pedantic(self, target, setup, rounds):
        for _ in range(rounds):
            setup()
            target()


@pytest.fixture
def clock(monkeypatch, timing_check):
    clock = FakeClock()
    monkeypatch.setattr(timing_check, "clock", clock)
    return clock


@pytest.fixture
def small_suite(monkeypatch, timing_check):
    suite = {"small": SMALL, "tiny": TINY}
    monkeypatch.setattr(gpu_timing, "SUITE", suite)
    monkeypatch.setattr(timing_check, "SUITE_NAMES", tuple(suite))
    monkeypatch.setattr(timing_check, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_timing, "copy_bandwidth", lambda device: 1e15)


def measure(timing_check, candidate, reference, rounds=2, recorded=None):
    benchmark = FakeBenchmark()
    record = (lambda *row: recorded.append(row)) if recorded is not None else (lambda *row: None)
    profile = SimpleNamespace(timing_rounds=rounds)
    measurement = timing_check.measure(candidate, reference, benchmark, profile, record)
    return measurement, benchmark.extra_info


@pytest.mark.parametrize("cheat", [False, True])
def test_the_measurement_times_batches_on_its_own_clock_and_rechecks_the_candidate(
    timing_check, small_suite, clock, cheat
):
    decode = memoised(gather_sdpa_decode, copy=True) if cheat else gather_sdpa_decode
    candidate = FakeWorkers(decode, clock, call_ms=2.0)
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    recorded = []
    measurement, extra = measure(timing_check, candidate, reference, recorded=recorded)
    # Per shape: the warm-up, then calibration batches (1, 4, 16 calls of 1 ms; 1, 4 of 2 ms,
    # the last past CALIBRATION_MS), each after its empty batch.
    warm_up, first_empty = [call for call in reference.calls if call[1] == "small"][:2]
    assert (warm_up, first_empty[:3], first_empty[4]) == (
        ("prepare", "small"),
        ("run", "small", 1),
        False,
    )
    assert [calls for name, calls, _ in reference.runs()[:3]] == [1, 4, 16]
    assert [calls for name, calls, _ in candidate.runs()[:2]] == [1, 4]
    # N from the reference's estimate: a 20 ms batch of 1 ms calls (21 if the estimate's last
    # bit fell short); the same for both.
    n = extra["small calls"]
    assert n in (20, 21)
    assert extra["tiny calls"] == n
    timed = [run for run in candidate.runs() if run[1] == n]
    assert timed == [run for run in reference.runs() if run[1] == n]
    assert len(timed) == 2 * 2  # 2 rounds of 2 shapes
    seeds = {seed for _, _, seed in timed}
    assert len(seeds) == 2  # one seed a round, shared; the empty batches' are their own
    assert not seeds & {seed for _, _, seed in candidate.runs(kernel=False)}
    assert [run[:2] for run in candidate.runs(kernel=False)][-2:] == [("small", n), ("tiny", n)]
    # The scored times are this process's: (timed - empty) / N, exactly.
    assert measurement.candidate_ms == pytest.approx({"small": 2.0, "tiny": 2.0})
    assert measurement.reference_ms == pytest.approx({"small": 1.0, "tiny": 1.0})
    assert measurement.geomean == pytest.approx(2.0)
    assert measurement.flags == []
    assert extra["small candidate_us"] == extra["small candidate_event_us"] == 2000.0
    assert [row[0].split(",")[1].split()[0] for row in recorded[:2]] == ["small", "tiny"]
    assert "geometric mean" in recorded[-1][0]
    assert bool(measurement.wrong) == cheat
    if cheat:
        assert "call_inputs(SUITE['small']" in measurement.wrong[0]


def test_a_stretched_empty_batch_does_not_shrink_the_candidates_calls(
    timing_check, small_suite, clock
):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=2.0, stretch_empty_ms=30.0)
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    measurement, _ = measure(timing_check, candidate, reference)
    assert measurement.candidate_ms == pytest.approx({"small": 2.0, "tiny": 2.0})
    assert measurement.geomean == pytest.approx(2.0)


def test_the_workers_events_are_a_cross_check_never_the_score(timing_check, small_suite, clock):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=2.0, event_scale=1 / 8)
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    measurement, extra = measure(timing_check, candidate, reference)
    assert measurement.candidate_ms == pytest.approx({"small": 2.0, "tiny": 2.0})
    assert extra["small candidate_event_us"] == 250.0
    assert len(measurement.flags) == 2
    assert all("the worker's CUDA events say 250.0 us a call" in f for f in measurement.flags)


def test_a_hopeless_candidate_is_scored_on_the_probe(timing_check, small_suite, clock):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=100.0)
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    measurement, extra = measure(timing_check, candidate, reference)
    assert extra["small calls"] == 1  # the calls the probe measured
    assert [run[1] for run in candidate.runs()] == [1, 1]  # one calibration batch per shape
    assert measurement.candidate_ms == pytest.approx({"small": 100.0, "tiny": 100.0})
    assert measurement.geomean == pytest.approx(100.0)
    assert measurement.flags == []


def test_a_malformed_reply_fails_the_measurement(timing_check, small_suite, clock):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=2.0)
    tool = candidate.tool

    def rows_missing(*args, **kwargs):
        value = tool(*args, **kwargs)
        return (*value[:2], value[2][:, :1]) if args[1] == "run_batch" else value

    candidate.tool = rows_missing
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    with pytest.raises(AssertionError, match="is not the kit's tool's"):
        measure(timing_check, candidate, reference)


def test_a_candidate_that_launches_no_triton_kernel_is_not_timed(timing_check, small_suite, clock):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0, launches=0)
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    with pytest.raises(AssertionError, match="launched no @triton"):
        measure(timing_check, candidate, reference, rounds=1)
    assert candidate.calls == []


def test_a_kernel_that_hands_a_suite_shape_to_torch_is_flagged(timing_check, small_suite, clock):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)  # its first call launched one
    tool = candidate.tool

    def no_kernel_at_small(*args, watch=None, **kwargs):
        value = tool(*args, watch=watch, **kwargs)
        return (0, *value[1:]) if watch and args[2] == "small" else value

    candidate.tool = no_kernel_at_small
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    measurement, _ = measure(timing_check, candidate, reference, rounds=1)
    assert measurement.flags == ["small: launched no @triton.jit kernel at this shape"]


def test_a_kernel_that_computes_a_suite_shape_with_torch_is_flagged(
    timing_check, small_suite, clock
):
    candidate = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0, torch_ops=["aten.bmm"])
    reference = FakeWorkers(gather_sdpa_decode, clock, call_ms=1.0)
    measurement, _ = measure(timing_check, candidate, reference, rounds=1)
    assert measurement.flags == [
        f"{name}: computed attention with torch (aten.bmm)" for name in ("small", "tiny")
    ]


# A copy of the tool with a CPU entry point and a small suite, for a real worker on the CPU (the
# kit's own `prepare_batch` refuses without CUDA).
CPU_TOOL_TAIL = """

SUITE = {"small": Shape(batch=3, context=20, num_heads=4, num_kv_heads=2, head_dim=32,
                        block_size=8, dtype="float32")}


def prepare_batch(module, name, *, warmup=WARMUP_CALLS):
    return Batch(module.paged_attention_decode, SUITE[name], "cpu", warmup)
"""


def test_batches_cross_a_real_worker_as_handles(tmp_path, monkeypatch, timing_check, small_suite):
    """The check's worker calls through a real sandboxed worker: the prepared batch comes back as
    a handle and goes back as an argument; the reply passes `parse_reply`, and its rows are the
    ones the grading process rebuilds (the queries replayed here)."""
    from grader.sandbox import launch, process
    from grader.sandbox.proxy import Submission

    tool = tmp_path / "gpu_timing.py"
    tool.write_text(
        (KIT_ROOT / "grader" / "sandbox" / "tools" / "gpu_timing.py").read_text() + CPU_TOOL_TAIL
    )
    monkeypatch.setitem(launch.TOOLS, "gpu_timing", tool)
    # The torch baseline as one self-contained file: its input checks inlined.
    checks = (KIT_ROOT / "full_kit" / "decode_inputs.py").read_text()
    baseline = (KIT_ROOT / "full_kit" / "torch_baseline.py").read_text()
    baseline = baseline.replace("from full_kit.decode_inputs import check_inputs\n", checks)
    kernel = f"{baseline}\npaged_attention_decode = gather_sdpa_decode\n".encode()
    limits = process.Limits(memory_bytes=4 << 30, call_seconds=600.0, import_seconds=600.0)
    worker = process.Sandbox({"paged_attention.py": kernel}, limits, process.NO_CUDA,
                             time.monotonic() + 1200)  # fmt: skip
    submission = Submission(worker, "candidate")
    try:
        batch = timing_check.prepare(submission, "small")
        assert type(batch).__name__ == "Remote"
        _, reply = timing_check.timed_batch(submission, batch, 5, 7, kernel=True)
        event_ms, finite, rows = timing_check.parse_reply(reply, SMALL, 5)
        assert event_ms >= 0
        assert finite.tolist() == [True] * 5
        oracle = paged_attention_decode_reference
        expected = gpu_timing.reference_rows(SMALL, 7, 5, range(5), 2, oracle, kv_sets(SMALL))
        assert relative_error(rows.flatten(0, 1), expected.flatten(0, 1)) <= 1e-4
        _, empty = timing_check.timed_batch(submission, batch, 5, 8, kernel=False)
        assert [tuple(part.shape) for part in empty[1:]] == [(5,), (5, 2, 32)]
        assert submission.transcript.lines == []  # quiet: only a failure is shown
        handle = object.__getattribute__(batch, "_handle")
        del batch
        assert worker.pending_release == [handle]
        again = timing_check.prepare(submission, "small")  # the release rides along
        assert worker.pending_release == []
        assert object.__getattribute__(again, "_handle") != handle
    finally:
        worker.close()


# --- without a CUDA device -------------------------------------------------------------------

# Runs the kernel part's CUDA-only checks through the grader's plugin, in a process of its own
# (the plugin loads its Hypothesis profile globally); a started worker would be an error.
SKIP_PROBE = f"""
import json, pytest
from grader.scoring.plugin import GradingPlugin
from grader.scoring.profiles import PROFILES
from grader.sandbox.process import Limits, Sandbox

def no_worker(self):
    raise AssertionError("a worker was started")

Sandbox.start = no_worker
from pathlib import Path
files = {{path.name: path.read_bytes() for path in Path({str(SOLUTIONS)!r}).glob("*.py")}}
plugin = GradingPlugin(files=files, package="solutions", reference_files=files,
                       grading_profile=PROFILES["quick"], seeded=False, limits=Limits(),
                       worker_env={{"kernel": {{}}}})
checks = {str(CHECKS_DIR)!r}
pytest.main([checks + "/kernel_timing.py", checks + "/kernel.py", "-k",
             "timing or large_cases", "-c", checks + "/pytest.ini", "--rootdir", checks, "-q"],
            plugins=[plugin])
print(json.dumps({{r.id: [r.status, r.message] for r in plugin.results.values()}}))
"""


@no_cuda
def test_without_cuda_the_timing_and_large_checks_skip_before_any_worker_starts():
    done = subprocess.run([sys.executable, "-c", SKIP_PROBE], cwd=KIT_ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    results = json.loads(done.stdout.strip().splitlines()[-1])
    selected = {check: result for check, result in results.items()
                if "speed" in check or "oracle" in check or "large_cases" in check}  # fmt: skip
    assert len(selected) == 5, results
    assert all(result == ["skipped", "needs a CUDA device"] for result in selected.values())


@no_cuda
def test_gpu_check_refuses_without_cuda(tmp_path, capsys):
    assert gpu_check.main(["--out", str(tmp_path / "out")]) == 1
    assert "needs a CUDA device; run it on a GPU machine" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_gpu_check_table_lists_every_shape_and_implementation_last_with_errors():
    row = {"median_us": 100.0, "GBps": 2000.0, "copy_share": 0.5, "check": "ok"}
    results = {
        "batch1-ctx512": {"answer key": row, "split-KV": row | {"median_us": 50.0}},
        "batch64-ctx16384": {"answer key": {"error": "RuntimeError: boom"}, "split-KV": row},
    }
    shown = gpu_check.table(results, 4e12).splitlines()
    assert "4,000 GB/s" in shown[0]
    assert "% copy" in shown[1]
    assert shown[3].split() == [
        "batch1-ctx512",
        "answer",
        "key",
        "100.0",
        "2,000",
        "50%",
        "1.00",
        "ok",
    ]
    assert shown[4].split()[-2] == "0.50"
    assert shown[5].endswith("RuntimeError: boom")
    assert shown[6].split()[-2] == "-"  # no answer-key time to compare with
    assert math.isclose(float(shown[6].split()[2]), 100.0)


def test_gpu_check_times_each_implementation_and_reports_failures_as_rows(
    monkeypatch, tmp_path, small_suite
):
    def broken(*inputs):
        raise RuntimeError("no kernel here")

    found = {"torch": gather_sdpa_decode, "cheat": memoised(gather_sdpa_decode, copy=True),
             "reuser": memoised(gather_sdpa_decode), "broken": broken,
             "absent": "not loaded: no file"}  # fmt: skip
    monkeypatch.setattr(gpu_check, "implementations", lambda log: found)
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    # Few, short batches; the CPU's times mean nothing, so neither does their agreement. Each
    # timed batch makes 4 calls whatever the machine's load (`choose_calls` has its own test): on
    # a busy machine the times chose batches of one call, where no output can come back again.
    monkeypatch.setattr(gpu_check, "ROUNDS", 2)
    monkeypatch.setattr(gpu_timing, "choose_calls", lambda shape, reference_ms: 4)
    monkeypatch.setattr(gpu_timing, "CALIBRATION_MS", 0.5)
    monkeypatch.setattr(gpu_timing, "EVENT_TOLERANCE", math.inf)
    log = gpu_check.Log(tmp_path / "log")
    results = gpu_check.time_suite(1e12, log)
    assert list(results) == ["small", "tiny"]
    row = results["small"]["torch"]
    assert row["check"] == "ok"
    assert row["bytes"] == gpu_timing.bytes_moved(SMALL)
    assert row["GBps"] == pytest.approx(row["bytes"] / row["median_us"] / 1e3)
    assert row["calls"] == 4
    assert row["input_sets"] == gpu_timing.input_sets(SMALL)
    assert "rows off by" in results["small"]["cheat"]["check"]
    assert "output again" in results["small"]["reuser"]["error"]
    assert results["small"]["broken"] == {"error": "RuntimeError: no kernel here"}
    assert results["tiny"]["absent"] == {"error": "not loaded: no file"}
    log.file.close()
    assert "small              torch" in (tmp_path / "log").read_text()


def test_gpu_check_grades_with_the_first_memory_limit_the_sandboxed_probe_passes(
    monkeypatch, tmp_path
):
    asked = []

    def probe(isolation, limits, allocate_bytes):
        asked.append((limits.memory_bytes >> 30, allocate_bytes))
        return "torch cannot use CUDA here: out of memory" if len(asked) < 3 else ""

    monkeypatch.setattr(gpu_check.cuda, "probe", probe)
    log = gpu_check.Log(tmp_path / "log")
    found = gpu_check.probe_worker(log)
    log.file.close()
    assert asked == [(limit, gpu_check.PROBE_BYTES) for limit in gpu_check.PROBE_LIMITS_GB[:3]]
    assert found["memory_limit_gb"] == gpu_check.PROBE_LIMITS_GB[2]
    assert list(found["failures"]) == [f"{limit} GiB" for limit in gpu_check.PROBE_LIMITS_GB[:2]]
    lines = (tmp_path / "log").read_text().splitlines()
    assert lines[0].endswith("memory limit: torch cannot use CUDA here: out of memory")
    assert lines[2].endswith("memory limit: ok")


def test_gpu_check_says_when_no_memory_limit_lets_a_worker_use_cuda(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_check.cuda, "probe", lambda *_: "uid 65534 may not open /dev/nvidia0")
    log = gpu_check.Log(tmp_path / "log")
    found = gpu_check.probe_worker(log)
    log.file.close()
    assert found["memory_limit_gb"] is None
    assert set(found["failures"].values()) == {"uid 65534 may not open /dev/nvidia0"}
