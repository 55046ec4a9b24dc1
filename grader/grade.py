"""One grading run: read the submission, run the checks in-process, score, write the reports.

The candidate's code runs only in the workers the checks start (`grader/sandbox/`), each in
namespaces of its own where the system allows (the report's `isolation` says how they ran),
forked from zygotes where they can be (the grading's, or those it borrows from the process that
forked it: `zygotes.py`); this process imports none of it and builds the report from what its
own checks concluded, after every worker is gone. The parts are split between this process and
a second, forked from it, that sends back what its checks concluded (`beside.py`,
`fork_beside`); the engine checks, each one long call in a worker of its own, run in threads
beside the parts. The whole grading has a time budget (the profile's, or
`--submission-timeout`): once it is spent, every call fails as timed out, so a report comes in
bounded time whatever the submission does. Whatever happens half-way, a report is made, with
the failure as a visible error (Ctrl-C aside: `interrupt.py`).

A bug costs points in its own part: where the candidate's allocator fails part 1, the parts that
reach it through the manager and lost points there are graded again with the kit's allocator, and
each keeps its better grading (`run_checks`; the report's `rescored` gives both scores, the part's
note says so). A check that fails on a rule another part owns is not graded where a check of
that part fails on the same rule (`leave_to_the_owners`).
"""

import contextlib
import functools
import hashlib
import io
import json
import keyword
import math
import os
import platform
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from itertools import compress, product
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import torch

from grader import ANSWER_KEY, KIT_ROOT, file_rule, interrupt, kernel_rule, provenance, scan
from grader.beside import EXIT_SECONDS, Beside, LineStream
from grader.checks.support.rules import CHECKS as RULE_CHECKS
from grader.checks.support.rules import HARMS, TIMED_RESULTS, owner
from grader.intake import Intake
from grader.integration import run_integration, run_prefix_integration
from grader.parts import ENGINE_PARTS, PARTS
from grader.said import recorded, said
from grader.sandbox import cuda, seccomp
from grader.sandbox.isolation import Isolation
from grader.sandbox.process import (
    DID_NOT_RETURN,
    INTERPRETED,
    NO_CUDA,
    Events,
    ImportFailed,
    Limits,
    Stoppable,
    may_not_fork,
    uses_cuda,
)
from grader.sandbox.zygotes import SIDES, Zygotes, grading_sides
from grader.scoring.batching import static_batching
from grader.scoring.plugin import CHECKS_DIR, CheckResult, GradingPlugin, check_names
from grader.scoring.profiles import Profile
from grader.scoring.progress import step_line
from grader.scoring.raised import code_marks
from grader.scoring.rubric import Rubric
from grader.scoring.timing import implausible
from grader.severity import SEVERITIES
from grader.similarity import known
from grader.ungraded import SETTLED, reason_of

STUBS = KIT_ROOT / "exercises"
# `full_kit.simulate.REPORT_FIGURES`, named here: the candidate kit has no `full_kit` to import.
REPORT_FIGURES = KIT_ROOT / "full_kit" / "report_figures.json"
SHADOWED = frozenset({"torch", "triton", "numpy", "kernels"})  # imported by the files or a script
# A part's `regraded` check modules (`parts.toml`) reach the candidate's allocator through its
# manager: they are graded again with the kit's allocator when the candidate's fails part 1 and
# they lost points (`rescore_on_the_kit_allocator`). The part's other modules grade the
# candidate's own code alone (the allocator's reference counts in `sharing_refcounts.py`) and are
# not graded again.
# Part 3's checks build their requests from plain data: its allocator never matters.
ALLOCATOR = "allocator"  # the part whose failure triggers the second grading
(KIT_ALLOCATOR,) = PARTS[ALLOCATOR].files  # its one file, the answer key's in the second grading
ALLOCATOR_RULES = PARTS[ALLOCATOR].checks[0]  # its rules, its timings apart: what triggers it

OWN_ALLOCATOR_NOTE = said(
    "scored with your own {file}, which fails allocator checks: the full kit also "
    "grades this part with its reference one and keeps the better score",
    file=KIT_ALLOCATOR,
)
CACHING = "caching"  # the part whose grading runs the prefix-caching engine check


@dataclass(frozen=True)
class Options:
    """What the command line chose."""

    parts: tuple[str, ...]
    profile: Profile
    seed: int | None
    limits: Limits
    rubric: Rubric
    isolation: Isolation
    lang: str = "en"  # of the candidate-facing text: "en" or "zh"
    live: bool = False
    deadline: float = math.inf  # when the grading's budget is spent (monotonic; `grade` sets it)


def runnable(files: dict[str, bytes]) -> dict[str, bytes]:
    """`files` as the workers get them: each that runs code it decodes at run time
    (`scan.decoded_code`), a kernel file that breaks the kernel rule (`kernel_rule`), and each
    that breaks the file rule (`file_rule`), replaced by a module that only raises, saying why,
    so that it never runs and every check that imports it, itself or through another file, fails
    on it. Computed once for a grading's files (`runnable_items`), which its plugins and engine
    checks ask for, in this process and in the one it forks."""
    return dict(runnable_items(tuple(files.items())))


@functools.lru_cache(maxsize=2)  # a grading's files, and those graded on the kit's allocator
def runnable_items(items: tuple[tuple[str, bytes], ...]) -> tuple[tuple[str, bytes], ...]:
    """`runnable` of the files `items` holds, as (name, content) pairs."""
    files = dict(items)
    reasons = scan.decoded_code(files)
    kernel = scan.KERNEL_FILE
    if (
        kernel in files
        and kernel not in reasons
        and (broken := kernel_rule.first_break(files[kernel]))
    ):
        reasons[kernel] = broken
    reasons = file_rule.breaks(files) | reasons
    replaced = {
        name: f"raise ImportError({f'{name} is not run: {reason}'!r})\n".encode()
        for name, reason in reasons.items()
    }
    return tuple((files | replaced).items())


def answer_key_files() -> dict[str, bytes] | None:
    """The kit's reference solution, for the timing checks; absent from the candidate bundle."""
    if not ANSWER_KEY.is_dir():
        return None
    return {path.name: path.read_bytes() for path in ANSWER_KEY.glob("*.py")}


def device_environment(part: str | None = None) -> dict[str, str]:
    """What a worker of `part` adds to its environment (`launch.worker_environment`) to say
    where it runs Triton: natively on CUDA where its workers can use it (`cuda.native`), else
    under the interpreter on CPU. Only the kernel part and the engine check (`part` None) see the
    GPU; the other parts run on the CPU, under the address-space limit
    (`process.memory_rlimit`)."""
    if not cuda.native():
        return INTERPRETED
    return {} if part in ("kernel", None) else NO_CUDA


def run_checks(
    intake: Intake,
    options: Options,
    zygotes: Zygotes | None = None,
    beside: Beside | None = None,
) -> GradingPlugin:
    """Run the check modules of the chosen parts with the grading plugin: here, those that the
    grading process `beside` does not grade, then take its results as if graded here
    (`take_beside`); where the candidate's allocator fails part 1, grade the parts built on it
    that lost points again with the kit's (`rescore_on_the_kit_allocator`), so that an
    allocator bug costs points in part 1 only."""
    theirs = beside.parts if beside is not None else ()
    plugin = new_plugin(intake, options, zygotes=zygotes, beside=beside)
    run_modules(plugin, part_modules(part for part in options.parts if part not in theirs), options)
    if beside is not None:
        take_beside(plugin, beside, intake, options)
    try:
        rescore_on_the_kit_allocator(plugin, intake, options)
    except Exception:  # the first grading stands, with the failure shown
        plugin.errors.append(
            said(
                "grading again with the kit's allocator failed: {traceback}",
                traceback=traceback.format_exc(),
            )
        )
    try:
        leave_to_the_owners(plugin, intake, options)
        name_causes(plugin)
        not_timed(plugin)
    except Exception:  # every failure stays charged where it is, with the failure shown
        plugin.errors.append(
            said(
                "leaving failures to the parts whose rules they break failed: {traceback}",
                traceback=traceback.format_exc(),
            )
        )
    return plugin


def split_parts(
    parts: tuple[str, ...], profile: str, here_only: Iterable[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`parts` in two groups, each in the order given: this process's and the process beside's
    (empty where nothing is left for it). Each part runs in workers of its own
    (`WorkerFixtures.worker`), so any split grades alike: those of `here_only` stay here, and the
    rest are split so that the dearer group costs least (`Part.cost` under `profile`; seven
    parts make 128 splits to try); this process, which runs the engine checks too, keeps the
    cheaper group where none is pinned here."""

    def cost(group: Iterable[str]) -> float:
        return sum(PARTS[part].cost[profile] for part in group)

    here_only = set(here_only).intersection(parts)
    free = [part for part in parts if part not in here_only]

    def split(picks: tuple[int, ...]) -> tuple[list[str], list[str]]:
        picked = set(compress(free, picks))
        return ([part for part in parts if part in here_only or part in picked],
                [part for part in free if part not in picked])  # fmt: skip

    splits = map(split, product((1, 0), repeat=len(free)))
    mine, theirs = min(splits, key=lambda pair: max(map(cost, pair)))
    if not here_only:
        mine, theirs = sorted((mine, theirs), key=cost)
    if not mine:
        mine, theirs = theirs, mine
    return tuple(mine), tuple(theirs)


def fork_beside(intake: Intake, options: Options, zygotes: Zygotes) -> Beside | None:
    """The grading process beside this one (`beside.py`), grading its share of the parts
    (`split_parts`; a part whose checks use CUDA in this process stays here: a fork cannot) with
    `options`, its workers forked from `zygotes`, each side's started here first for it to
    borrow. None, the parts all graded here, where nothing is left for it, where the system is
    not Linux (a fork's death signal), where this process runs a thread of Python's (a fork
    copies only the thread that makes it), or where the fork fails."""
    on_cuda = [part for part in options.parts if uses_cuda(device_environment(part))]
    _, theirs = split_parts(options.parts, options.profile.name, here_only=on_cuda)
    if not theirs or sys.platform != "linux" or threading.active_count() > 1:
        return None
    start_zygotes(zygotes, options.parts, grading_sides())

    def grade_their_parts(stream: LineStream) -> dict:
        lent = zygotes.lent()
        try:
            return outcome_of_parts(intake, replace(options, parts=theirs, live=False), lent,
                                    stream=stream)  # fmt: skip
        finally:
            lent.close()

    try:
        return Beside.fork(grade_their_parts, theirs)
    except OSError:  # no pipe or no fork: every part graded here
        return None


def start_zygotes(zygotes: Zygotes, parts: Iterable[str], sides: Iterable[str] = SIDES) -> None:
    """Start now, side by side, each of `sides`' zygotes that the workers of `parts` are forked
    from (those of the environments that may not fork: `Sandbox.zygote`)."""
    environments = [device_environment(part) for part in parts]
    zygotes.start((side, env) for side in sides for env in environments if may_not_fork(env))


def outcome_of_parts(intake: Intake, options: Options, zygotes: Zygotes, **fields: Any) -> dict:
    """What grading `options.parts` alone, with a plugin of `fields`, leaves (`outcome_of`)."""
    plugin = new_plugin(intake, options, zygotes=zygotes, **fields)
    run_modules(plugin, part_modules(options.parts), options)
    return outcome_of(plugin)


def outcome_of(plugin: GradingPlugin) -> dict:
    """What `plugin`'s checks left that a report reads, as plain data (`take_beside`)."""
    return {
        "results": plugin.results,
        "benchmarks": plugin.benchmarks,
        "sections": plugin.sections,
        "events": plugin.events,
        "part_notes": plugin.part_notes,
        "errors": plugin.errors,
    }


def take_beside(plugin: GradingPlugin, beside: Beside, intake: Intake, options: Options) -> None:
    """The parts `beside` graded, in `plugin` as if graded here, in the order `options` gives
    them; where that process failed, they are graded here after all, and the report's errors
    say why (their checks then have what is left of the grading's budget)."""

    def show(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        outcome = beside.outcome(options.deadline, show)
    except Exception as error:
        beside.stop()  # if it still runs, before its parts are graded here
        why = said(
            "the grading process beside failed, so {parts} were graded in this one: {error}",
            parts=", ".join(beside.parts),
            error=str(error).strip().splitlines()[-1] if str(error).strip() else repr(error),
        )
        step_line(options.lang, "progress_beside_failed", parts=", ".join(beside.parts))
        outcome = outcome_of_parts(intake, replace(options, parts=beside.parts), plugin.zygotes)
        outcome["errors"] = [why, *outcome["errors"]]
    order = {part: index for index, part in enumerate(options.parts)}
    results = plugin.results | outcome["results"]
    plugin.results = dict(sorted(results.items(), key=lambda item: order[item[1].part]))
    plugin.benchmarks = sorted(plugin.benchmarks + outcome["benchmarks"],
                               key=lambda bench: order[bench["part"]])  # fmt: skip
    plugin.sections |= outcome["sections"]
    events = plugin.events | outcome["events"]
    plugin.events = {part: events[part] for part in options.parts if part in events}
    plugin.part_notes |= outcome["part_notes"]
    plugin.errors += outcome["errors"]


def new_plugin(intake: Intake, options: Options, **fields: Any) -> GradingPlugin:
    """A grading plugin for `intake` under `options`, with any of its other `fields` set."""
    return GradingPlugin(
        files=runnable(intake.files),
        package=package_name(intake.name),
        reference_files=answer_key_files(),
        grading_profile=options.profile,
        seeded=options.seed is not None,
        limits=options.limits,
        worker_env={part: device_environment(part) for part in PARTS},
        isolation=options.isolation,
        point_overrides=options.rubric.points,
        severity_factors=options.rubric.severity,
        live=options.live,
        lang=options.lang,
        submission_deadline=options.deadline,
        **fields,
    )


def package_name(name: str) -> str:
    """The package the candidate's files are imported as: their folder's name, unless it is no
    identifier or names a module their code or a counterexample imports (a folder named `torch`
    would shadow torch), then "submission"."""
    shadowed = name in sys.stdlib_module_names or name in SHADOWED or keyword.iskeyword(name)
    return name if name.isidentifier() and not shadowed else "submission"


def part_modules(parts: Iterable[str]) -> list[Path]:
    """Every check module of `parts`, in the order `parts.toml` gives them."""
    return [CHECKS_DIR / f"{module}.py" for part in parts for module in PARTS[part].checks]


def run_modules(
    plugin: GradingPlugin, modules: list[Path] | list[str], options: Options, *args: str
) -> None:
    """Run the checks of `modules` (or those their node ids name, `<module path>::check_<name>`)
    in this process with `plugin`, which collects their results; `args` are more pytest
    options."""
    if not modules:  # pytest given no path would collect the working folder
        return
    args = (
        *map(str, modules),
        "-c", str(CHECKS_DIR / "pytest.ini"),
        "--rootdir", str(CHECKS_DIR),
        "-q",
        "--assert=plain",
        *args,
    )  # fmt: skip
    if options.seed is not None:
        args += (f"--hypothesis-seed={mixed_seed(options.seed)}",)
    log = io.StringIO()
    with contextlib.redirect_stdout(log), without_outer_pytest_settings():
        status = pytest.main(list(args), plugins=[plugin])
    if status == pytest.ExitCode.INTERRUPTED:  # Ctrl-C, caught by pytest once the workers closed
        raise KeyboardInterrupt
    if status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(f"pytest could not run the checks ({status!r}):\n{log.getvalue()}")


@contextlib.contextmanager
def without_outer_pytest_settings() -> Iterator[None]:
    """Within it, none of the `PYTEST_*` variables of whatever started the grader: a shell's
    `PYTEST_ADDOPTS` would add options to the checks, a test runner's `PYTEST_XDIST_WORKER`
    makes pytest-benchmark skip the timings. The same submission gets the same grade whatever
    runs the grader."""
    outer = {name: os.environ.pop(name) for name in list(os.environ) if name.startswith("PYTEST_")}
    try:
        yield
    finally:
        os.environ.update(outer)


def rescore_on_the_kit_allocator(plugin: GradingPlugin, intake: Intake, options: Options) -> None:
    """Where the candidate's allocator fails an allocator check, grade the `regraded` modules of
    each chosen part a second time, on the answer key's `block_allocator.py` in place of the
    candidate's (served from the kit's worker to a stand-in, as for `swapped` files), and keep
    in `plugin` the grading with more points, noting it; `plugin.rescored` records both. The
    part's other modules keep their first grading. Without the answer key (the candidate
    bundle) those parts keep the candidate's allocator, and their note says so. A part whose
    own files are the untouched stubs is not graded again (`stubbed`), nor is one whose
    `regraded` checks all passed: it has nothing to gain. Same options, so the same examples."""
    parts = [part for part in options.parts if PARTS[part].regraded]
    if "sharing" in parts and not all_passed(plugin, "sharing_refcounts"):
        parts.remove("sharing")  # its refcounts live in the allocator: the kit's would give them
    parts = [
        part
        for part in parts
        if not all(all_passed(plugin, module) for module in PARTS[part].regraded)
    ]
    if plugin.reference_files is not None:
        parts = [part for part in parts if not stubbed(intake, part)]
    if not parts or not allocator_fails(plugin, intake, options):
        return
    if plugin.reference_files is None:
        plugin.part_notes.update(dict.fromkeys(parts, OWN_ALLOCATOR_NOTE))
        return
    step_line(options.lang, "progress_again", parts=", ".join(parts), file=KIT_ALLOCATOR)
    again = new_plugin(intake, options, swapped=(KIT_ALLOCATOR,), zygotes=plugin.zygotes)
    modules = [CHECKS_DIR / f"{module}.py" for part in parts for module in PARTS[part].regraded]
    run_modules(again, modules, options)
    for result in again.results.values():  # the kit's allocator broke none of part 1's rules
        result.rules = tuple(rule for rule in result.rules if owner(rule) != ALLOCATOR)
    for part in parts:
        keep_the_better(plugin, again, part, options)


def leave_to_the_owners(plugin: GradingPlugin, intake: Intake, options: Options) -> None:
    """A check that failed on a rule another part owns (`CheckResult.rules`, `rules.py`), where
    a check of that part breaks the same rule (`broken_rules`), is not graded: its points leave
    its part's maximum, as a skipped check's do, and its message names that check (of the first
    such rule, where its failure may have broken several). The bug then costs its own part,
    once; where the owners' checks keep the rules, it costs this one. Run on the grading's final
    results, after `rescore_on_the_kit_allocator` (which decides on the raw ones, and whose
    grading on the kit's allocator breaks no rule of part 1's); an owner's part, where it is not
    chosen, runs its checks of the rule alone (`failures_alone`)."""
    failed = [result for result in plugin.results.values()
              if result.status == "failed" and result.rules]  # fmt: skip
    others = {rule for result in failed for rule in result.rules if owner(rule) != result.part}
    broken = broken_rules([*failed, *failures_alone(plugin, intake, options, others)])
    for result in failed:
        for rule in (rule for rule in result.rules if owner(rule) != result.part):
            checks = sorted(check for its_rule, check in broken if its_rule == rule)
            if checks:
                result.status, result.points = "skipped", 0
                result.message = said(
                    "not graded here: it fails on a rule of the {part} part, which {check} "
                    "fails on too: {failure}",
                    part=owner(rule),
                    check=checks[0],
                    failure=result.message,
                )
                break


def name_causes(plugin: GradingPlugin) -> None:
    """Each failure that breaks a rule of its own part (`CheckResult.rules`; another part's, it
    would have been left to that part, or broken where its owner keeps it) has that rule as its
    cause, the first where it lists several, and is labelled by what breaking it harms
    (`rules.HARMS`), not by the worst its check could find."""
    for result in plugin.results.values():
        own = [rule for rule in result.rules if owner(rule) == result.part]
        if result.status == "failed" and own:
            result.cause, result.severity = own[0], HARMS[own[0]]


def not_timed(plugin: GradingPlugin) -> None:
    """A timing check whose results, the candidate's own, differ from the contract
    (`timing.ResultsDiffer`) is not graded where a check of its part that times nothing fails:
    that check charges the code's results, once; its points leave the part's maximum, and its
    message names the most serious such check. Where none fails, it stays failed, charged here
    as the contract slip no other check found (its cause `TIMED_RESULTS`)."""
    for result in plugin.results.values():
        if result.status != "failed" or not result.results_differ:
            continue
        untimed = [other for other in plugin.results.values()
                   if other.part == result.part and other.status == "failed"
                   and other.severity != "speed" and not other.results_differ]  # fmt: skip
        if not untimed:
            result.cause, result.severity = TIMED_RESULTS, "contract"
            continue
        charged = min(untimed, key=lambda other: SEVERITIES.index(other.severity))
        result.status, result.points = "skipped", 0
        result.message = said(
            "not timed: its results differ from the contract (see {check}): {misstep}",
            check=charged.id,
            misstep=result.results_differ,
        )


def broken_rules(failures: list[CheckResult]) -> set[tuple[str, str]]:
    """`(rule, check id)` for each rule of its own part that a failure breaks: unless a rule
    listed before it, another part's, is broken there (a manager's wrong free count is part 1's
    where part 1's checks break their rule, else part 2's own). Parts in order: a rule's
    failures name only earlier parts' rules before it."""
    broken: set[tuple[str, str]] = set()
    for result in sorted(failures, key=lambda result: list(PARTS).index(result.part)):
        for rule in result.rules:
            if owner(rule) == result.part:
                broken.add((rule, result.id))
            elif any(its_rule == rule for its_rule, _ in broken):
                break
    return broken


def failures_alone(
    plugin: GradingPlugin, intake: Intake, options: Options, rules: set[str]
) -> list[CheckResult]:
    """The failures, with their rules, of the owners' checks of `rules` (`rules.CHECKS`) whose
    owner is not chosen, each part's run alone, unreported (as `allocator_fails` runs part 1's);
    then of the rules those failures name in turn, until none is new."""
    failures: list[CheckResult] = []
    asked: set[str] = set()
    while pending := {rule for rule in rules if owner(rule) not in options.parts} - asked:
        asked |= pending
        for part in sorted({owner(rule) for rule in pending}, key=list(PARTS).index):
            names = set().union(*(RULE_CHECKS[rule] for rule in pending if owner(rule) == part))
            node_ids = [f"{CHECKS_DIR / module}.py::check_{name}" for module in PARTS[part].checks
                        for name in sorted(names & check_names(module))]  # fmt: skip
            alone = new_plugin(intake, options, quiet=True, zygotes=plugin.zygotes)
            run_modules(alone, node_ids, options)
            failures += [result for result in alone.results.values()
                         if result.status == "failed" and result.rules]  # fmt: skip
        rules = {rule for result in failures for rule in result.rules}
    return failures


def hung_parts(parts: dict[str, dict], among: Iterable[str] = ENGINE_PARTS) -> list[str]:
    """The engine's parts (`among`) where a call did not return in time (not where a part's
    budget ran out): the engine check, one long call through them all, would wait as long again
    (its own limit is minutes), to no avail."""
    return [
        part
        for part, scored in parts.items()
        if part in among and any(DID_NOT_RETURN in check["message"] for check in scored["checks"])
    ]


def worker_flags(events: dict[str, Events]) -> list[dict]:
    """Each part's integrity events as flags: the first few distinct ones, then how many more.
    An event that several parts' workers sent (each imports the modules it runs) is flagged once,
    in the first of them in the statement's order."""
    first: dict[str, str] = {}  # each event's first part
    for part in PARTS:
        for event in events[part].shown if part in events else ():
            first.setdefault(event, part)
    flags = []
    for part, sent in events.items():
        flags += [{"part": part, "source": "worker", "message": event}
                  for event in sent.shown if first[event] == part]  # fmt: skip
        if sent.others:
            message = said("and {count} more events from this part's workers", count=sent.others)
            flags.append({"part": part, "source": "worker", "message": message})
    return flags


def stubbed(intake: Intake, part: str) -> bool:
    """Whether `part`'s own files, its allocator aside, are missing or the kit's stubs as they
    ship (`STUBS`): graded on the kit's allocator they would still fail, so they are not."""
    own = [name for name in PARTS[part].files if name != KIT_ALLOCATOR]
    return all(intake.files.get(name) in (None, stub(name)) for name in own)


@functools.cache
def stub(name: str) -> bytes | None:
    """The kit's stub `name` as the full kit ships it (in the candidate kit, `exercises/` is the
    candidate's own work: it never grades again, and never asks)."""
    path = STUBS / name
    return path.read_bytes() if path.is_file() else None


def allocator_fails(plugin: GradingPlugin, intake: Intake, options: Options) -> bool:
    """Whether the candidate's allocator breaks a rule of part 1 (`ALLOCATOR_RULES`; its speed
    does not count): as `plugin` graded it, or, if the allocator part is not chosen, in a run of
    those checks alone, unreported, that stops at the first failure."""
    if ALLOCATOR not in options.parts:
        plugin = new_plugin(intake, options, quiet=True, zygotes=plugin.zygotes)
        run_modules(plugin, [CHECKS_DIR / f"{ALLOCATOR_RULES}.py"], options, "-x")
    return not all_passed(plugin, ALLOCATOR_RULES)


def all_passed(plugin: GradingPlugin, module: str) -> bool:
    """Whether every check of `module` (in `CHECKS_DIR`) that `plugin` ran passed or was skipped
    (true where none ran)."""
    names = check_names(module)
    ran = [result for result in plugin.results.values() if result.name in names]
    return all(result.status in ("passed", "skipped") for result in ran)


def keep_the_better(
    plugin: GradingPlugin, again: GradingPlugin, part: str, options: Options
) -> None:
    """`part` scored with `plugin`'s results and with `again`'s in place of theirs: keep in
    `plugin` the grading that earns more points (the candidate's own on a tie), note which, and
    record both scores in `plugin.rescored`."""
    rescored = {key: result for key, result in again.results.items() if result.part == part}
    kit_results = plugin.results | rescored
    only_part = replace(options, parts=(part,))
    own = score_parts(list(plugin.results.values()), only_part)[part]["score"]
    kit = score_parts(list(kit_results.values()), only_part)[part]["score"]
    kept = "kit" if kit > own else "own"
    plugin.rescored[part] = {"with": [KIT_ALLOCATOR], "own": own, "kit": kit, "kept": kept}
    plugin.events.setdefault(part, Events()).merge(again.events.get(part, Events()))
    if kept == "kit":
        plugin.results.update(rescored)
        plugin.part_notes[part] = said(
            "scored with the kit's reference {file} in place of yours: your allocator fails "
            "allocator checks (with yours, this part scored {own})",
            file=KIT_ALLOCATOR,
            own=f"{own:g}",
        )


def mixed_seed(seed: int) -> int:
    """A private seed, hashed so that nearby seeds give unrelated example sets."""
    return int.from_bytes(hashlib.sha256(f"paged-attention-kit:{seed}".encode()).digest()[:8])


def score_parts(
    results: list[CheckResult], options: Options, notes: dict[str, str] | None = None
) -> dict[str, dict]:
    """Each part's score; `notes` says what a part was scored with, where that is not simply the
    candidate's files.

    A check is worth the part's weight times its points over the points of ALL the part's checks,
    skipped ones included: the same in every kit and on every machine. A check skipped here (in
    the candidate kit, without CUDA, or left to another part's rule by `leave_to_the_owners`)
    keeps its `max_points` but is left out of the part's `max_score`; its points go to
    `ungraded_points`, and by reason to `ungraded` (a list of `{"id", "reason", "points"}`).
    Where a fuller kit or machine would grade it, the part is marked `provisional`, with why
    ("checks skipped (needs a CUDA device)"; the reports put their own "provisional" before it);
    a check left to another part is not pending. The answer key scores `score == max_score`
    wherever it runs.
    """
    parts, notes = {}, notes or {}
    for part in options.parts:
        checks = [result for result in results if result.part == part]
        ran = [check for check in checks if check.status != "skipped"]
        skipped = [check for check in checks if check.status == "skipped"]
        total = sum(check.max_points for check in checks)
        scale = options.rubric.weights[part] / total if total else 0.0
        rows = [
            asdict(check, dict_factory=without_rules)
            | {"points": round(check.points * scale, 2),
               "max_points": round(check.max_points * scale, 2)}
            for check in checks
        ]  # fmt: skip
        ungraded = ungraded_by_reason(skipped, scale)
        parts[part] = {
            "title": PARTS[part].title,
            "score": round(sum(check.points for check in ran) * scale, 2),
            "max_score": round(sum(check.max_points for check in ran) * scale, 2),
            "ungraded_points": round(sum((item["points"] for item in ungraded), 0.0), 2),
            "ungraded": ungraded,
            "seconds": round(sum(check.seconds for check in checks), 2),
            "checks": rows,
        }
        if not checks:
            parts[part]["note"] = said("not graded by this version of the kit")
        else:
            if part in notes:
                parts[part]["note"] = notes[part]
            pending = [check for check in skipped if reason_of(check.message)[0] not in SETTLED]
            if pending:  # a check left to another check is graded, there: nothing is pending
                why = sorted({check.message for check in pending})
                parts[part]["provisional"] = said("checks skipped ({reason_list})", reason_list=why)
    return parts


def without_rules(fields: list[tuple[str, Any]]) -> dict:
    """A check's fields as the report lists them: the rules it broke, and how its results differ,
    stay in the grading; a `cause` only where it has one."""
    return {name: value for name, value in fields
            if name not in ("rules", "results_differ") and (name != "cause" or value)}  # fmt: skip


def ungraded_by_reason(skipped: list[CheckResult], scale: float) -> list[dict]:
    """The points of the checks skipped here, by reason (`ungraded.reason_of`), in the order the
    reasons first appear: `[{"id": ..., "reason": ..., "points": ...}]`."""
    by_reason: dict[tuple[str | None, str], float] = {}
    for check in skipped:
        reason = reason_of(check.message)
        by_reason[reason] = by_reason.get(reason, 0.0) + check.max_points
    return [
        {"id": reason_id, "reason": why, "points": round(total * scale, 2)}
        for (reason_id, why), total in by_reason.items()
    ]


def with_baselines(sections: dict[str, dict]) -> dict[str, dict]:
    """The checks' report sections, the scheduling run beside static batching on its trace."""
    scheduling = sections.get("scheduling")
    if scheduling is not None:
        trace = [tuple(arrival) for arrival in scheduling["trace"]]
        seats = (scheduling["num_blocks"], scheduling["block_size"], scheduling["max_num_seqs"])
        static = static_batching(trace, *seats)
        scheduling["static_tokens_per_step"] = [len(step.scheduled) for step in static]
    return sections


def has_report_figures() -> bool:
    """Whether this kit keeps the simulation's figures for the reports: the full kit does, the
    candidate bundle leaves `full_kit/` out."""
    return REPORT_FIGURES.is_file()


@functools.cache
def simulation() -> dict:
    """`make simulate`'s headline, table and plots (as data), the same for every report, as
    `python -m full_kit.simulate --keep` kept them, records and all (the full kit only:
    `has_report_figures`)."""
    return json.loads(REPORT_FIGURES.read_text(encoding="utf-8"))


def kit() -> str:
    """Which kit grades: "full", with the answer key, or "candidate", the bundle without it
    (`answer_key_files` is None), whose report leaves the timings to the full kit."""
    return "full" if ANSWER_KEY.is_dir() else "candidate"


def environment(options: Options) -> dict:
    """What graded: the kit, the device, the versions, the options; `report.json`'s
    `environment`."""
    device = torch.cuda.get_device_name() if cuda.native() else "cpu"
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "kit": kit(),
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "triton": triton_version,
        "hypothesis": hypothesis.__version__,
        "pytest": pytest.__version__,
        "profile": options.profile.name,
        "shrinks": options.profile.shrinks,
        "seed": options.seed,
        "parts": list(options.parts),
    }


def with_failures(errors: list[dict], report: dict) -> list[dict]:
    """The files that do not compile (`scan.syntax_errors`), each with the ids of the checks that
    failed on its import (`checks`) and whether the engine check did (`engine_check`): the
    reports show the error once, as the reason those failed."""
    files = [error["file"] for error in errors]
    checks = [check for part in report["parts"].values() for check in part["checks"]]
    blamed = {check["id"]: failed_on(check, files) for check in checks}
    engine = failed_on(report.get("integration") or {}, files)
    return [
        error
        | {
            "checks": [check_id for check_id, file in blamed.items() if file == error["file"]],
            "engine_check": engine == error["file"],
        }
        for error in errors
    ]


def failed_on(outcome: dict, files: list[str]) -> str | None:
    """Which of `files` (files that do not compile) a check or the engine check failed on: its
    `outcome` failed, its message saying that an import failed, and naming the file
    (`ImportFailed`: "import failed: kv_cache_manager.py could not be imported: SyntaxError: ...
    (block_allocator.py, line 3)"; the first of `files` named). None if it did not."""
    message = outcome.get("message", "")
    if outcome.get("status") != "failed" or not message.startswith(f"{ImportFailed.label}:"):
        return None
    return next((file for file in files if file in message), None)


@dataclass
class EngineCheck:
    """An engine check (`integration.py`) running in a thread beside the parts, mostly in a
    worker of its own: where the report puts it (`key`), the parts whose hung calls make it moot
    (`needs`), its progress line and its failure's message, and its workers, to stop them."""

    key: str
    needs: frozenset[str]
    progress: str
    failed: Callable[[str], str]  # the message where it raised, from its traceback
    future: Future
    sandboxes: Stoppable


def start_engine_checks(
    files: dict[str, bytes], options: Options, threads: ThreadPoolExecutor, zygotes: Zygotes
) -> list[EngineCheck]:
    """The engine check (every engine part chosen) and the prefix-caching check (part 7
    chosen) on the submission's `files` (`runnable`), each started in `threads` where the parts
    it `needs` are chosen: they read none of the parts' results, so they run beside them
    (`finish_engine_check` then decides whether each still counts)."""
    checks = []
    kinds = [
        ("integration", ENGINE_PARTS, None, run_integration, "progress_engine",
         lambda trace: said("the engine check failed: {traceback}", traceback=trace)),
        ("prefix_integration", frozenset({CACHING}), CACHING, run_prefix_integration,
         "progress_prefix_engine",
         lambda trace: said("the prefix-caching check failed: {traceback}", traceback=trace)),
    ]  # fmt: skip
    for key, needs, part, run, progress, failed in kinds:
        if needs <= set(options.parts):
            sandboxes = Stoppable()
            future = threads.submit(run, files, options.limits, device_environment(part),
                                    options.isolation, sandboxes, options.deadline,
                                    zygotes)  # fmt: skip
            checks.append(EngineCheck(key, needs, progress, failed, future, sandboxes))
    return checks


def finish_engine_check(check: EngineCheck, report: dict, options: Options) -> None:
    """`check`'s outcome into `report`, or why it was skipped: a part it needs where a call did
    not return in time (`hung_parts`; then its worker is stopped, whatever it had done)."""
    if hung := hung_parts(report["parts"], check.needs):
        check.sandboxes.stop()
        report[check.key] = hung_outcome(hung)
        return
    step_line(options.lang, check.progress)
    try:
        report[check.key] = check.future.result()
    except Exception:
        report["errors"].append(check.failed(traceback.format_exc()))


def hung_outcome(hung: list[str]) -> dict:
    """An engine check skipped: calls in the `hung` parts did not return in time."""
    return {
        "status": "skipped",
        "message": said(
            "calls in {parts} did not return in time: the engine check would wait for them too",
            parts=", ".join(hung),
        ),
        "figures": {},
    }


def accounting(limits: Limits) -> str:
    """What a worker's CPU time and memory limit cover, for the report."""
    memory = f"{limits.memory_bytes / (1 << 30):g} GiB"
    if seccomp.supported():
        return said(
            "the CPU parts' workers can start no process (a seccomp filter), so each "
            "one's CPU time, its own clock, and its memory limit ({memory}) cover "
            "all it does; the kernel's worker on a CUDA machine may start processes "
            "(Triton runs a compiler), and its limit is per process",
            memory=memory,
        )
    return said(
        "the workers may start processes (no seccomp filter here): a worker's CPU "
        "time counts those it waited for, and its memory limit ({memory}) is per "
        "process",
        memory=memory,
    )


def isolation_flags(isolation: Isolation) -> list[dict]:
    """An unisolated grading's flag, first in the report: its scores are no evidence."""
    if isolation.isolated:
        return []
    return [{"source": "isolation", "message": isolation.describe()}]


def gpu_errors() -> list[str]:
    """Why part 4 ran under the interpreter on a machine with a GPU (`cuda.settle`), if so."""
    found = cuda.settled()
    if not found.problem:
        return []
    return [
        said(
            "this machine's GPU ({device}) does not work in the sandbox, so part 4 ran under "
            "Triton's interpreter on the CPU, as on a machine without one, and its CUDA checks "
            "were not graded; fix the machine and grade again. The sandboxed probe said: {why}",
            device=found.device,
            why=found.problem,
        )
    ]


def known_code_flags(intake: Intake, errors: list[str]) -> list[dict]:
    """A flag for each file of `intake` that matches the answer key or a public implementation
    (`similarity.known`); where the comparison fails, none, and `errors` says why: a flag changes
    no score, so its failure never costs the grading."""
    try:
        return known.flags(intake)
    except Exception:
        errors.append(
            said(
                "the comparison with known code failed: {traceback}",
                traceback=traceback.format_exc(),
            )
        )
        return []


def grade(intake: Intake, options: Options, zygotes: Zygotes | None = None) -> dict:
    """Grade `intake`; returns the report, for the caller to write (`writers.write_all`), each
    message with its record beside it (`said.recorded`). Its workers are forked from `zygotes`
    (the caller's, who closes them) or from zygotes of its own."""
    started = time.time()
    if "kernel" in options.parts:  # the GPU's part (the engine check's too), asked before the
        cuda.settle(options.isolation, options.limits)  # budget starts: not the submission's time
    options = with_budget(options)
    torch.set_num_threads(1)  # the checks' tensors are small: a second thread costs, not gains
    threads = ThreadPoolExecutor(
        2, thread_name_prefix="engine-check", initializer=interrupt.leave_to_the_main_thread
    )
    own = zygotes is None
    if own:
        zygotes = Zygotes.borrowing(options.isolation, options.limits.import_seconds)
    engine_checks: list[EngineCheck] = []
    beside = None
    try:
        files = runnable(intake.files)  # before the fork: the process beside reads it cached
        beside = fork_beside(intake, options, zygotes)  # before any thread starts
        engine_checks += start_engine_checks(files, options, threads, zygotes)
        return graded(intake, options, zygotes, engine_checks, started, beside)
    except KeyboardInterrupt:
        if beside is not None:  # it took Ctrl-C too: it tears its workers down, then ends
            beside.stop(EXIT_SECONDS)
        raise
    finally:  # on Ctrl-C too: no engine check or worker outlives the grading (a forked worker
        # dies when the lifeline this process holds closes, whoever's zygote forked it)
        if beside is not None:
            beside.stop()
        for check in engine_checks:
            check.sandboxes.stop()
        threads.shutdown()
        if own:
            zygotes.close()


def with_budget(options: Options) -> Options:
    """`options` with the submission's time budget (its own, or its profile's) starting now."""
    budget = options.limits.submission_seconds or options.profile.budget_seconds
    return replace(
        options,
        limits=replace(options.limits, submission_seconds=budget),
        deadline=time.monotonic() + budget,
    )


def graded(
    intake: Intake,
    options: Options,
    zygotes: Zygotes,
    engine_checks: list[EngineCheck],
    started: float,
    beside: Beside | None = None,
) -> dict:
    """`grade`'s report, its workers forked from `zygotes`, the `engine_checks` running beside
    the parts, and some parts graded by the process `beside`."""
    errors = gpu_errors()
    report = {
        "score": 0.0,
        "max_score": 0.0,
        "language": options.lang,
        "parts": {},
        "benchmarks": [],
        "isolation": options.isolation.as_report() | {"accounting": accounting(options.limits)},
        "integrity": isolation_flags(options.isolation)
        + known_code_flags(intake, errors)
        + scan.scan_files(intake.files),
        "syntax_errors": scan.syntax_errors(intake.files),  # with their failures (`with_failures`)
        "rescored": {},  # parts graded again with the kit's allocator (`run_checks`)
        "ignored_files": intake.ignored,
        "errors": errors,
        "environment": environment(options),
        "submission": {
            "name": intake.name,
            "path": intake.path,
            "folder": intake.folder,  # inside it, that held the files; "" for its top
            "files": intake.sha256(),
        },
        "provenance": provenance.of(options.rubric, intake.sha256()),  # sealed when written
    }
    try:
        plugin = run_checks(intake, options, zygotes, beside)
        report["errors"] += plugin.errors
        report["parts"] = score_parts(list(plugin.results.values()), options, plugin.part_notes)
        report["benchmarks"] = plugin.benchmarks
        report["rescored"] = plugin.rescored
        report["sections"] = with_baselines(plugin.sections)
        report["integrity"] += worker_flags(plugin.events)
        report["integrity"] += [
            {
                "part": bench["part"],
                "source": "timing",
                "message": said("implausibly fast: {benchmark}", benchmark=bench["name"]),
            }
            for bench in plugin.benchmarks
            if implausible(bench["ratio"])
        ]
    except Exception:
        report["errors"].append(
            said("the grader failed: {traceback}", traceback=traceback.format_exc())
        )
        report["parts"] = score_parts([], options)
    if "scheduler" in options.parts and has_report_figures():
        try:
            report["simulation"] = simulation()
        except Exception:
            report["errors"].append(
                said("the simulation failed: {traceback}", traceback=traceback.format_exc())
            )
    for check in engine_checks:
        finish_engine_check(check, report, options)
    rows = [check for part in report["parts"].values() for check in part["checks"]]
    report["code"] = code_marks(rows, intake.files, runnable(intake.files))
    report["syntax_errors"] = with_failures(report["syntax_errors"], report)
    report["score"] = round(sum(part["score"] for part in report["parts"].values()), 2)
    report["max_score"] = round(sum(part["max_score"] for part in report["parts"].values()), 2)
    report["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started))
    report["seconds"] = round(time.time() - started, 1)
    return recorded(report)
