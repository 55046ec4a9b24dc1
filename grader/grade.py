"""One grading run: read the submission, run the checks in-process, score, write the reports.

The candidate's code runs only in the workers the checks start (`grader/sandbox/`), each in
namespaces of its own where the system allows (the report's `isolation` says how they ran); this
process imports none of it and builds the report from what its own checks concluded, after every
worker is gone. Whatever happens half-way, a report is written, with the failure as a visible error.
"""

import contextlib
import functools
import hashlib
import importlib.util
import io
import os
import platform
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import hypothesis
import pytest
import torch

from grader import reports, scan
from grader.batching import static_batching
from grader.intake import Intake
from grader.integration import run_integration
from grader.plugin import CHECKS_DIR, CheckResult, GradingPlugin
from grader.profiles import Profile
from grader.rubric import PARTS, Rubric
from grader.sandbox.isolation import Isolation
from grader.sandbox.process import NO_CUDA, Limits
from grader.timing import IMPLAUSIBLE_SPEEDUP

KIT_ROOT = Path(__file__).resolve().parent.parent
ANSWER_KEY = KIT_ROOT / "solutions"
# The engine check (`integration.py`) serves a trace through these parts' files together.
ENGINE_PARTS = {"decode", "gather", "kernel", "scheduler"}


@dataclass(frozen=True)
class Options:
    """What the command line chose."""

    parts: tuple[str, ...]
    profile: Profile
    seed: int | None
    limits: Limits
    rubric: Rubric
    out: Path
    isolation: Isolation
    lang: str = "en"  # of the candidate-facing text: "en" or "zh"
    live: bool = False


def answer_key_files() -> dict[str, bytes] | None:
    """The kit's reference solution, for the timing checks; absent from the candidate bundle."""
    if not ANSWER_KEY.is_dir():
        return None
    return {path.name: path.read_bytes() for path in ANSWER_KEY.glob("*.py")}


def worker_environment(part: str | None = None) -> dict[str, str]:
    """Where a worker runs Triton: natively on CUDA, else under the interpreter on CPU. Only the
    kernel part and the engine check (`part` None) see the GPU; the other parts run on the CPU,
    under the address-space limit (`sandbox.memory_rlimit`)."""
    if not torch.cuda.is_available():
        return {"TRITON_INTERPRET": "1"}
    return {} if part in ("kernel", None) else NO_CUDA


def run_checks(intake: Intake, options: Options) -> GradingPlugin:
    """Run the check modules of the chosen parts in this process, with the grading plugin."""
    plugin = GradingPlugin(
        files=intake.files,
        package=intake.name if intake.name.isidentifier() else "submission",
        reference_files=answer_key_files(),
        grading_profile=options.profile,
        seeded=options.seed is not None,
        limits=options.limits,
        worker_env={part: worker_environment(part) for part in options.parts},
        isolation=options.isolation,
        point_overrides=options.rubric.points,
        live=options.live,
    )
    modules = [
        str(path) for part in options.parts for path in sorted(CHECKS_DIR.glob(f"check_{part}*.py"))
    ]
    args = [
        *modules,
        "-c", str(CHECKS_DIR / "pytest.ini"),
        "--rootdir", str(CHECKS_DIR),
        "-q",
        "--assert=plain",
    ]  # fmt: skip
    if options.seed is not None:
        args.append(f"--hypothesis-seed={mixed_seed(options.seed)}")
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        status = pytest.main(args, plugins=[plugin])
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(f"pytest could not run the checks ({status!r}):\n{log.getvalue()}")
    return plugin


def mixed_seed(seed: int) -> int:
    """A private seed, hashed so that nearby seeds give unrelated example sets."""
    return int.from_bytes(hashlib.sha256(f"paged-attention-kit:{seed}".encode()).digest()[:8])


def score_parts(
    results: list[CheckResult], options: Options, notes: dict[str, str] | None = None
) -> dict[str, dict]:
    """Each part's score: its weight times the share of its check points that passed; `notes`
    says what a part was scored with, where that is not simply the candidate's files.

    Skipped checks (a timing without a CUDA device or without the answer key) are left out of
    the part's maximum, and the part's score is marked provisional.
    """
    parts, notes = {}, notes or {}
    for part in options.parts:
        checks = [result for result in results if result.part == part]
        counted = [check for check in checks if check.status != "skipped"]
        weight = options.rubric.weights[part]
        total = sum(check.max_points for check in counted)
        scale = weight / total if total else 0.0
        rows = []
        for check in checks:
            row = asdict(check)
            row["points"] = round(check.points * scale, 2)
            row["max_points"] = round(check.max_points * scale, 2) if check in counted else 0.0
            rows.append(row)
        parts[part] = {
            "title": PARTS[part],
            "score": round(sum(check.points for check in counted) * scale, 2),
            "max_score": float(weight) if total else 0.0,
            "seconds": round(sum(check.seconds for check in checks), 2),
            "checks": rows,
        }
        skipped = sorted({check.message for check in checks if check.status == "skipped"})
        if not checks:
            parts[part]["note"] = "not graded by this version of the kit"
        else:
            if part in notes:
                parts[part]["note"] = notes[part]
            if skipped:
                parts[part]["provisional"] = f"provisional: checks skipped ({'; '.join(skipped)})"
    return parts


def with_baselines(sections: dict[str, dict]) -> dict[str, dict]:
    """The checks' report sections, the scheduling run beside static batching on its trace."""
    scheduling = sections.get("scheduling")
    if scheduling is not None:
        trace = [tuple(arrival) for arrival in scheduling["trace"]]
        seats = (scheduling["num_blocks"], scheduling["block_size"], scheduling["max_num_seqs"])
        static = static_batching(trace, *seats)
        scheduling["static_tokens_per_step"] = [len(step.scheduled) for step in static]
    return sections


@functools.cache
def simulation() -> dict:
    """`make simulate`'s headline, table and plots (as data), the same for every report (the
    full kit only: the candidate bundle leaves the simulator out)."""
    from grader import simulate

    figures = simulate.simulate()
    return {
        "headline": simulate.headline(figures),
        "rows": simulate.rows(figures),
        "charts": list(simulate.chart_specs(figures).values()),
    }


def environment(options: Options) -> dict:
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "triton": triton_version,
        "hypothesis": hypothesis.__version__,
        "pytest": pytest.__version__,
        "profile": options.profile.name,
        "seed": options.seed,
        "parts": list(options.parts),
    }


def isolation_flags(isolation: Isolation) -> list[dict]:
    """An unisolated grading's flag, first in the report: its scores are no evidence."""
    if isolation.isolated:
        return []
    return [{"source": "isolation", "message": isolation.describe()}]


def grade(intake: Intake, options: Options) -> dict:
    """Grade `intake`; returns the report, already written to `options.out`."""
    started = time.time()
    report = {
        "score": 0.0,
        "max_score": 0.0,
        "language": options.lang,
        "parts": {},
        "benchmarks": [],
        "isolation": options.isolation.as_report(),
        "integrity": isolation_flags(options.isolation) + scan.scan_files(intake.files),
        "ignored_files": intake.ignored,
        "errors": [],
        "environment": environment(options),
        "submission": {"name": intake.name, "path": intake.path, "files": intake.sha256()},
    }
    try:
        plugin = run_checks(intake, options)
        report["parts"] = score_parts(list(plugin.results.values()), options, plugin.part_notes)
        report["benchmarks"] = plugin.benchmarks
        report["sections"] = with_baselines(plugin.sections)
        report["integrity"] += [
            {"part": part, "source": "worker", "message": event}
            for part, events in plugin.events.items()
            for event in dict.fromkeys(events)
        ]
        report["integrity"] += [
            {
                "part": bench["part"],
                "source": "timing",
                "message": f"implausibly fast: {bench['name']}",
            }
            for bench in plugin.benchmarks
            if bench["ratio"] * IMPLAUSIBLE_SPEEDUP < 1
        ]
    except Exception:
        report["errors"].append(f"the grader failed: {traceback.format_exc()}")
        report["parts"] = score_parts([], options)
    if "scheduler" in options.parts and importlib.util.find_spec("grader.simulate"):
        try:
            report["simulation"] = simulation()
        except Exception:
            report["errors"].append(f"the simulation failed: {traceback.format_exc()}")
    if set(options.parts) >= ENGINE_PARTS:
        print("  engine check (a tiny transformer served by your parts, not scored)...",
              file=sys.stderr, flush=True)  # fmt: skip
        try:
            report["integration"] = run_integration(
                intake.files, options.limits, worker_environment(), options.isolation
            )
        except Exception:
            report["errors"].append(f"the engine check failed: {traceback.format_exc()}")
    report["score"] = round(sum(part["score"] for part in report["parts"].values()), 2)
    report["max_score"] = round(sum(part["max_score"] for part in report["parts"].values()), 2)
    report["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started))
    report["seconds"] = round(time.time() - started, 1)
    reports.write_all(report, options.out)
    return report
