"""`python -m full_kit.gpu_check [--out DIR]` (`make gpu-check`): part 4 on a CUDA machine.

1. Preflight: can a sandboxed worker use the GPU? The grader's own probe (`grader.sandbox.cuda`)
   starts a worker as part 4's are (the sandbox, its user, its memory limit), which allocates
   `PROBE_BYTES` on the device and runs a Triton kernel on them; where it cannot, the log says
   what the driver and the device files said. It tries the grader's default memory limit first
   and then larger ones, and the grade runs with the first that works (said in the log and the
   JSON).
2. The kernel part's checks, natively: `python -m grader solutions --parts kernel`, its report
   under `DIR/grade/`, its output in the log.
3. The device's copy bandwidth (`gpu_timing.copy_bandwidth`).
4. The timing suite (`gpu_timing.SUITE`) for the answer key's `paged_attention_decode`, the
   split-KV kernel and torch's gather-then-SDPA, measured as the grader measures it, here in
   one process (`gpu_timing.Batch`): per shape a calibration, then `ROUNDS` rounds of an empty
   and a timed batch of N calls on this process's clock; the time per call is (median timed
   batch - median empty batch) / N (`gpu_timing.per_call_ms`), and the CUDA events' time per
   call stands beside it, checked against it as the grader does (`event_disagreement`). A few
   calls' sampled output rows per batch are re-checked against the float64 oracle. An
   implementation that fails is reported, and the rest go on.
5. `DIR/gpu_check.json` (every figure) and `DIR/gpu_check.log` (everything printed), then one
   table, printed last: per shape and implementation, the time per call, the achieved GB/s
   (`gpu_timing.bytes_moved` over the time) and its share of the copy bandwidth.

DIR defaults to `$OUT` if set, else `reports/gpu-check`. Exit status 0 when everything ran and
passed; 1 without a CUDA device or when anything failed. It takes a few minutes on an H200.
"""

import argparse
import importlib.util
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from full_kit.torch_baseline import gather_sdpa_decode
from grader import KIT_ROOT
from grader.sandbox import cuda, isolation
from grader.sandbox.process import Limits
from grader.sandbox.tools import gpu_timing
from kernels.cases import TOLERANCE, relative_error
from kernels.reference import paged_attention_decode_reference

ANSWER_KEY = KIT_ROOT / "solutions" / "paged_attention.py"
DEVICE = "cuda"
ROUNDS = 10  # empty and timed batches per shape and implementation
SEED = 2024
PROBE_LIMITS_GB = (8, 64, 512, 4096)  # worker memory limits to try, the grader's default first
PROBE_BYTES = 10 << 30  # device memory the probe allocates: more than the timing suite's
GRADE_TIMEOUT = 240.0


class Log:
    """Progress lines on stderr, and every line in `gpu_check.log`."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")

    def __call__(self, line: str) -> None:
        print(line, file=sys.stderr, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


def probe_worker(log: Log) -> dict:
    """The smallest of `PROBE_LIMITS_GB` under which a sandboxed worker can use CUDA."""
    failures = {}
    for limit_gb in PROBE_LIMITS_GB:
        limits = Limits(memory_bytes=limit_gb << 30)
        problem = cuda.probe(isolation.probe(), limits, PROBE_BYTES)
        log(f"  worker probe, {limit_gb} GiB memory limit: {problem or 'ok'}")
        if not problem:
            return {"memory_limit_gb": limit_gb, "failures": failures}
        failures[f"{limit_gb} GiB"] = problem
    return {"memory_limit_gb": None, "failures": failures}


def grade(out: Path, memory_limit_gb: int, log: Log) -> dict:
    """Run the grader on the answer key's kernel part; a summary of its report."""
    command = [
        sys.executable, "-m", "grader", "solutions", "--parts", "kernel",
        "--out", str(out), "--memory-limit-gb", str(memory_limit_gb),
    ]  # fmt: skip
    log(f"  $ {' '.join(command)}")
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=KIT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watchdog = threading.Timer(GRADE_TIMEOUT, process.kill)
    watchdog.start()
    try:
        for line in process.stdout:
            log(f"  | {line.rstrip()}")
        status = process.wait()
    finally:
        watchdog.cancel()
    seconds = round(time.monotonic() - started, 1)
    if status != 0 or not (out / "report.json").is_file():
        how = "was stopped" if seconds >= GRADE_TIMEOUT else f"exited with status {status}"
        return {"ok": False, "seconds": seconds, "error": f"the grader {how} (see the log)"}
    part = json.loads((out / "report.json").read_text())["parts"]["kernel"]
    checks = {check["name"]: check["status"] for check in part["checks"]}
    return {
        "ok": all(status == "passed" for status in checks.values()),
        "seconds": seconds,
        "score": part["score"],
        "max_score": part["max_score"],
        "checks": checks,
        "messages": {c["name"]: c["message"] for c in part["checks"] if c["status"] != "passed"},
    }


def implementations(log: Log) -> dict[str, Callable[..., torch.Tensor] | str]:
    """What is timed, by name: a decode function, or why it could not be loaded."""
    found: dict[str, Callable[..., torch.Tensor] | str] = {}
    try:
        spec = importlib.util.spec_from_file_location("answer_key_paged_attention", ANSWER_KEY)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import would: Triton reads the kernel's source
        spec.loader.exec_module(module)
        found["answer key"] = module.paged_attention_decode
    except (OSError, ImportError, AttributeError) as error:
        found["answer key"] = f"not loaded: {error}"
        log(f"  answer key {found['answer key']}")
    try:
        from full_kit.paged_attention_split import paged_attention_decode_split

        found["split-KV"] = paged_attention_decode_split
    except ImportError as error:
        found["split-KV"] = f"not loaded: {error}"
    found["torch gather+SDPA"] = gather_sdpa_decode
    return found


def time_suite(copy_bandwidth: float, log: Log) -> dict[str, dict[str, dict]]:
    """Per shape and implementation: the time per call, GB/s, its share of `copy_bandwidth`,
    and whether the sampled rows matched the oracle (or the error that stopped it)."""
    results: dict[str, dict[str, dict]] = {}
    decoders = implementations(log)
    for name, shape in gpu_timing.SUITE.items():
        results[name] = {}
        for label, decode in decoders.items():
            results[name][label] = row = time_one(decode, shape, copy_bandwidth)
            shown = row.get("error") or (
                f"{row['median_us']:,.1f} us (events {row['event_us']:,.1f} us, "
                f"{row['calls']} calls a batch), {row['check']}"
            )
            log(f"  {name:<18} {label:<18} {shown}")
    return results


def time_one(
    decode: Callable[..., torch.Tensor] | str, shape: gpu_timing.Shape, copy_bandwidth: float
) -> dict[str, Any]:
    """One implementation on one shape; its failure is the row's `error`, never raised."""
    if isinstance(decode, str):
        return {"error": decode}
    try:
        timed, failure = time_batches(decode, shape), ""
    except Exception as error:  # report it and go on with the others
        failure = f"{type(error).__name__}: {str(error)[:300]}"
    torch.cuda.empty_cache()  # the batch's inputs and outputs, gone with the call
    if failure:
        return {"error": failure}
    calls = timed["calls"]
    median_ms = gpu_timing.per_call_ms(timed["batch_ms"], timed["empty_ms"], calls)
    moved = gpu_timing.bytes_moved(shape)
    sets = range(gpu_timing.input_sets(shape))
    kv_sets = [gpu_timing.make_kv(shape, index, DEVICE) for index in sets]  # rebuilt afresh
    errors = []
    for seed, checked, rows in timed["rows"]:
        expected = gpu_timing.reference_rows(
            shape, seed, calls, checked, rows.shape[1], paged_attention_decode_reference, kv_sets
        )
        errors.append(relative_error(rows.flatten(0, 1), expected.flatten(0, 1)))
    del kv_sets
    torch.cuda.empty_cache()
    error = max(errors, key=lambda value: math.inf if math.isnan(value) else value)
    tolerance = TOLERANCE[shape.torch_dtype]
    problems = [] if all(timed["finite"]) else ["NaN or Inf in an output"]
    if not error <= tolerance:
        problems.append(f"rows off by {error:.3g} (tolerance {tolerance:g})")
    events = gpu_timing.event_disagreement(timed["event_ms"], median_ms, calls)
    problems += [events] if events else []
    return {
        "median_us": median_ms * 1e3,
        "event_us": statistics.median(timed["event_ms"]) * 1e3,
        "calls": calls,
        "median_batch_ms": statistics.median(timed["batch_ms"]),
        "median_empty_ms": statistics.median(timed["empty_ms"]),
        "bytes": moved,
        "GBps": moved / median_ms / 1e6,
        "copy_share": moved / (median_ms / 1e3) / copy_bandwidth,
        "input_sets": gpu_timing.input_sets(shape),
        "relative_error": error,
        "check": "; ".join(problems) or "ok",
    }


def time_batches(decode: Callable[..., torch.Tensor], shape: gpu_timing.Shape) -> dict[str, Any]:
    """`decode` on `shape` as the grader times it, in this process: a calibration, then
    `ROUNDS` empty and timed batches of N calls on `time.perf_counter`. Per timed batch: the
    wall times, the events' time per call, whether its outputs were finite, and the rows of
    its first, middle and last calls (`(seed, calls checked, rows)`)."""
    batch = gpu_timing.Batch(decode, shape, DEVICE)
    seeds = itertools.count(SEED)

    def wall_ms(calls: int, kernel: bool) -> tuple[float, int, tuple]:
        seed = next(seeds)
        started = time.perf_counter()
        reply = batch.run(calls, seed, kernel)
        return (time.perf_counter() - started) * 1e3, seed, reply

    def net_ms(calls: int) -> float:
        return wall_ms(calls, True)[0] - wall_ms(calls, False)[0]

    estimate, _ = gpu_timing.calibrate(net_ms, gpu_timing.max_calls(shape))
    calls = gpu_timing.choose_calls(shape, estimate)
    checked = sorted({0, calls // 2, calls - 1})
    timed: dict[str, Any] = {"calls": calls, "batch_ms": [], "empty_ms": [], "event_ms": [],
                             "finite": [], "rows": []}  # fmt: skip
    for _ in range(ROUNDS):
        timed["empty_ms"].append(wall_ms(calls, False)[0])
        spent, seed, (event_ms, finite, rows) = wall_ms(calls, True)
        timed["batch_ms"].append(spent)
        timed["event_ms"].append(event_ms / calls)
        timed["finite"].append(bool(finite.all()))
        timed["rows"].append((seed, checked, rows[checked]))
    return timed


def table(results: dict[str, dict[str, dict]], copy_bandwidth: float) -> str:
    """The final table: one line per shape and implementation."""
    header = (
        f"{'shape':<18} {'implementation':<18} {'time (us)':>10} {'GB/s':>8} {'% copy':>7} "
        f"{'x key':>6}  check"
    )
    lines = [
        f"Paged-attention decode, 32/8 heads, head dim 128, bf16, block 16; per call, (median "
        f"timed - median empty batch) / N over {ROUNDS} rounds; copy bandwidth "
        f"{copy_bandwidth / 1e9:,.0f} GB/s",
        header,
        "-" * len(header),
    ]
    for name, rows in results.items():
        key_us = rows.get("answer key", {}).get("median_us")
        for label, row in rows.items():
            if "error" in row:
                lines.append(f"{name:<18} {label:<18} {'-':>10} {'-':>8} {'-':>7} {'-':>6}  "
                             f"{row['error']}")  # fmt: skip
                continue
            versus = f"{row['median_us'] / key_us:.2f}" if key_us else "-"
            lines.append(
                f"{name:<18} {label:<18} {row['median_us']:>10,.1f} {row['GBps']:>8,.0f} "
                f"{row['copy_share']:>6.0%} {versus:>6}  {row['check']}"
            )
    return "\n".join(lines)


def default_out() -> Path:
    return Path(os.environ["OUT"]) if os.environ.get("OUT") else Path("reports/gpu-check")


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(prog="python -m full_kit.gpu_check", description=__doc__.split(
        "\n")[0])  # fmt: skip
    cli.add_argument("--out", type=Path, help="folder for the logs, the JSON and the grade")
    cli.add_argument("--no-grade", action="store_true", help="skip the grader run (step 2)")
    args = cli.parse_args(argv)
    if not torch.cuda.is_available():
        print(
            "gpu_check needs a CUDA device; run it on a GPU machine (torch sees none here)",
            file=sys.stderr,
        )
        return 1
    out = args.out or default_out()
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu_check.log")
    started = time.monotonic()
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "rounds_per_shape": ROUNDS,
    }
    log(f"gpu-check on {report['device']} (torch {torch.__version__}), writing to {out}")
    passed = True
    if not args.no_grade:
        log("[1/4] can a sandboxed worker use CUDA?")
        report["preflight"] = probe_worker(log)
        limit_gb = report["preflight"]["memory_limit_gb"]
        if limit_gb is None:
            limit_gb, passed = PROBE_LIMITS_GB[0], False
            log("  no limit worked: the grade below runs with the default and will show why")
        log("[2/4] the kernel part's checks, natively (the answer key graded)")
        report["grade"] = summary = grade(out / "grade", limit_gb, log)
        passed &= summary["ok"]
        score = f"{summary.get('score')} / {summary.get('max_score')}" if "score" in summary else ""
        log(f"  kernel part: {score} {summary.get('error', '')} ({summary['seconds']} s)")
        for check, message in summary.get("messages", {}).items():
            log(f"  {summary['checks'][check]}: {check}: {message.splitlines()[0][:200]}")
    log("[3/4] copy bandwidth")
    copy_bandwidth = gpu_timing.copy_bandwidth("cuda")
    report["copy_bandwidth_GBps"] = copy_bandwidth / 1e9
    log(f"  {copy_bandwidth / 1e9:,.0f} GB/s (read + write, best of {gpu_timing.COPY_REPEATS})")
    log(f"[4/4] the timing suite, {ROUNDS} rounds per shape and implementation")
    report["timing"] = results = time_suite(copy_bandwidth, log)
    passed &= all(row.get("check") == "ok" for rows in results.values() for row in rows.values())
    report["seconds"] = round(time.monotonic() - started, 1)
    report["passed"] = passed
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
    log(f"done in {report['seconds']} s: {'all passed' if passed else 'SOMETHING FAILED'}")
    shown = table(results, copy_bandwidth)
    log.file.write(shown + "\n")
    log.file.close()
    print(shown, flush=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
