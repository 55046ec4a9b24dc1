"""The integration check: the candidate's parts serving a trace with a tiny transformer.

`grader/sandbox/tools/engine.py` runs in a sandboxed worker on the candidate's `kv_cache_manager`,
`scheduler` and `paged_attention` modules (`Submission.tool`) and sends back every request's
greedy tokens with its figures. The verdict is this process's own: it decodes each request
alone with dense attention (the kit's model, on the CPU, no candidate code) and compares, so
patching the comparison inside the worker changes nothing. The worker's figures are the
candidate's process's word, and its tokens could be forged by running the kit's public model:
that is one reason the check is reported in its own section and never scored (exercises/README.md's
six parts hold the points).
"""

import importlib.util
import time
from dataclasses import replace
from typing import Any

from grader.sandbox.isolation import Isolation
from grader.sandbox.process import Limits, NotImplementedInSubmission, Sandbox, SubmissionFailure
from grader.sandbox.proxy import RemoteError, Submission
from grader.sandbox.tools import engine

MODULES = ("kv_cache_manager", "scheduler", "paged_attention")
TRACE = "check"
CALL_SECONDS = 300.0  # the whole trace is one call; ~10 s under Triton's interpreter
TRACEBACK_CHARS = 1500
REQUIRED_FIGURES = {"requests", "tokens", "steps", "preemptions", "generated"}


def run_integration(
    files: dict[str, bytes],
    limits: Limits,
    worker_env: dict[str, str],
    isolation: Isolation | None = None,
) -> dict:
    """`{"status": "passed" | "failed" | "skipped", "message": str, "figures": {...}}`."""
    missing = [f"{name}.py" for name in MODULES if f"{name}.py" not in files]
    if missing:
        return outcome("skipped", f"needs {', '.join(missing)}, which the submission lacks")
    if importlib.util.find_spec("triton") is None:
        return outcome("skipped", "needs Triton for paged_attention.py; it installs on Linux only")
    limits = replace(limits, call_seconds=max(limits.call_seconds, CALL_SECONDS))
    deadline = time.monotonic() + limits.part_seconds
    sandbox = Sandbox(files, limits, worker_env, deadline, isolation)
    try:
        figures = Submission(sandbox, "submission").tool("engine", "serve", TRACE, modules=MODULES)
    except NotImplementedInSubmission as failure:
        return outcome("failed", f"{failure.label}: {failure} (a part it needs is still a stub)")
    except SubmissionFailure as failure:
        return outcome("failed", f"{failure.label}: {failure}")
    except RemoteError as error:
        if error.type_name == "EngineError":  # the engine's own check: its frames say nothing
            return outcome("failed", f"the engine stopped: {error.message}")
        return outcome("failed", f"serving the trace raised {error}\n{traceback_tail(error)}")
    finally:
        sandbox.close()
    try:
        verdict = verify(TRACE, figures)
    except engine.EngineError as error:
        return outcome("failed", str(error))
    # The tokens served their purpose; of the worker's own figures, numbers and short texts.
    figures = {key: value for key, value in figures.items() if is_figure(value)} | verdict
    summary = (
        f"{figures['requests']} requests, {figures['tokens']} tokens in {figures['steps']} "
        f"steps, {figures['preemptions']} preemption(s)"
    )
    if figures["mismatches"] == 0:
        excused = f", {figures['near_ties']} near-tie(s) excused" if figures["near_ties"] else ""
        return outcome(
            "passed",
            f"{summary}: every request got the tokens it gets decoded alone{excused}",
            figures | {"passed": True},
        )
    return outcome(
        "failed",
        f"{summary}: {figures['mismatches']} token(s) differ from decoding each request alone "
        f"with dense attention; the first at {engine.describe_mismatch(figures['first_mismatch'])}",
        figures | {"passed": False},
    )


def verify(trace_name: str, figures: Any) -> dict[str, Any]:
    """`engine.compare` of the tokens the worker reported for `TRACES[trace_name]`, run here."""
    trace, config = engine.TRACES[trace_name], engine.ModelConfig()
    if not isinstance(figures, dict) or not figures.keys() >= REQUIRED_FIGURES:
        raise engine.EngineError(f"the engine's report lacks some of {sorted(REQUIRED_FIGURES)}")
    generated = figures["generated"] if isinstance(figures["generated"], list) else []
    lengths = [len(tokens) if isinstance(tokens, list) else None for tokens in generated]
    if lengths != [n for _, _, n in trace.requests] or not all(
        type(token) is int and 0 <= token < config.vocab_size
        for tokens in generated
        for token in tokens
    ):
        raise engine.EngineError(
            "the engine's report does not hold max_new_tokens valid tokens for each request"
        )
    model = engine.TinyTransformer(config, "cpu")
    return engine.compare(model, engine.prompts_of(trace, config.vocab_size), generated)


def is_figure(value: Any) -> bool:
    """A number or a short text: what a report shows of the worker's figures."""
    return type(value) in (int, float, bool) or (type(value) is str and len(value) <= 200)


def outcome(status: str, message: str, figures: dict[str, Any] | None = None) -> dict:
    return {"status": status, "message": message, "figures": figures or {}}


def traceback_tail(error: RemoteError) -> str:
    """The end of the worker's traceback: where in the candidate's code (or the engine) it broke."""
    return error.traceback[-TRACEBACK_CHARS:].strip()
