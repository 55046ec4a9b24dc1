"""Part 4's GPU timing, as far as a CPU can check it: no test here times anything.

The suite, the inputs (deterministic, NaN where a kernel must not read), the bytes moved, the
torch baseline against the oracle, the timed loop's bookkeeping (with `HostEvent` standing in
for CUDA events, and the torch baseline for a kernel), the grading process's re-check and
scoring, and the skips and refusals without a CUDA device.
"""

import contextlib
import importlib
import json
import math
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from kernels import gpu_check, gpu_timing
from kernels.cases import TOLERANCE, make_case, relative_error
from kernels.gpu_timing import SUITE, Shape
from kernels.reference import paged_attention_decode_reference
from kernels.torch_baseline import gather_sdpa_decode
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


def test_input_sets_rotate_two_to_four_and_the_largest_shape_fits_twice():
    counts = {name: gpu_timing.input_sets(shape) for name, shape in SUITE.items()}
    assert counts["batch64-ctx16384"] == 2
    assert counts["batch1-ctx512"] == 4
    assert set(counts.values()) <= {2, 3, 4}


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


def test_each_call_gets_a_fresh_query_and_its_own_rows():
    assert torch.equal(gpu_timing.make_query(SMALL, 1, 0), gpu_timing.make_query(SMALL, 1, 0))
    assert not torch.equal(gpu_timing.make_query(SMALL, 1, 0), gpu_timing.make_query(SMALL, 1, 1))
    assert not torch.equal(gpu_timing.make_query(SMALL, 1, 0), gpu_timing.make_query(SMALL, 2, 0))
    rows = [gpu_timing.sample_rows(SMALL, 1, call, 6) for call in range(4)]
    assert rows[0] == gpu_timing.sample_rows(SMALL, 1, 0, 6)
    assert len({str(row) for row in rows}) > 1
    for seqs, heads in rows:
        assert all(0 <= s < 3 for s in seqs)
        assert all(0 <= h < 4 for h in heads)


def test_the_l2_flush_is_twice_the_l2_or_a_fallback():
    assert gpu_timing.l2_flush_bytes(SimpleNamespace(L2_cache_size=60 << 20)) == 120 << 20
    fallback = 2 * gpu_timing.FALLBACK_L2_BYTES
    assert gpu_timing.l2_flush_bytes(SimpleNamespace()) == fallback
    assert gpu_timing.l2_flush_bytes(SimpleNamespace(L2_cache_size=0)) == fallback


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


# --- the timed loop's bookkeeping, and the re-check ----------------------------------------


def memoised(decode):
    """A cheat: for every call, the output of the first call with q's shape."""
    kept = {}

    def call(q, *rest):
        return kept.setdefault(q.shape, decode(q, *rest))

    return call


def test_time_calls_returns_every_calls_figures_and_rows_the_oracle_confirms():
    timed = gpu_timing.time_calls(gather_sdpa_decode, SMALL, seed=5, calls=6, device="cpu")
    assert timed["bytes"] == gpu_timing.bytes_moved(SMALL)
    assert timed["input_sets"] == 4
    assert len(timed["event_ms"]) == len(timed["wall_ms"]) == len(timed["finite"]) == 6
    assert all(timed["finite"])
    assert timed["rows"].shape == (6, gpu_timing.SAMPLES_PER_CALL, 32)
    expected = gpu_timing.reference_rows(
        SMALL, 5, 6, gpu_timing.SAMPLES_PER_CALL, paged_attention_decode_reference, kv_sets(SMALL)
    )
    assert relative_error(timed["rows"].flatten(0, 1), expected.flatten(0, 1)) <= 1e-4
    assert gpu_timing.clock_disagreement(timed["event_ms"], timed["wall_ms"]) == ""


def test_a_memoised_output_fails_the_recheck():
    timed = gpu_timing.time_calls(memoised(gather_sdpa_decode), SMALL, seed=5, calls=4,
                                  device="cpu", warmup=0)  # fmt: skip
    expected = gpu_timing.reference_rows(
        SMALL, 5, 4, gpu_timing.SAMPLES_PER_CALL, paged_attention_decode_reference, kv_sets(SMALL)
    )
    assert relative_error(timed["rows"][1:].flatten(0, 1), expected[1:].flatten(0, 1)) > 0.1


def test_an_output_of_the_wrong_shape_or_dtype_is_refused():
    def wrong_dtype(q, *rest):
        return gather_sdpa_decode(q, *rest).double()

    with pytest.raises(ValueError, match=r"not \[3, 4, 32\] torch.float32"):
        gpu_timing.time_calls(wrong_dtype, SMALL, seed=0, calls=1, device="cpu")
    with pytest.raises(ValueError, match="returned list"):
        gpu_timing.time_calls(lambda *inputs: [], SMALL, seed=0, calls=1, device="cpu")


def test_clock_disagreement():
    assert gpu_timing.clock_disagreement([1.0, 1.1], [1.2, 1.3]) == ""
    assert "exceeds" in gpu_timing.clock_disagreement([1.0, 2.0], [1.2, 1.3])
    assert "outside the timed stream" in gpu_timing.clock_disagreement([0.01] * 3, [9.0] * 3)


@no_cuda
def test_the_worker_tool_and_the_copy_bandwidth_refuse_without_cuda():
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        gpu_timing.time_suite(SimpleNamespace(), ["batch1-ctx512"], seed=0, calls=1)
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        gpu_timing.copy_bandwidth("cpu")


# --- the grading process's side: scoring, flags, the whole measurement ------------------------


@pytest.fixture
def timing_check(pytestconfig):
    """The check module; its markers are the grader's, registered here as the grader does."""
    pytestconfig.addinivalue_line("markers", "part(id): the part a check module grades")
    pytestconfig.addinivalue_line("markers", "points(n): what a check is worth within its part")
    return importlib.import_module("grader.checks.check_kernel_timing")


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
    clock = timing_check.review_flags({name: floor_ms}, {name: floor_ms}, bandwidth, {name: "x"})
    assert clock == [f"{name}: x"]


class FakeWorkers:
    """A worker that runs `time_calls` on the CPU with `decode`, as the tool would on CUDA, and
    says it launched `launches` kernels."""

    def __init__(self, decode, launches=1):
        self.decode, self.launches, self.calls = decode, launches, []
        self.transcript = SimpleNamespace(
            quiet=contextlib.nullcontext, define=lambda *lines, **values: None
        )

    def module(self, name):
        assert name == "paged_attention"
        return SimpleNamespace(call_counting_launches=self.call_counting_launches)

    def call_counting_launches(self, function, *inputs):
        return self.launches, self.decode(*inputs)

    def tool(self, tool, function, names, *, seed, calls, warmup, modules, count_launches=False,
             seconds=None):  # fmt: skip
        assert (tool, function, modules) == ("gpu_timing", "time_suite", ("paged_attention",))
        self.calls.append((tuple(names), seed, calls))
        suite = {
            name: gpu_timing.time_calls(self.decode, gpu_timing.SUITE[name], seed=seed,
                                        calls=calls, warmup=warmup, device="cpu")
            for name in names
        }  # fmt: skip
        return (self.launches, suite) if count_launches else suite


class FakeBenchmark:
    def __init__(self):
        self.extra_info = {}

    def pedantic(self, target, setup, rounds):
        for _ in range(rounds):
            setup()
            target()


@pytest.fixture
def small_suite(monkeypatch, timing_check):
    suite = {"small": SMALL, "tiny": TINY}
    monkeypatch.setattr(gpu_timing, "SUITE", suite)
    monkeypatch.setattr(timing_check, "SUITE_NAMES", tuple(suite))
    monkeypatch.setattr(timing_check, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_timing, "copy_bandwidth", lambda device: 1e15)


@pytest.mark.parametrize(("cheat", "wrong"), [(False, False), (True, True)])
def test_the_measurement_interleaves_rounds_and_rechecks_the_candidate(
    timing_check, small_suite, cheat, wrong
):
    candidate = FakeWorkers(memoised(gather_sdpa_decode) if cheat else gather_sdpa_decode)
    reference = FakeWorkers(gather_sdpa_decode)
    recorded = []
    profile = SimpleNamespace(timing_rounds=2)
    measurement = timing_check.measure(
        candidate, reference, FakeBenchmark(), profile, lambda *row: recorded.append(row)
    )
    # Warm-up per shape, the probe round, then 2 rounds: the same fresh seeds for both.
    assert candidate.calls == reference.calls
    assert [c[1:] for c in candidate.calls[:2]] == [(0, 0)] * 2
    seeds = [seed for _, seed, calls in candidate.calls[2:] if calls == 4]
    assert len(seeds) == len(set(seeds)) == 3
    assert set(measurement.candidate_ms) == {"small", "tiny"}
    assert [row[0].split(",")[1].split()[0] for row in recorded[:2]] == ["small", "tiny"]
    assert "geometric mean" in recorded[-1][0]
    assert bool(measurement.wrong) == wrong
    if wrong:
        assert "call_inputs(SUITE['small']" in measurement.wrong[0]


# --- without a CUDA device -------------------------------------------------------------------

# Runs the kernel part's CUDA-only checks through the grader's plugin, in a process of its own
# (the plugin loads its Hypothesis profile globally); a started worker would be an error.
SKIP_PROBE = f"""
import json, pytest
from grader.plugin import GradingPlugin
from grader.profiles import PROFILES
from grader.sandbox import Limits, Sandbox

def no_worker(self):
    raise AssertionError("a worker was started")

Sandbox.start = no_worker
from pathlib import Path
files = {{path.name: path.read_bytes() for path in Path({str(SOLUTIONS)!r}).glob("*.py")}}
plugin = GradingPlugin(files=files, package="solutions", reference_files=files,
                       grading_profile=PROFILES["quick"], seeded=False, limits=Limits(),
                       worker_env={{"kernel": {{}}}})
checks = {str(CHECKS_DIR)!r}
pytest.main([checks + "/check_kernel_timing.py", checks + "/check_kernel.py", "-k",
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
                if "speed" in check or "oracle" in check or "large" in check}  # fmt: skip
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


def test_a_candidate_that_launches_no_triton_kernel_is_not_timed(timing_check, small_suite):
    candidate = FakeWorkers(gather_sdpa_decode, launches=0)
    with pytest.raises(AssertionError, match="launched no @triton"):
        timing_check.measure(candidate, FakeWorkers(gather_sdpa_decode), FakeBenchmark(),
                             SimpleNamespace(timing_rounds=1), lambda *row: None)  # fmt: skip
    assert candidate.calls == []


def test_a_kernel_that_hands_a_suite_shape_to_torch_is_flagged(timing_check, small_suite):
    candidate = FakeWorkers(gather_sdpa_decode)  # its first, small call launched a kernel
    tool = candidate.tool

    def no_kernel_at_small(*args, count_launches=False, **kwargs):
        value = tool(*args, count_launches=count_launches, **kwargs)
        return (0, value[1]) if count_launches and args[2] == ["small"] else value

    candidate.tool = no_kernel_at_small
    measurement = timing_check.measure(candidate, FakeWorkers(gather_sdpa_decode),
                                       FakeBenchmark(), SimpleNamespace(timing_rounds=1),
                                       lambda *row: None)  # fmt: skip
    assert measurement.flags == ["small: launched no @triton.jit kernel at this shape"]


def test_gpu_check_times_each_implementation_and_reports_failures_as_rows(
    monkeypatch, tmp_path, small_suite
):
    def broken(*inputs):
        raise RuntimeError("no kernel here")

    found = {"torch": gather_sdpa_decode, "cheat": memoised(gather_sdpa_decode), "broken": broken,
             "absent": "not loaded: no file"}  # fmt: skip
    monkeypatch.setattr(gpu_check, "implementations", lambda log: found)
    monkeypatch.setattr(gpu_check, "DEVICE", "cpu")
    log = gpu_check.Log(tmp_path / "log")
    results = gpu_check.time_suite(1e12, log)
    assert list(results) == ["small", "tiny"]
    row = results["small"]["torch"]
    assert row["check"] == "ok"
    assert row["bytes"] == gpu_timing.bytes_moved(SMALL)
    assert row["GBps"] == pytest.approx(row["bytes"] / row["median_us"] / 1e3)
    assert "rows off by" in results["small"]["cheat"]["check"]
    assert results["small"]["broken"] == {"error": "RuntimeError: no kernel here"}
    assert results["tiny"]["absent"] == {"error": "not loaded: no file"}
    log.file.close()
    assert "small              torch" in (tmp_path / "log").read_text()
