"""Part 4's speed: the candidate's kernel against the answer key's, natively on a CUDA device.

Without CUDA every check here is skipped, "needs a CUDA device", before any worker starts: the
kit never times Triton's interpreter, skipped checks are left out of the part's maximum, and
the report marks the part's score provisional.

How it is measured
------------------
The suite is `kernels.gpu_timing.SUITE`: batch {1, 16, 64} x context {512, 4096, 16384}, 32/8
heads, head dim 128, bfloat16, block size 16. Each worker runs `gpu_timing.time_suite` on its
own `paged_attention` module (a kit tool, copied into the worker): per shape a warm-up call,
then `CALLS` timed calls, each with a fresh query, the next of the rotated input sets, the L2
flushed outside the timed window, CUDA events around the call and the host clock around those
(the tool's docstring says how). First a warm-up round, one call per shape and worker (JIT and
autotuning, each within `WARM_UP_SECONDS`; the candidate's must launch a Triton kernel at every
shape); then a probe round, which ends the measurement
early for a kernel over `HOPELESS`x slower; then `profile.timing_rounds` rounds, each timing the
reference's whole suite and then the candidate's. pytest-benchmark drives those rounds
(`benchmark.pedantic`: the reference's call is the round's setup, the candidate's the timed
target), so its own statistics are the seconds of the candidate's worker call, round trip and
all, and are not scored: what is scored are the CUDA-event times the calls return, whose
medians per shape go into the benchmark's `extra_info` and into the report's benchmarks.

How it is scored
----------------
The timed calls cannot count kernel launches, so the measurement starts with one call through
`check_kernel.run_kernel`: it must launch a `@triton.jit` kernel (a pure-torch answer earns no
speed points) and be right. Per shape, the ratio of the candidate's median time to the
reference's; over the suite, their geometric mean. Three tiers, each a check: within 10x, 3x
and 1.5x of the reference (the answer key graded as a candidate measures about 1x, well within
the last). A tier also needs the timed outputs right and nothing flagged for review. Flagged,
and not rewarded: a shape faster than its bandwidth floor (bytes moved over the copy bandwidth
measured here, with `FLOOR_MARGIN`), a candidate over `IMPLAUSIBLE_SPEEDUP`x faster than the
reference, or event times that disagree with the host clock (`gpu_timing.clock_disagreement`).

The outputs of the timed calls are re-checked here, in the grading process: the worker sends
back a few rows of each output, drawn after the call; the inputs are rebuilt on this process's
GPU (`gpu_timing.make_kv`, `make_query`) and each row is compared with the float64 oracle
within SPEC's tolerance.
"""

import importlib.util
import math
import secrets
import statistics
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from grader.checks.check_kernel import run_kernel
from grader.sandbox import SubmissionFailure
from grader.timing import IMPLAUSIBLE_SPEEDUP
from kernels import gpu_timing
from kernels.cases import TOLERANCE, make_case, relative_error
from kernels.reference import paged_attention_decode_reference

pytestmark = [
    pytest.mark.part("kernel"),
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(
        importlib.util.find_spec("triton") is None,
        reason="needs Triton, which installs on Linux only",
    ),
]

DEVICE = "cuda"  # where the grading process rebuilds inputs and measures the copy bandwidth
CALLS = 4  # timed calls per shape and round (input sets rotate between them)
HOPELESS = 30.0  # a probe this many times slower than the reference ends the measurement
WARM_UP_SECONDS = 300.0  # a shape's first call, compiling and autotuning (within the budget)
FLOOR_MARGIN = 0.8  # a shape below this share of its bandwidth floor is flagged
SPEED_TIERS = (10.0, 3.0, 1.5)  # geometric-mean ratio limits, one check each
SUITE_NAMES = tuple(gpu_timing.SUITE)


@dataclass
class Timings:
    """One implementation's measurement: per shape, every timed call's times and output rows."""

    event_ms: dict[str, list[float]] = field(default_factory=dict)
    wall_ms: dict[str, list[float]] = field(default_factory=dict)
    finite: dict[str, list[bool]] = field(default_factory=dict)
    rows: dict[str, dict[int, torch.Tensor]] = field(default_factory=dict)  # by round seed

    def add(self, seed: int, suite: dict[str, dict]) -> None:
        for name, result in suite.items():
            self.event_ms.setdefault(name, []).extend(result["event_ms"])
            self.wall_ms.setdefault(name, []).extend(result["wall_ms"])
            self.finite.setdefault(name, []).extend(result["finite"])
            self.rows.setdefault(name, {})[seed] = result["rows"]

    def median_ms(self) -> dict[str, float]:
        return {name: statistics.median(times) for name, times in self.event_ms.items()}


@dataclass
class Measurement:
    candidate_ms: dict[str, float]
    reference_ms: dict[str, float]
    geomean: float
    flags: list[str]  # why the timing is flagged for review
    wrong: list[str]  # timed outputs that are wrong


def speed_ratios(candidate_ms: dict[str, float], reference_ms: dict[str, float]) -> dict:
    """Candidate / reference time, per shape."""
    return {name: candidate_ms[name] / reference_ms[name] for name in candidate_ms}


def geometric_mean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(value) for value in values))


def review_flags(
    candidate_ms: dict[str, float],
    reference_ms: dict[str, float],
    copy_bytes_per_second: float,
    clock_problems: dict[str, str],
) -> list[str]:
    """Why the candidate's timing cannot be rewarded as it stands: one line per finding."""
    flags = []
    for name, ms in candidate_ms.items():
        moved = gpu_timing.bytes_moved(gpu_timing.SUITE[name])
        floor_ms = moved / copy_bytes_per_second * 1e3
        if ms < FLOOR_MARGIN * floor_ms:
            flags.append(
                f"{name}: {ms * 1e3:.1f} us for {moved / 1e6:,.1f} MB is "
                f"{moved / ms / 1e6:,.0f} GB/s, past the copy bandwidth measured here "
                f"({copy_bytes_per_second / 1e9:,.0f} GB/s)"
            )
        ratio = ms / reference_ms[name]
        if ratio * IMPLAUSIBLE_SPEEDUP < 1:
            flags.append(f"{name}: {1 / ratio:.0f}x faster than the reference")
        if clock_problems.get(name):
            flags.append(f"{name}: {clock_problems[name]}")
    return flags


def wrong_outputs(timings: Timings, device: str) -> list[str]:
    """The timed calls whose output is not finite or whose sampled rows miss the oracle: the
    first such call per shape, with what rebuilds its inputs."""
    wrong = []
    for name, shape in gpu_timing.SUITE.items():
        if not all(timings.finite.get(name, [True])):
            wrong.append(f"{name}: a timed call's output holds NaN or Inf")
            continue
        if not timings.rows.get(name):
            continue
        sets = range(gpu_timing.input_sets(shape))
        kv_sets = [gpu_timing.make_kv(shape, index, device) for index in sets]
        tolerance = TOLERANCE[shape.torch_dtype]
        for seed, rows in timings.rows[name].items():
            calls, samples = rows.shape[:2]
            expected = gpu_timing.reference_rows(
                shape, seed, calls, samples, paged_attention_decode_reference, kv_sets
            )
            errors = [relative_error(rows[call], expected[call]) for call in range(calls)]
            bad = [call for call, error in enumerate(errors) if not error <= tolerance]  # NaN too
            if bad:
                rows_read = list(
                    zip(*gpu_timing.sample_rows(shape, seed, bad[0], samples), strict=True)
                )
                wrong.append(
                    f"{name}: rows (sequence, head) {rows_read} of a timed call are off by "
                    f"{errors[bad[0]]:.3g} against the float64 reference (tolerance "
                    f"{tolerance:g}); its inputs: kernels.gpu_timing.call_inputs(SUITE[{name!r}], "
                    f"seed={seed}, call={bad[0]}, kv_sets=[make_kv(SUITE[{name!r}], i, 'cuda') "
                    f"for i in range({len(kv_sets)})])"
                )
                break
        del kv_sets
        torch.cuda.empty_cache()
    return wrong


def time_round(workers: Any, seed: int, names: tuple[str, ...], calls: int, warmup: int) -> dict:
    """One worker's suite for one round (its transcript keeps the call only if it fails)."""
    with workers.transcript.quiet():
        return workers.tool(
            "gpu_timing", "time_suite", list(names), seed=seed, calls=calls, warmup=warmup,
            modules=("paged_attention",),
        )  # fmt: skip


def warm_up(workers: Any, name: str) -> int:
    """Shape `name`'s first call (JIT, autotuning) in a worker call of its own; how many Triton
    kernels it launched (a submission could hand the large shapes to torch)."""
    with workers.transcript.quiet():
        launches, _ = workers.tool(
            "gpu_timing", "time_suite", [name], seed=0, calls=0, warmup=1,
            modules=("paged_attention",), count_launches=True, seconds=WARM_UP_SECONDS,
        )  # fmt: skip
    return launches


def measure(submission, reference, benchmark, profile, record_benchmark) -> Measurement:
    """Time the suite, candidate and reference in the same rounds; re-check the outputs."""
    # The timed calls cannot count launches: a first call must show a Triton kernel at work.
    run_kernel(submission, make_case([5, 12], device=DEVICE), "[5, 12]")
    copy_bandwidth = gpu_timing.copy_bandwidth(DEVICE)
    without_triton = []
    for name in SUITE_NAMES:
        warm_up(reference, name)
        if warm_up(submission, name) == 0:
            without_triton.append(name)

    candidate, reference_timings = Timings(), Timings()
    # Fresh seeds each grade: which rows of which call are re-checked cannot be known ahead
    # (a failure names its seed, so it can be replayed).
    probe_seed, *round_seeds = [secrets.randbits(62) for _ in range(1 + profile.timing_rounds)]
    reference_timings.add(probe_seed, time_round(reference, probe_seed, SUITE_NAMES, CALLS, 1))
    candidate.add(probe_seed, time_round(submission, probe_seed, SUITE_NAMES, CALLS, 1))
    probe = geometric_mean(
        list(speed_ratios(candidate.median_ms(), reference_timings.median_ms()).values())
    )
    if probe <= HOPELESS:
        seeds = iter(round_seeds)
        current = {}

        def reference_round() -> None:
            current["seed"] = next(seeds)
            suite = time_round(reference, current["seed"], SUITE_NAMES, CALLS, 1)
            reference_timings.add(current["seed"], suite)

        def candidate_round() -> None:
            candidate.add(current["seed"], time_round(submission, current["seed"], SUITE_NAMES,
                                                      CALLS, 1))  # fmt: skip

        benchmark.pedantic(candidate_round, setup=reference_round, rounds=profile.timing_rounds)

    candidate_ms, reference_ms = candidate.median_ms(), reference_timings.median_ms()
    ratios = speed_ratios(candidate_ms, reference_ms)
    geomean = geometric_mean(list(ratios.values()))
    clock_problems = {
        name: gpu_timing.clock_disagreement(candidate.event_ms[name], candidate.wall_ms[name])
        for name in SUITE_NAMES
    }
    flags = review_flags(candidate_ms, reference_ms, copy_bandwidth, clock_problems)
    flags += [f"{name}: launched no @triton.jit kernel at this shape" for name in without_triton]
    benchmark.extra_info.update(
        {"geomean_ratio": round(geomean, 3), "copy_GBps": round(copy_bandwidth / 1e9)}
        | {f"{name} candidate_us": round(ms * 1e3, 1) for name, ms in candidate_ms.items()}
        | {f"{name} reference_us": round(ms * 1e3, 1) for name, ms in reference_ms.items()}
    )
    for name, ratio in ratios.items():
        record_benchmark(
            f"paged_attention_decode, {name} (32/8 heads, head dim 128, bf16, block 16)",
            candidate_ms[name] / 1e3, reference_ms[name] / 1e3, ratio, SPEED_TIERS[0],
        )  # fmt: skip
    record_benchmark(
        f"paged_attention_decode, geometric mean over the {len(ratios)} shapes",
        geometric_mean([ms / 1e3 for ms in candidate_ms.values()]),
        geometric_mean([ms / 1e3 for ms in reference_ms.values()]),
        geomean, SPEED_TIERS[0],
    )  # fmt: skip
    wrong = wrong_outputs(candidate, DEVICE)
    return Measurement(candidate_ms, reference_ms, geomean, flags, wrong)


@pytest.fixture(scope="module")
def measured() -> dict:
    """The module's one measurement (or the failure that stopped it), for every check here."""
    return {}


@pytest.fixture
def measurement(measured, submission, reference, benchmark, profile, record_benchmark):
    """The measurement, taken by whichever check of this module runs first."""
    if not measured:
        try:
            measured["result"] = measure(
                submission, reference, benchmark, profile, record_benchmark
            )
        except (Exception, SubmissionFailure) as error:
            measured["error"] = error
    if "error" in measured:
        raise measured["error"]
    return measured["result"]


def assert_correct(measurement: Measurement) -> None:
    assert not measurement.wrong, "the outputs of timed calls are wrong: " + "; ".join(
        measurement.wrong
    )


def assert_rewardable(measurement: Measurement) -> None:
    assert_correct(measurement)
    assert not measurement.flags, "timing flagged for review, not rewarded: " + "; ".join(
        measurement.flags
    )


def assert_within(measurement: Measurement, limit: float) -> None:
    assert_rewardable(measurement)
    ratios = speed_ratios(measurement.candidate_ms, measurement.reference_ms)
    slowest = sorted(ratios, key=ratios.get, reverse=True)[:3]
    shown = ", ".join(f"{name} {ratios[name]:.2f}x" for name in slowest)
    assert measurement.geomean <= limit, (
        f"the kernel takes {measurement.geomean:.2f}x the reference's time (geometric mean over "
        f"the {len(ratios)} shapes of the suite; this tier's limit is {limit:g}x); slowest: "
        f"{shown}"
    )


@pytest.mark.points(2)
def check_timed_outputs_match_the_oracle(measurement):
    assert_correct(measurement)


@pytest.mark.points(3)
def check_speed_within_10x_of_the_reference(measurement):
    assert_within(measurement, SPEED_TIERS[0])


@pytest.mark.points(3)
def check_speed_within_3x_of_the_reference(measurement):
    assert_within(measurement, SPEED_TIERS[1])


@pytest.mark.points(3)
def check_speed_within_1_5x_of_the_reference(measurement):
    assert_within(measurement, SPEED_TIERS[2])
