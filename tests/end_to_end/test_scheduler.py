"""Part 5's grading, end to end through the CLI (`--parts scheduler`): the answer key gets full
marks; buggy schedulers (mutants of the answer key) lose points in exactly the checks whose rule
they break, each with a counterexample; the stub scores zero; and the part is scored apart from
parts 1 and 2 (the reference manager is swapped in for a missing or broken one).
"""

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from full_kit.coverage import load, rules_missed
from tests.grading import (
    CUT_SHORT,
    EXERCISES,
    Edit,
    Graded,
    build_submission,
    concurrently,
    grade,
    grade_shared,
    mutant_options,
)
from tests.grading import selected_params as selected

PART = "scheduler"
OPTIONS = ("--parts", PART)
INVARIANTS = (
    "add_request_refuses_what_can_never_run",
    "every_request_gets_exactly_its_tokens",
    "at_most_max_num_seqs_per_step",
    "no_deadlock",
    "admission_in_arrival_order",
    "preemption_takes_the_newest_running_request",
    "no_blocks_leaked",
)
TRACE = "trace_matches_the_reference"
COVERAGE = load()  # each mutant fails a check of every rule of docs/coverage.toml naming it


@dataclass(frozen=True)
class Mutant:
    id: str
    edits: tuple[Edit, ...]
    fails: frozenset[str]  # the checks it must fail, all the others must pass
    replayed: bool = False  # test_counterexamples.py runs its counterexamples: they are shrunk

    @property
    def part(self) -> str:
        """The part it must lose points in, as test_buggy.py's mutants name theirs."""
        return PART

    @property
    def options(self) -> tuple[str, ...]:
        return mutant_options(OPTIONS, self.replayed)


def scheduler(*changes: tuple[str, str]) -> tuple[Edit, ...]:
    return tuple(Edit("scheduler.py", old, new) for old, new in changes)


DECODE_LOOP = """\
        i = 0
        while i < len(self.running):
            req = self.running[i]
            if self._decode_or_preempt(req, out):
                out.scheduled.append(req.request_id)
            i += 1
"""
DECODE_LOOP_OVER_A_COPY = """\
        for req in list(self.running):
            if req in self.running and self._decode_or_preempt(req, out):
                out.scheduled.append(req.request_id)
"""
ADMIT_LOOP = """\
        while self.waiting and len(self.running) < self.max_num_seqs:
            req = self.waiting[0]
            if cdiv(req.seq_len + 1, block_size) > len(self.manager.free_blocks):
                return
            self.waiting.popleft()
"""
ADMIT_ANY_THAT_FITS = """\
        for req in list(self.waiting):
            if len(self.running) >= self.max_num_seqs:
                return
            if cdiv(req.seq_len + 1, block_size) > len(self.manager.free_blocks):
                continue
            self.waiting.remove(req)
"""
POP_THE_NEWEST = "                victim = self.running.pop()\n"
POP_THE_OLDEST_UNFINISHED = """\
                victim = next(  # a request that got its last token in this step is not a victim
                    r for r in self.running if r.seq_len < self._final_seq_lens[r.request_id]
                )
                self.running.remove(victim)
"""
PREEMPT_ON_OOM = """\
            except RuntimeError:
                victim = self.running.pop()
                self._preempt(victim)
                out.preempted.append(victim.request_id)
                if victim is req:
                    return False
"""

# fmt: off
MUTANTS = [
    # Every other invariant holds: the wrong victim is named by its own rule, and the trace.
    Mutant("preempts_the_oldest", scheduler(
        (DECODE_LOOP, DECODE_LOOP_OVER_A_COPY),
        (POP_THE_NEWEST, POP_THE_OLDEST_UNFINISHED)),
        fails=frozenset({"preemption_takes_the_newest_running_request", TRACE})),
    Mutant("skips_ahead_of_a_request_that_does_not_fit", scheduler(
        (ADMIT_LOOP, ADMIT_ANY_THAT_FITS)),
        fails=frozenset({"admission_in_arrival_order", TRACE})),
    Mutant("one_seat_too_many", scheduler(
        ("len(self.running) < self.max_num_seqs", "len(self.running) <= self.max_num_seqs")),
        fails=frozenset({"at_most_max_num_seqs_per_step", TRACE})),
    # max_num_seqs kept capped: fewer seats than asked, every invariant still holds.
    Mutant("keeps_at_most_four_seats", scheduler(
        ("        self.max_num_seqs = max_num_seqs\n",
         "        self.max_num_seqs = min(max_num_seqs, 4)\n")),
        fails=frozenset({TRACE})),
    Mutant("forgets_the_tokens_generated_before_preemption", scheduler(
        ("        self._final_seq_lens[request_id] = final_seq_len\n",
         "        self._final_seq_lens[request_id] = final_seq_len\n"
         "        self._prompt_lens[request_id] = prompt_len\n"),
        ("        self._final_seq_lens: dict[int, int] = {}\n",
         "        self._final_seq_lens: dict[int, int] = {}\n"
         "        self._prompt_lens: dict[int, int] = {}\n"),
        ("Request(req.request_id, req.seq_len)",
         "Request(req.request_id, self._prompt_lens[req.request_id])")),
        fails=frozenset({"every_request_gets_exactly_its_tokens", TRACE})),
    # Arrival order taken for id order: the traces give ids in any order.
    Mutant("waits_in_id_order", scheduler(
        ("        self.waiting.append(Request(request_id, prompt_len))\n",
         "        self.waiting.append(Request(request_id, prompt_len))\n"
         "        self.waiting = deque(sorted(self.waiting, key=lambda r: r.request_id))\n")),
        fails=frozenset({"admission_in_arrival_order", TRACE}), replayed=True),
    Mutant("finishes_in_id_order", scheduler(
        ("        self.running = still_running\n",
         "        self.running = still_running\n        out.finished.sort()\n")),
        fails=frozenset({TRACE})),
    # The refusals and the has_unfinished() answer.
    Mutant("accepts_a_finished_id_again", scheduler(
        ("                out.finished.append(req.request_id)\n",
         "                out.finished.append(req.request_id)\n"
         "                del self._final_seq_lens[req.request_id]\n")),
        fails=frozenset({"add_request_refuses_what_can_never_run"})),
    # Each request queued in place of those still waiting.
    Mutant("add_request_replaces_the_queue", scheduler(
        ("        self.waiting.append(Request(request_id, prompt_len))\n",
         "        self.waiting = deque([Request(request_id, prompt_len)])\n")),
        fails=frozenset({"add_request_refuses_what_can_never_run",
                         "every_request_gets_exactly_its_tokens", "no_deadlock",
                         "admission_in_arrival_order", TRACE})),
    Mutant("has_unfinished_forgets_the_waiting", scheduler(
        ("return bool(self.waiting or self.running)", "return bool(self.running)")),
        fails=frozenset({"no_deadlock"})),
    # Admitted with its prefill only: its first token holds no slot, so it gets one too many and
    # finishes a step late.
    Mutant("admits_without_the_first_token", scheduler(
        ("            self.manager.allocate_for_prefill(req)\n"
         "            self.manager.allocate_for_decode(req)\n",
         "            self.manager.allocate_for_prefill(req)\n")),
        fails=frozenset({"every_request_gets_exactly_its_tokens", "no_deadlock", TRACE})),
    # Done one token early: seq_len one short of prompt_len + max_new_tokens.
    Mutant("finishes_a_token_early", scheduler(
        ("if req.seq_len == self._final_seq_lens[req.request_id]:",
         "if req.seq_len >= self._final_seq_lens[req.request_id] - 1:")),
        fails=frozenset({"every_request_gets_exactly_its_tokens", TRACE})),
    Mutant("decodes_in_id_order", scheduler(
        (DECODE_LOOP, DECODE_LOOP_OVER_A_COPY.replace(
            "list(self.running)", "sorted(self.running, key=lambda r: r.request_id)"))),
        fails=frozenset({TRACE})),
    # A member the contract does not give: the stand-in manager of part 5 has none of it.
    Mutant("reads_the_managers_allocator", scheduler(
        ("len(self.manager.free_blocks)", "self.manager.allocator.num_free")),
        fails=frozenset({*INVARIANTS, TRACE})),
    # Preempts on the stub's OutOfBlocks only: the contract's manager raises RuntimeError.
    Mutant("catches_only_out_of_blocks", scheduler(
        ("from .kv_cache_manager import KVCacheManager, Request\n",
         "from .block_allocator import OutOfBlocks\n"
         "from .kv_cache_manager import KVCacheManager, Request\n"),
        (PREEMPT_ON_OOM, PREEMPT_ON_OOM.replace("except RuntimeError:", "except OutOfBlocks:"))),
        fails=frozenset({*INVARIANTS, TRACE} - {"add_request_refuses_what_can_never_run"})),
    Mutant("never_preempts_and_deadlocks", scheduler(
        (PREEMPT_ON_OOM, "            except RuntimeError:\n                return False\n")),
        fails=frozenset({"every_request_gets_exactly_its_tokens", "no_deadlock", TRACE}),
        replayed=True),
]
# fmt: on


@pytest.fixture(scope="module")
def graded(
    request: pytest.FixtureRequest, tmp_path_factory, shared_gradings: Path
) -> dict[str, Future[Graded]]:
    """The answer key, every selected mutant (test_counterexamples.py reads some of the same
    gradings), the stub and the part-2-less submission, each graded on part 5 alone, two at a
    time."""
    root: Path = tmp_path_factory.mktemp("scheduler")
    broken = root / "without_a_manager"
    build_submission(broken, files={"kv_cache_manager.py": "this is not Python ("})
    (broken / "block_allocator.py").unlink()
    folders = {
        "answer_key": build_submission(root / "answer_key"),
        "stub": build_submission(root / "stub", files={"scheduler.py": EXERCISES / "scheduler.py"}),
        "without_a_manager": broken,
    }
    jobs = {name: lambda folder=folder: grade(folder, *OPTIONS) for name, folder in folders.items()}
    jobs |= {
        mutant.id: lambda mutant=mutant: grade_shared(
            shared_gradings, mutant.id, mutant.options, edits=mutant.edits
        )
        for mutant in selected(request, "mutant")
    }
    return concurrently(jobs)


def check_statuses(result: Graded) -> dict[str, str]:
    return {check["name"]: check["status"] for check in result.part(PART)["checks"]}


def test_answer_key_gets_full_marks(graded: dict[str, Future[Graded]]) -> None:
    result = graded["answer_key"].result()
    result.assert_clean()
    assert set(check_statuses(result)) == {*INVARIANTS, TRACE}, result.describe(PART)
    assert not result.not_passed(PART), result.describe(PART)
    assert 0 < result.score(PART) == result.max_score(PART), result.describe(PART)


def test_the_report_holds_tokens_per_step_on_the_long_tailed_trace(
    graded: dict[str, Future[Graded]],
) -> None:
    """The scheduling section: the trace, the pool, and every step's token count, which add up
    to the tokens the trace asks for."""
    section = graded["answer_key"].result().report["sections"]["scheduling"]
    tokens = section["tokens_per_step"]
    assert section["drained"], section
    assert section["steps"] == len(tokens) > 0, section
    assert sum(tokens) == sum(max_new_tokens for _, _, max_new_tokens in section["trace"])
    assert max(tokens) == section["max_num_seqs"], tokens


def test_invariants_outweigh_the_trace(graded: dict[str, Future[Graded]]) -> None:
    """A scheduler right on every invariant but different in its trace keeps most of the part."""
    checks = {check["name"]: check for check in graded["answer_key"].result().part(PART)["checks"]}
    invariants = sum(checks[name]["max_points"] for name in INVARIANTS)
    assert invariants > checks[TRACE]["max_points"] > 0


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.id for mutant in MUTANTS])
def test_buggy_scheduler_fails_the_checks_of_its_rule(
    mutant: Mutant, graded: dict[str, Future[Graded]]
) -> None:
    result = graded[mutant.id].result()
    result.assert_clean()
    statuses = check_statuses(result)
    failed = {name for name, status in statuses.items() if status != "passed"}
    assert failed == mutant.fails, (
        f"{mutant.id} must fail exactly {sorted(mutant.fails)}\n{result.describe(PART)}"
    )
    missed = rules_missed(COVERAGE, mutant.id, result.caught(PART))
    assert not missed, f"rules of docs/coverage.toml whose checks miss {mutant.id}: {missed}"
    assert result.score(PART) < result.max_score(PART), result.describe(PART)
    for check in result.part(PART)["checks"]:
        if check["name"] in mutant.fails:
            assert check["status"] == "failed", result.describe(PART)
            assert CUT_SHORT not in check["message"], result.describe(PART)
            assert not check["message"].startswith("timed out"), result.describe(PART)
            assert "scheduler.step()" in check["counterexample"], (
                f"{check['id']} has no counterexample that runs the scheduler:\n"
                f"{check['counterexample']}"
            )


def test_stub_scores_zero_and_says_not_implemented(graded: dict[str, Future[Graded]]) -> None:
    result = graded["stub"].result()
    result.assert_clean()
    assert result.score(PART) == 0 < result.max_score(PART), result.describe(PART)
    wrong = [
        f"{check['id']}: {check['status']} {check['message'][:100]}"
        for check in result.part(PART)["checks"]
        if check["status"] != "failed" or not check["message"].startswith("not implemented")
    ]
    assert not wrong, "checks that do not just say 'not implemented':\n" + "\n".join(wrong)


def test_the_reference_manager_is_swapped_in(graded: dict[str, Future[Graded]]) -> None:
    """The candidate's kv_cache_manager.py does not import and block_allocator.py is missing:
    part 5 still gets full marks, scored on the kit's own manager."""
    result = graded["without_a_manager"].result()
    result.assert_clean()
    assert "reference" in result.part(PART)["note"], result.part(PART)
    assert not result.not_passed(PART), result.describe(PART)
    assert result.score(PART) == result.max_score(PART) > 0, result.describe(PART)
