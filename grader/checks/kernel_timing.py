"""Part 4's speed: the candidate's kernel against the answer key's, natively on a CUDA device.

Without CUDA every check here is skipped, "needs a CUDA device", before any worker starts: the
kit never times Triton's interpreter, skipped checks are left out of the part's maximum, and
the report marks the part's score provisional.

How it is measured
------------------
The suite is `grader.sandbox.tools.gpu_timing.SUITE`: batch {1, 16, 64} x context {512, 4096,
16384}, 32/8 heads, head dim 128, bfloat16, block size 16. The kernels run in the workers (the
candidate's own process, and the reference's); the times that are scored are read here, on this
process's own clock (`clock`, `time.perf_counter`), around whole worker calls: nothing a worker
reports is evidence of time (the tool's docstring, "How it is measured", says why and how).

Per shape, each worker prepares a batch (`gpu_timing.prepare_batch`, untimed: the rotated input
sets and a warm-up call), then two worker calls are timed here: the empty batch
(`gpu_timing.run_batch` with `kernel=False`: the same worker call, the same N, no kernel call)
and the timed batch (N calls of the kernel, each on a fresh query and the next input set, back
to back, the device synchronised before the reply, which carries sampled rows of every call's
output). The shape's time per call is (median timed batch - median empty batch) / N over the
rounds (`gpu_timing.per_call_ms`); the empty batch subtracted from the candidate's is never
above the reference's (the same N: the candidate's process could stretch its own empty batch to
shrink its calls).

First, per shape: each worker's first call (JIT and autotuning, within `WARM_UP_SECONDS`; the
candidate's must launch a Triton kernel at every shape), then the probe, each worker's
calibration on this clock (`gpu_timing.calibrate`: batches of 1, 4, 16, ... calls until one
takes past `gpu_timing.CALIBRATION_MS`). From the reference's estimate comes N, the same for
both workers (`gpu_timing.choose_calls`: a batch of the reference's takes about
`gpu_timing.TARGET_BATCH_MS`, so that the round trip and its jitter are a few percent of it;
fewer calls where the candidate's would pass `gpu_timing.MAX_BATCH_MS`). A candidate whose
estimates are over `HOPELESS`x the reference's (geometric mean) is scored on the probe alone.
Then `profile.timing_rounds` rounds, each timing the reference's whole suite and then the
candidate's, shape by shape: a fresh prepared batch, its empty batch, its timed batch.
pytest-benchmark drives those rounds (`benchmark.pedantic`: the reference's suite is the round's
setup, the candidate's the timed target), so its own statistics are the seconds of the
candidate's whole suite, preparation and all, and are not scored: what is scored are the times
per call above, which go into the benchmark's `extra_info` (with N and the worker's event times)
and into the report's benchmarks.

The worker also reports its CUDA events' time around its N calls. It is a cross-check, never
scored: where its median per call and this process's time per call are more than
`1 + gpu_timing.EVENT_TOLERANCE` times apart (`gpu_timing.event_disagreement`), the timing is
flagged for review.

Counterexamples
---------------
No check here shows one. A speed tier is a ratio to the answer key's kernel, timed on the grading
GPU by the kit's harness: neither ships to a candidate, and the contract states no speed a script
could assert. Timed outputs that miss the oracle are named in the message with the call that
rebuilds their inputs; the kernel's own checks (`kernel.py`) show a counterexample for a wrong
output at their smaller shapes.

How it is scored
----------------
The timed calls cannot count kernel launches, so the measurement starts with one call through
`check_kernel.run_kernel`: it must launch a `@triton.jit` kernel (a pure-torch answer earns no
speed points) and be right. Per shape, the ratio of the candidate's time per call to the
reference's; over the suite, their geometric mean. Three tiers, each a check: within 10x, 3x
and 1.5x of the reference (the answer key graded as a candidate measures about 1x, well within
the last). A tier also needs the timed outputs right and nothing flagged for review. Flagged,
and not rewarded, on this process's times: a shape faster than its bandwidth floor (bytes moved
over the copy bandwidth measured here, with `FLOOR_MARGIN`), a candidate over
`IMPLAUSIBLE_SPEEDUP`x faster than the reference; and the worker's events disagreeing with them.

The outputs of the timed calls are re-checked here, in the grading process: each reply carries
`gpu_timing.SAMPLES_PER_CALL` rows of every call's output, drawn after the calls; of each batch,
`RECHECKED_CALLS` calls are chosen here once the reply is in (`secrets`), their inputs rebuilt on
this process's GPU (`gpu_timing.make_kv`, `query_stream`) and each of their rows compared with
the float64 oracle within the contract's tolerance. That the rows of any call may be checked is what
ties a batch's time to its work: a worker that returned before its kernels had run could not send
them.
"""

import importlib.util
import math
import secrets
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from grader.checks.kernel import run_kernel
from grader.said import said
from grader.sandbox import cuda
from grader.sandbox.process import SubmissionFailure
from grader.sandbox.tools import gpu_timing
from grader.scoring.timing import implausible
from kernels.cases import TOLERANCE, make_case, relative_error
from kernels.reference import paged_attention_decode_reference

pytestmark = [
    pytest.mark.part("kernel"),
    pytest.mark.skipif(not cuda.native(), reason=said("needs a CUDA device")),
    pytest.mark.skipif(
        importlib.util.find_spec("triton") is None,
        reason=said("needs Triton, which installs on Linux only"),
    ),
]

DEVICE = "cuda"  # where the grading process rebuilds inputs and measures the copy bandwidth
HOPELESS = 30.0  # a probe this many times slower than the reference ends the measurement
WARM_UP_SECONDS = 300.0  # a shape's first call, compiling and autotuning (within the budget)
FLOOR_MARGIN = 0.8  # a shape below this share of its bandwidth floor is flagged
SPEED_TIERS = (10.0, 3.0, 1.5)  # geometric-mean ratio limits, one check each
RECHECKED_CALLS = 4  # per batch: calls whose rows are re-checked, chosen once the reply is in
SUITE_NAMES = tuple(gpu_timing.SUITE)
clock = time.perf_counter  # the grading process's own clock: every scored time is read on it
chooser = secrets.SystemRandom()  # which calls are re-checked: nothing the worker can predict


@dataclass
class Timings:
    """One implementation's measurement, per shape: this process's wall times (ms) of the timed
    and the empty batches of the rounds, the worker's CUDA-event times per call (a cross-check),
    the probe's estimates, and the evidence of the outputs."""

    batch_ms: dict[str, list[float]] = field(default_factory=dict)
    empty_ms: dict[str, list[float]] = field(default_factory=dict)
    event_ms: dict[str, list[float]] = field(default_factory=dict)  # per call, as reported
    probe_ms: dict[str, float] = field(default_factory=dict)  # per call
    probe_event_ms: dict[str, float] = field(default_factory=dict)  # per call, as reported
    probe_calls: dict[str, int] = field(default_factory=dict)
    finite: dict[str, list[bool]] = field(default_factory=dict)  # per batch, as reported
    # By batch seed: the batch's calls, the calls re-checked, and their rows.
    rows: dict[str, dict[int, tuple[int, list[int], torch.Tensor]]] = field(default_factory=dict)

    def evidence(self, name: str, seed: int, calls: int, reply: Any) -> float:
        """Keep a timed batch's evidence: whether all its outputs were finite, and the rows of
        `RECHECKED_CALLS` calls chosen now; its CUDA-event time per call (NaN if not a number)."""
        event_ms, finite, rows = parse_reply(reply, gpu_timing.SUITE[name], calls)
        checked = sorted(chooser.sample(range(calls), min(RECHECKED_CALLS, calls)))
        self.finite.setdefault(name, []).append(bool(finite.all()))
        self.rows.setdefault(name, {})[seed] = (calls, checked, rows[checked])
        return event_ms / calls if math.isfinite(event_ms) else math.nan

    def add(self, name: str, seed: int, calls: int, empty_ms: float, batch_ms: float,
            reply: Any) -> None:  # fmt: skip
        """A round's empty and timed batch of shape `name`."""
        self.event_ms.setdefault(name, []).append(self.evidence(name, seed, calls, reply))
        self.empty_ms.setdefault(name, []).append(empty_ms)
        self.batch_ms.setdefault(name, []).append(batch_ms)


def parse_reply(reply: Any, shape: gpu_timing.Shape, calls: int) -> tuple[float, Any, Any]:
    """A timed batch's reply, `(event_ms, finite, rows)`, as the kit's tool sends it; an
    AssertionError if it is not (the worker is the candidate's process)."""
    samples = min(gpu_timing.SAMPLES_PER_CALL, shape.batch * shape.num_heads)
    match reply:
        case (int() | float() as event_ms, torch.Tensor() as finite, torch.Tensor() as rows) if (
            type(event_ms) is not bool
            and finite.dtype == torch.bool
            and tuple(finite.shape) == (calls,)
            and rows.dtype == shape.torch_dtype
            and tuple(rows.shape) == (calls, samples, shape.head_dim)
        ):
            return float(event_ms), finite, rows
    raise AssertionError(
        said(
            "the worker's reply to a timed batch of {calls} calls is not the kit's "
            "tool's (event time, [{flags}] finite flags, [{rows}, {samples}, {head_dim}] "
            "rows): {type}",
            calls=calls,
            flags=calls,
            rows=calls,
            samples=samples,
            head_dim=shape.head_dim,
            type=type(reply).__name__,
        )
    )


@dataclass
class Measurement:
    candidate_ms: dict[str, float]  # per call, on the grading process's clock
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
    event_problems: dict[str, str],
) -> list[str]:
    """Why the candidate's timing cannot be rewarded as it stands: one line per finding. The
    times are the grading process's; `event_problems` are the worker's events disagreeing."""
    flags = []
    for name, ms in candidate_ms.items():
        moved = gpu_timing.bytes_moved(gpu_timing.SUITE[name])
        floor_ms = moved / copy_bytes_per_second * 1e3
        if ms < FLOOR_MARGIN * floor_ms:
            flags.append(
                said(
                    "{shape}: {us} us for {mb} MB is {rate} GB/s, past the copy "
                    "bandwidth measured here ({copy} GB/s)",
                    shape=name,
                    us=f"{ms * 1000.0:.1f}",
                    mb=f"{moved / 1000000.0:,.1f}",
                    rate=f"{moved / ms / 1000000.0:,.0f}",
                    copy=f"{copy_bytes_per_second / 1000000000.0:,.0f}",
                )
            )
        ratio = ms / reference_ms[name]
        if implausible(ratio):
            flags.append(
                said(
                    "{shape}: {speedup}x faster than the reference",
                    shape=name,
                    speedup=f"{1 / ratio:.0f}",
                )
            )
        if event_problems.get(name):
            flags.append(f"{name}: {event_problems[name]}")
    return flags


def wrong_outputs(timings: Timings, device: str) -> list[str]:
    """The timed calls whose output is not finite or whose sampled rows miss the oracle: the
    first such call per shape, with what rebuilds its inputs."""
    wrong = []
    for name, shape in gpu_timing.SUITE.items():
        if not all(timings.finite.get(name, [True])):
            wrong.append(said("{shape}: a timed call's output holds NaN or Inf", shape=name))
            continue
        if not timings.rows.get(name):
            continue
        sets = range(gpu_timing.input_sets(shape))
        kv_sets = [gpu_timing.make_kv(shape, index, device) for index in sets]
        tolerance = TOLERANCE[shape.torch_dtype]
        for seed, (calls, checked, rows) in timings.rows[name].items():
            samples = rows.shape[1]
            expected = gpu_timing.reference_rows(
                shape, seed, calls, checked, samples, paged_attention_decode_reference, kv_sets
            )
            errors = [relative_error(rows[index], expected[index]) for index in range(len(checked))]
            bad = [index for index, error in enumerate(errors) if not error <= tolerance]  # NaN too
            if bad:
                call = checked[bad[0]]
                seqs, heads = gpu_timing.sample_rows(shape, seed, calls, samples)
                rows_read = list(zip(seqs[call].tolist(), heads[call].tolist(), strict=True))
                wrong.append(
                    said(
                        "{shape}: rows (sequence, head) {rows} of a timed call are off "
                        "by {error} against the float64 reference (tolerance "
                        "{tolerance}); its inputs: "
                        "grader.sandbox.tools.gpu_timing.call_inputs(SUITE[{name}], "
                        "seed={seed}, call={index}, kv_sets=[make_kv(SUITE[{again}], i, "
                        "'cuda') for i in range({sets})])",
                        shape=name,
                        rows=rows_read,
                        error=f"{errors[bad[0]]:.3g}",
                        tolerance=f"{tolerance:g}",
                        name=f"{name!r}",
                        seed=seed,
                        index=call,
                        again=f"{name!r}",
                        sets=len(kv_sets),
                    )
                )
                break
        del kv_sets
        torch.cuda.empty_cache()
    return wrong


def warm_up(workers: Any, name: str) -> tuple[int, list[str], Any]:
    """Shape `name`'s first prepared batch, its first call (JIT, autotuning) in a worker call of
    its own: how many Triton kernels that launched and which torch ops the candidate's function
    ran outside them (a submission could hand the large shapes to torch), and the batch (a
    handle)."""
    with workers.transcript.quiet():
        reply = workers.tool(
            "gpu_timing", "prepare_batch", name, warmup=1, modules=("paged_attention",),
            watch="paged_attention_decode", seconds=WARM_UP_SECONDS,
        )  # fmt: skip
    match reply:
        case (int(launches), list(ops), batch):
            return launches, [str(op)[:80] for op in ops], batch
    raise AssertionError(
        said("the worker's reply to the warm-up is malformed: {reply}", reply=str(reply)[:200])
    )


def prepare(workers: Any, name: str) -> Any:
    """Shape `name`'s batch, prepared in the worker (input sets, a warm-up call): untimed."""
    with workers.transcript.quiet():
        return workers.tool(
            "gpu_timing", "prepare_batch", name, warmup=1, modules=("paged_attention",)
        )


def timed_batch(workers: Any, batch: Any, calls: int, seed: int, kernel: bool) -> tuple:
    """One `run_batch` worker call: its wall time in ms on this process's clock, round trip and
    all, and the worker's reply (nothing in it is a time that is scored)."""
    with workers.transcript.quiet():
        started = clock()
        reply = workers.tool(
            "gpu_timing", "run_batch", batch, calls=calls, seed=seed, kernel=kernel
        )
        wall_ms = (clock() - started) * 1e3
    return wall_ms, reply


def probe(workers: Any, batch: Any, name: str, timings: Timings) -> None:
    """Shape `name`'s calibration in one worker (`gpu_timing.calibrate`), into `timings`: the
    estimate per call, the calls it was measured on and the worker's event time then."""
    shape, last = gpu_timing.SUITE[name], {}

    def net_ms(calls: int) -> float:
        empty_ms, _ = timed_batch(workers, batch, calls, secrets.randbits(62), kernel=False)
        seed = secrets.randbits(62)
        batch_ms, reply = timed_batch(workers, batch, calls, seed, kernel=True)
        last["event"] = timings.evidence(name, seed, calls, reply)
        return batch_ms - empty_ms

    estimate, calls = gpu_timing.calibrate(net_ms, gpu_timing.max_calls(shape))
    timings.probe_ms[name], timings.probe_calls[name] = estimate, calls
    timings.probe_event_ms[name] = last["event"]


def time_suite(workers: Any, timings: Timings, seed: int, calls: dict[str, int]) -> None:
    """One worker's suite for one round: per shape a prepared batch, its empty batch (a seed of
    its own), then its timed batch (the round's seed)."""
    for name in SUITE_NAMES:
        batch = prepare(workers, name)
        empty_ms, _ = timed_batch(workers, batch, calls[name], secrets.randbits(62), kernel=False)
        batch_ms, reply = timed_batch(workers, batch, calls[name], seed, kernel=True)
        del batch  # released in the worker with its next request
        timings.add(name, seed, calls[name], empty_ms, batch_ms, reply)


def measure(submission, reference, benchmark, profile, record_benchmark) -> Measurement:
    """Time the suite, candidate and reference in the same rounds; re-check the outputs."""
    # The timed calls cannot count launches: a first call must show a Triton kernel at work.
    run_kernel(submission, make_case([5, 12], device=DEVICE), "[5, 12]", shown=False)
    copy_bandwidth = gpu_timing.copy_bandwidth(DEVICE)
    candidate, reference_timings = Timings(), Timings()
    without_triton, with_torch, calls = [], [], {}
    for name in SUITE_NAMES:
        *_, reference_batch = warm_up(reference, name)
        launches, ops, candidate_batch = warm_up(submission, name)
        if launches == 0:
            without_triton.append(name)
        if ops:
            with_torch.append(
                said(
                    "{shape}: computed attention with torch ({ops})", shape=name, ops=", ".join(ops)
                )
            )
        probe(reference, reference_batch, name, reference_timings)
        probe(submission, candidate_batch, name, candidate)
        del reference_batch, candidate_batch
        calls[name] = gpu_timing.choose_calls(
            gpu_timing.SUITE[name], reference_timings.probe_ms[name], candidate.probe_ms[name]
        )

    probe_ratio = geometric_mean(
        list(speed_ratios(candidate.probe_ms, reference_timings.probe_ms).values())
    )
    if probe_ratio <= HOPELESS:
        # Fresh seeds each grade: which rows of which call are re-checked cannot be known ahead
        # (a failure names its seed, so it can be replayed).
        seeds = iter([secrets.randbits(62) for _ in range(profile.timing_rounds)])
        current = {}

        def reference_round() -> None:
            current["seed"] = next(seeds)
            time_suite(reference, reference_timings, current["seed"], calls)

        def candidate_round() -> None:
            time_suite(submission, candidate, current["seed"], calls)

        benchmark.pedantic(candidate_round, setup=reference_round, rounds=profile.timing_rounds)
        reference_ms = {
            name: gpu_timing.per_call_ms(
                reference_timings.batch_ms[name], reference_timings.empty_ms[name], calls[name]
            )
            for name in SUITE_NAMES
        }
        # The candidate's empty batch, never above the reference's (the same N).
        cap_ms = {name: statistics.median(reference_timings.empty_ms[name]) for name in SUITE_NAMES}
        candidate_ms = {
            name: gpu_timing.per_call_ms(
                candidate.batch_ms[name], candidate.empty_ms[name], calls[name], cap_ms[name]
            )
            for name in SUITE_NAMES
        }
        event_problems = {
            name: gpu_timing.event_disagreement(
                candidate.event_ms[name], candidate_ms[name], calls[name]
            )
            for name in SUITE_NAMES
        }
        event_ms = {name: statistics.median(candidate.event_ms[name]) for name in SUITE_NAMES}
    else:  # scored on the probe alone
        reference_ms, candidate_ms = dict(reference_timings.probe_ms), dict(candidate.probe_ms)
        event_problems = {
            name: gpu_timing.event_disagreement(
                [candidate.probe_event_ms[name]], candidate_ms[name], candidate.probe_calls[name]
            )
            for name in SUITE_NAMES
        }
        event_ms, calls = dict(candidate.probe_event_ms), dict(candidate.probe_calls)

    ratios = speed_ratios(candidate_ms, reference_ms)
    geomean = geometric_mean(list(ratios.values()))
    flags = review_flags(candidate_ms, reference_ms, copy_bandwidth, event_problems)
    flags += [
        said("{shape}: launched no @triton.jit kernel at this shape", shape=name)
        for name in without_triton
    ]
    flags += with_torch
    benchmark.extra_info.update(
        {"geomean_ratio": round(geomean, 3), "copy_GBps": round(copy_bandwidth / 1e9)}
        | {f"{name} candidate_us": round(ms * 1e3, 1) for name, ms in candidate_ms.items()}
        | {f"{name} reference_us": round(ms * 1e3, 1) for name, ms in reference_ms.items()}
        | {f"{name} calls": calls[name] for name in SUITE_NAMES}
        | {f"{name} candidate_event_us": round(ms * 1e3, 1) for name, ms in event_ms.items()}
    )
    for name, ratio in ratios.items():
        record_benchmark(
            said(
                "paged_attention_decode, {shape} (32/8 heads, head dim 128, bf16, block 16)",
                shape=name,
            ),
            candidate_ms[name] / 1e3,
            reference_ms[name] / 1e3,
            ratio,
            SPEED_TIERS[0],
        )
    record_benchmark(
        said("paged_attention_decode, geometric mean over the {count} shapes", count=len(ratios)),
        geometric_mean([ms / 1e3 for ms in candidate_ms.values()]),
        geometric_mean([ms / 1e3 for ms in reference_ms.values()]),
        geomean,
        SPEED_TIERS[0],
    )
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
    submission.transcript.reset()  # no counterexample: see "Counterexamples" above
    if "error" in measured:
        raise measured["error"]
    return measured["result"]


def assert_correct(measurement: Measurement) -> None:
    assert not measurement.wrong, said(
        "the outputs of timed calls are wrong: {wrong_list}", wrong_list=measurement.wrong
    )


def assert_rewardable(measurement: Measurement) -> None:
    assert_correct(measurement)
    assert not measurement.flags, said(
        "timing flagged for review, not rewarded: {flag_list}", flag_list=measurement.flags
    )


def assert_within(measurement: Measurement, limit: float) -> None:
    assert_rewardable(measurement)
    ratios = speed_ratios(measurement.candidate_ms, measurement.reference_ms)
    slowest = sorted(ratios, key=ratios.get, reverse=True)[:3]
    shown = ", ".join(f"{name} {ratios[name]:.2f}x" for name in slowest)
    assert measurement.geomean <= limit, said(
        "the kernel takes {ratio}x the reference's time (geometric mean over the "
        "{count} shapes of the suite; this tier's limit is {limit}x); slowest: "
        "{slowest}",
        ratio=f"{measurement.geomean:.2f}",
        count=len(ratios),
        limit=f"{limit:g}",
        slowest=shown,
    )


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_timed_outputs_match_the_oracle(measurement):
    assert_correct(measurement)


@pytest.mark.points(3)
@pytest.mark.severity("speed")
def check_speed_within_10x_of_the_reference(measurement):
    assert_within(measurement, SPEED_TIERS[0])


@pytest.mark.points(3)
@pytest.mark.severity("speed")
def check_speed_within_3x_of_the_reference(measurement):
    assert_within(measurement, SPEED_TIERS[1])


@pytest.mark.points(3)
@pytest.mark.severity("speed")
def check_speed_within_1_5x_of_the_reference(measurement):
    assert_within(measurement, SPEED_TIERS[2])
