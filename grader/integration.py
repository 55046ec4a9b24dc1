"""The integration checks: the candidate's parts serving a trace with a tiny transformer.

`grader/sandbox/tools/engine.py` runs in a sandboxed worker on the candidate's `kv_cache_manager`,
`scheduler` and `paged_attention` modules (`Submission.tool`) and sends back every request's
greedy tokens with its figures. The verdict is this process's own: it decodes each request
alone with dense attention (the kit's model, on the CPU, no candidate code) and compares, so
patching the comparison inside the worker changes nothing. The worker's figures are the
candidate's process's word, and its tokens could be forged by running the kit's public model:
that is one reason the check is reported in its own section and never scored (exercises/README.md's
parts hold the points).

The prefix-caching check (`run_prefix_integration`, part 7) is built the same way on
`grader/sandbox/tools/prefix_engine.py`, which serves prompts sharing prefixes over the
candidate's `prefix_cache` alone and computes only the prompt tokens its cache says are not
cached. Its verdict here checks every token the engine chose, at each position it computed,
against dense decoding, and counts the prompt tokens computed against those served: it fails on
a token that differs, or where the cache held nothing although the prompts share prefixes.
"""

import importlib.util
import math
import time
from dataclasses import replace
from typing import Any

from grader.said import Said, message_of, said
from grader.sandbox.isolation import Isolation
from grader.sandbox.process import (
    Limits,
    NotImplementedInSubmission,
    Sandbox,
    Stoppable,
    SubmissionFailure,
    described,
)
from grader.sandbox.proxy import RemoteError, Submission
from grader.sandbox.tools import engine, prefix_engine
from grader.sandbox.zygotes import Zygotes

MODULES = ("kv_cache_manager", "scheduler", "paged_attention")
TRACE = "check"
CALL_SECONDS = 300.0  # the whole trace is one call; ~3 s under Triton's interpreter
TRACEBACK_CHARS = 1500
REQUIRED_FIGURES = {"requests", "tokens", "steps", "preemptions", "generated"}
PREFIX_MODULE = "prefix_cache"  # part 7's, served alone
PREFIX_REQUIRED = {"cached", "predicted", "generated"}


def run_integration(
    files: dict[str, bytes],
    limits: Limits,
    worker_env: dict[str, str],
    isolation: Isolation | None = None,
    sandboxes: Stoppable | None = None,
    submission_deadline: float = math.inf,
    zygotes: Zygotes | None = None,
) -> dict:
    """`{"status": "passed" | "failed" | "skipped", "message": str, "figures": {...}}`. Its
    worker joins `sandboxes`, where another thread may stop it."""
    missing = [f"{name}.py" for name in MODULES if f"{name}.py" not in files]
    if missing:
        return outcome(
            "skipped", said("needs {files}, which the submission lacks", files=", ".join(missing))
        )
    if importlib.util.find_spec("triton") is None:
        return outcome(
            "skipped", said("needs Triton for paged_attention.py; it installs on Linux only")
        )
    figures, failure = served(
        files, limits, worker_env, isolation, "engine", MODULES, sandboxes, submission_deadline,
        zygotes,
    )  # fmt: skip
    if failure:
        return failure
    try:
        verdict = verify(TRACE, figures)
    except engine.EngineError as error:
        return outcome("failed", message_of(error))
    # The tokens served their purpose; of the worker's own figures, numbers and short texts.
    figures = {key: value for key, value in figures.items() if is_figure(value)} | verdict
    summary = said(
        "{requests} requests, {tokens} tokens in {steps} steps, {preemptions} preemption(s)",
        requests=figures["requests"],
        tokens=figures["tokens"],
        steps=figures["steps"],
        preemptions=figures["preemptions"],
    )
    if figures["mismatches"] == 0:
        excused = (
            said(", {count} near-tie(s) excused", count=figures["near_ties"])
            if figures["near_ties"]
            else ""
        )
        return outcome(
            "passed",
            said(
                "{summary}: every request got the tokens it gets decoded alone{excused}",
                summary=summary,
                excused=excused,
            ),
            figures | {"passed": True},
        )
    return outcome(
        "failed",
        said(
            "{summary}: {count} token(s) differ from decoding each request alone with "
            "dense attention; the first at {where}",
            summary=summary,
            count=figures["mismatches"],
            where=mismatch_at(figures["first_mismatch"]),
        ),
        figures | {"passed": False},
    )


def served(
    files: dict[str, bytes],
    limits: Limits,
    worker_env: dict[str, str],
    isolation: Isolation | None,
    tool: str,
    modules: tuple[str, ...],
    sandboxes: Stoppable | None = None,
    submission_deadline: float = math.inf,
    zygotes: Zygotes | None = None,
) -> tuple[Any, dict | None]:
    """`tool.serve(*modules, TRACE)` in a sandboxed worker on `files` (added to `sandboxes`;
    forked from one of `zygotes` where it can be), within the submission's budget too: (its
    figures, None), or (None, the failed outcome) where the candidate's code failed or the engine
    stopped."""
    limits = replace(limits, call_seconds=max(limits.call_seconds, CALL_SECONDS))
    deadline = time.monotonic() + limits.part_seconds
    sandbox = Sandbox(
        files, limits, worker_env, deadline, isolation, zygotes=zygotes, runs_tool=True
    )
    sandbox.submission_deadline = submission_deadline
    if sandboxes is not None:
        sandboxes.add(sandbox)
    try:
        return Submission(sandbox, "submission").tool(tool, "serve", TRACE, modules=modules), None
    except NotImplementedInSubmission as failure:
        stub = said("{failure} (a part it needs is still a stub)", failure=described(failure))
        return None, outcome("failed", stub)
    except SubmissionFailure as failure:
        return None, outcome("failed", described(failure))
    except RemoteError as error:
        if error.type_name == "EngineError":  # the engine's own check: its frames say nothing
            return None, outcome(
                "failed", said("the engine stopped: {reason}", reason=error.message)
            )
        raised = f"{error}\n{traceback_tail(error)}"
        return None, outcome("failed", said("serving the trace raised {error}", error=raised))
    finally:
        sandbox.close()


def verify(trace_name: str, figures: Any) -> dict[str, Any]:
    """`engine.compare` of the tokens the worker reported for `TRACES[trace_name]`, run here."""
    trace, config = engine.TRACES[trace_name], engine.ModelConfig()
    if not isinstance(figures, dict) or not figures.keys() >= REQUIRED_FIGURES:
        raise engine.stop("the engine's report lacks some of {keys}", keys=sorted(REQUIRED_FIGURES))
    generated = figures["generated"] if isinstance(figures["generated"], list) else []
    lengths = [len(tokens) if isinstance(tokens, list) else None for tokens in generated]
    if lengths != [n for _, _, n in trace.requests] or not all(
        type(token) is int and 0 <= token < config.vocab_size
        for tokens in generated
        for token in tokens
    ):
        raise engine.stop(
            "the engine's report does not hold max_new_tokens valid tokens for each request"
        )
    model = engine.TinyTransformer(config, "cpu")
    return engine.compare(model, engine.prompts_of(trace, config.vocab_size), generated)


def run_prefix_integration(
    files: dict[str, bytes],
    limits: Limits,
    worker_env: dict[str, str],
    isolation: Isolation | None = None,
    sandboxes: Stoppable | None = None,
    submission_deadline: float = math.inf,
    zygotes: Zygotes | None = None,
) -> dict:
    """The prefix-caching check (part 7), as `run_integration`'s outcome: the candidate's
    `prefix_cache.py` alone in the worker (added to `sandboxes`), the verdict here
    (`verify_prefix`)."""
    name = f"{PREFIX_MODULE}.py"
    if name not in files:
        return outcome("skipped", said("needs {files}, which the submission lacks", files=name))
    alone = {name: files[name]}
    figures, failure = served(
        alone,
        limits,
        worker_env,
        isolation,
        "prefix_engine",
        (PREFIX_MODULE,),
        sandboxes,
        submission_deadline,
        zygotes,
    )
    if failure:
        return failure
    try:
        verdict = verify_prefix(TRACE, figures)
    except engine.EngineError as error:
        return outcome("failed", message_of(error))
    figures = {key: value for key, value in figures.items() if is_figure(value)} | verdict
    summary = said(
        "{requests} requests sharing prefixes, {tokens} tokens generated; {computed} "
        "of their {total} prompt tokens computed, the others read from cached blocks",
        requests=verdict["requests"],
        tokens=verdict["tokens"],
        computed=verdict["prompt_tokens_computed"],
        total=verdict["prompt_tokens"],
    )
    if verdict["mismatches"]:
        return outcome(
            "failed",
            said(
                "{summary}: {count} of the {checked} tokens the engine chose differ from "
                "decoding each request alone with dense attention; the first at {where}",
                summary=summary,
                count=verdict["mismatches"],
                checked=verdict["positions_checked"],
                where=prefix_mismatch_at(verdict["first_mismatch"]),
            ),
            figures | {"passed": False},
        )
    if verdict["prompt_tokens_computed"] == verdict["prompt_tokens"]:
        return outcome(
            "failed",
            said(
                "{summary}: the cache held none of them, though the prompts share prefixes",
                summary=summary,
            ),
            figures | {"passed": False},
        )
    excused = (
        said(", {count} near-tie(s) excused", count=verdict["near_ties"])
        if verdict["near_ties"]
        else ""
    )
    return outcome(
        "passed",
        said(
            "{summary}: each of the {checked} tokens the engine chose is the one dense "
            "decoding of its request alone gives{excused}",
            summary=summary,
            checked=verdict["positions_checked"],
            excused=excused,
        ),
        figures | {"passed": True},
    )


def verify_prefix(trace_name: str, figures: Any) -> dict[str, Any]:
    """`prefix_engine.compare` of what the worker reported for `prefix_engine.TRACES[trace_name]`,
    run here on the prompts rebuilt from the trace and the reported tokens, with the prompt
    tokens served and computed counted here."""
    trace, config = prefix_engine.TRACES[trace_name], prefix_engine.MODEL
    if not isinstance(figures, dict) or not figures.keys() >= PREFIX_REQUIRED:
        raise engine.stop("the engine's report lacks some of {keys}", keys=sorted(PREFIX_REQUIRED))
    generated, cached, predicted = (
        figures[key] if isinstance(figures[key], list) else []
        for key in ("generated", "cached", "predicted")
    )
    if lengths(generated) != [n for _, _, n in trace.requests] or not valid(generated, config):
        raise engine.stop(
            "the engine's report does not hold max_new_tokens valid tokens for each request"
        )
    prompts = prefix_engine.prompts_of(trace, generated, config.vocab_size)
    if len(cached) != len(prompts) or not all(
        type(count) is int and 0 <= count < len(prompt) and count % trace.block_size == 0
        for count, prompt in zip(cached, prompts, strict=False)
    ):
        raise engine.stop(
            "the engine's report does not hold, for each request, a number of cached "
            "prompt tokens that is a multiple of the block size below its prompt's "
            "length"
        )
    computed = [len(prompt) - count - 1 for prompt, count in zip(prompts, cached, strict=True)]
    if lengths(predicted) != computed or not valid(predicted, config):
        raise engine.stop(
            "the engine's report does not hold a valid token for each prompt position it computed"
        )
    model = engine.TinyTransformer(config, "cpu")
    served_tokens = sum(map(len, prompts))
    return {
        "requests": len(trace.requests),
        "tokens": sum(n for _, _, n in trace.requests),
        "prompt_tokens": served_tokens,
        "prompt_tokens_computed": served_tokens - sum(cached),
    } | prefix_engine.compare(model, prompts, cached, predicted, generated)


def lengths(lists: list) -> list[int | None]:
    return [len(each) if isinstance(each, list) else None for each in lists]


def valid(lists: list[list], config: engine.ModelConfig) -> bool:
    """Whether every item of every list is a token of the model's vocabulary."""
    return all(
        type(token) is int and 0 <= token < config.vocab_size for each in lists for token in each
    )


def is_figure(value: Any) -> bool:
    """A number or a short text: what a report shows of the worker's figures."""
    return type(value) in (int, float, bool) or (type(value) is str and len(value) <= 200)


def outcome(status: str, message: str, figures: dict[str, Any] | None = None) -> dict:
    return {"status": status, "message": message, "figures": figures or {}}


def traceback_tail(error: RemoteError) -> str:
    """The end of the worker's traceback: where in the candidate's code (or the engine) it broke."""
    return error.traceback[-TRACEBACK_CHARS:].strip()


def mismatch_at(first: dict[str, Any]) -> Said:
    """Where the engine's first token that differs from dense decoding is, and both tokens."""
    return said(
        "request {id}, generated token {index} (position {position}): dense decoding "
        "gives {expected}, the engine {got} (dense top-2 margin {margin})",
        id=first["request"],
        index=first["token_index"],
        position=first["position"],
        expected=first["expected"],
        got=first["got"],
        margin=first["margin"],
    )


def prefix_mismatch_at(first: dict[str, Any]) -> Said:
    """`mismatch_at` of the prefix-caching engine: the token after a prompt position."""
    return said(
        "request {id}, the token after position {position} (of {length} prompt "
        "tokens): dense decoding gives {expected}, the engine {got} (dense top-2 "
        "margin {margin})",
        id=first["request"],
        position=first["position"],
        length=first["prompt_tokens"],
        expected=first["expected"],
        got=first["got"],
        margin=first["margin"],
    )
