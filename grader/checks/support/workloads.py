"""The timing checks' counterexamples: the worker's timed workload, run by the candidate; and the
same workload run from the grading process (`called_here`).

A timing check calls a workload that runs in the worker (`workloads.WORKLOADS`); its counterexample
defines the same function (its source read from `grader/sandbox/workloads.py`, never imported), and
the check's own plain functions that draw what a call asks for and judge its evidence, builds the
same objects, and ends in what the check found: the workload's result against what it must be, or
its least CPU time (`time.process_time`, like the grader's CPU time of the worker) against the
limit times the reference's time measured in the grading. Timings differ from machine to machine:
run on the machine that graded, the counterexample fails as the check did.
"""

import ast
import functools
from pathlib import Path
from typing import Any

from grader.said import said
from grader.sandbox.proxy import Remote
from grader.sandbox.transcript import Transcript
from grader.sandbox.workloads import WORKLOADS

CALLS_BEFORE = said("the calls before, in the grading")  # a replay's loop over the earlier calls

WORKER_WORKLOADS = Path(__file__).resolve().parents[2] / "sandbox" / "workloads.py"
REPEATS = 5  # the counterexample keeps a workload's least CPU time over this many runs
LEAST_SECONDS = (
    "def least_seconds(work):",
    "    times = []",
    f"    for _ in range({REPEATS}):",
    "        start = time.process_time()",
    "        work()",
    "        times.append(time.process_time() - start)",
    "    return min(times)",
    "",
)


def called_here(name: str, target: Remote, *args: Any) -> Any:
    """The worker's workload `name` run in this process on `target`, an object in the worker:
    each call of the candidate's methods a round trip, none timed. What the candidate's own
    code gives, whatever the worker does with its workloads (`Timed.again`, which keeps these
    calls out of the counterexample written by then: `Transcript.aside`)."""
    return WORKLOADS[name](target, *args)


class PlainMessages(ast.NodeTransformer):
    """`said(template, **parts)` as `template.format(**parts)`: the English message, in a script
    that has no `said`."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "said":
            template, *_ = node.args
            return ast.Call(ast.Attribute(template, "format", ast.Load()), [], node.keywords)
        return node


@functools.cache
def function_source(name: str, module: Path = WORKER_WORKLOADS) -> tuple[str, ...]:
    """The function `name` of `module` (the worker's by default) as plain lines, then a blank
    one (the REPL's end of a definition): without its docstring and annotations, which need the
    module's imports or hold blank lines, and its messages plain (`PlainMessages`). Made once
    per grading process: a timing check asks for the same ones for each pool it makes."""
    tree = ast.parse(module.read_text())
    function = next(
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name
    )
    body = [PlainMessages().visit(statement) for statement in function.body]
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    arguments = [ast.arg(arg.arg) for arg in function.args.args]
    plain = ast.FunctionDef(
        name=name,
        args=ast.arguments(
            posonlyargs=[], args=arguments, kwonlyargs=[], kw_defaults=[], defaults=[]
        ),
        body=body,
        decorator_list=[],
        returns=None,
        type_params=[],
    )
    return (*ast.unparse(ast.fix_missing_locations(plain)).splitlines(), "")


def replay(
    transcript: Transcript, imports: dict[str, set[str]], definitions: list[str], setup: list[str]
) -> None:
    """The transcript becomes a script of its own: the candidate's `imports` (by module),
    `definitions` (functions, each ending in a blank line) and the `setup` statements; the
    check then ends it (`Transcript.fail`). The calls the check made are left out: they ran
    in the worker, through its workload."""
    transcript.reset()
    for module, names in imports.items():
        transcript.imports.setdefault(module, set()).update(names)
    for line in [*definitions, *setup]:
        transcript.define(line)


def ends_in_the_time(transcript: Transcript, seconds: str, limit: float, reference: float) -> None:
    """The script ends in `seconds` (code: the workload's least CPU time, or a ratio of two)
    against `limit` times `reference` (the reference's, measured in the grading); `definitions`
    held `LEAST_SECONDS`."""
    transcript.needs("import time")
    transcript.fail(seconds, f"{limit} * {reference:.3g}", "<=")
