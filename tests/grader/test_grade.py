"""`grade.score_parts`: a check is worth the same points in every kit and on every machine;
`grade.with_failures`: a syntax error is blamed for the failures it caused; `grade.environment`
says which kit graded; `grade.leave_to_the_owners`: a failure on another part's rule is left to
that part where a check of it fails on the same rule.

A check's points are the part's weight times its own over those of ALL the part's checks,
skipped ones included. What is skipped here (the candidate kit has no answer key to time against;
a CPU machine has no CUDA) keeps its points: they are left out of the part's `max_score` and
reported in `ungraded_points` and `ungraded`, by reason. No grading runs here: the results are
made by hand.
"""

import pickle
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import grade
from grader.checks.support.expect import RuleBroken, judged_by
from grader.checks.support.rules import EVICTION_ORDER, FREE_BLOCKS, FREE_COUNT, TIMED_RESULTS
from grader.grade import score_parts, with_failures, worker_flags
from grader.said import said
from grader.sandbox.process import Events
from grader.scoring.plugin import CheckResult
from grader.scoring.profiles import PROFILES

FULL_KIT = "runs only in the full kit: the answer key it is compared with is absent"
CUDA = "needs a CUDA device"
# The allocator's checks and their raw points, as the check modules mark them.
ALLOCATOR = {
    "new_pool_is_all_free": 2,
    "allocate_hands_out_distinct_free_ids": 2,
    "allocate_errors_change_nothing": 2,
    "freed_blocks_are_reused": 2,
    "bad_frees_raise_and_free_nothing": 3,
    "random_allocate_and_free": 6,
    "allocate_and_free_speed": 2,
    "cost_does_not_grow_with_the_pool": 3,
}
TIMINGS = {"allocate_and_free_speed", "cost_does_not_grow_with_the_pool"}
ALLOCATOR_ORDER = list(ALLOCATOR)


def options(**weights: float) -> SimpleNamespace:
    """What `score_parts` reads of the grading's options: the parts and their weights."""
    return SimpleNamespace(parts=tuple(weights), rubric=SimpleNamespace(weights=weights))


def result(name: str, points: float, status: str = "passed", message: str = "") -> CheckResult:
    earned = points if status == "passed" else 0
    return CheckResult(
        f"allocator/{name}", "allocator", name, status, earned, points, "safety", message
    )


def allocator(failed: set[str] = frozenset(), skipped: dict[str, str] | None = None):
    """The allocator's results: `failed` checks failed, `skipped` ones skipped with their
    message, the rest passed."""
    skipped = skipped or {}
    return [
        result(name, points, "skipped", skipped[name])
        if name in skipped
        else result(name, points, "failed" if name in failed else "passed")
        for name, points in ALLOCATOR.items()
    ]


def test_a_check_is_worth_the_same_in_the_candidate_kit_and_the_full_kit() -> None:
    """The same two mistakes cost the same points in both kits."""
    mistakes = {"allocate_errors_change_nothing", "random_allocate_and_free"}
    full = score_parts(allocator(mistakes), options(allocator=15))["allocator"]
    candidate = score_parts(
        allocator(mistakes, dict.fromkeys(TIMINGS, FULL_KIT)), options(allocator=15)
    )["allocator"]
    kits = {"full": full, "candidate": candidate}
    worth = {kit: [check["max_points"] for check in part["checks"]] for kit, part in kits.items()}
    assert worth["full"] == worth["candidate"]
    assert worth["full"][2] == pytest.approx(15 * 2 / 22, abs=0.01)
    lost = {kit: part["max_score"] - part["score"] for kit, part in kits.items()}
    assert lost["full"] == pytest.approx(lost["candidate"])
    assert full["max_score"] == 15
    assert full["ungraded_points"] == 0
    assert full["ungraded"] == []
    assert "provisional" not in full
    timed = 15 * 5 / 22
    assert candidate["max_score"] == pytest.approx(15 - timed, abs=0.01)
    assert candidate["ungraded_points"] == pytest.approx(timed, abs=0.01)
    assert candidate["ungraded"] == [
        {
            "id": "full_kit",
            "reason": "graded by the hiring team's kit",
            "points": candidate["ungraded_points"],
        }
    ]
    # Why; the reports put "provisional" before it, once.
    assert candidate["provisional"] == f"checks skipped ({FULL_KIT})"


def test_the_answer_key_scores_its_maximum_whatever_is_skipped() -> None:
    for skipped in ({}, dict.fromkeys(TIMINGS, CUDA), {"freed_blocks_are_reused": FULL_KIT}):
        for weight in (15, 7, 100, 42):
            part = score_parts(allocator(skipped=skipped), options(allocator=weight))["allocator"]
            assert part["score"] == part["max_score"] > 0, (skipped, weight)
            assert part["max_score"] + part["ungraded_points"] == pytest.approx(weight, abs=0.02)


def test_each_reason_keeps_its_own_points_and_a_skipped_check_keeps_its_own() -> None:
    skipped = {"allocate_and_free_speed": CUDA, "cost_does_not_grow_with_the_pool": FULL_KIT}
    part = score_parts(allocator(skipped=skipped), options(allocator=22))["allocator"]
    assert part["ungraded"] == [
        {"id": "cuda", "reason": "needs a CUDA device", "points": 2.0},
        {"id": "full_kit", "reason": "graded by the hiring team's kit", "points": 3.0},
    ]
    assert part["ungraded_points"] == 5.0
    assert (part["score"], part["max_score"]) == (17.0, 17.0)
    timing = next(check for check in part["checks"] if check["name"] in skipped)
    assert (timing["points"], timing["max_points"]) == (0, 2.0)
    assert part["provisional"] == f"checks skipped ({CUDA}; {FULL_KIT})"


def test_a_part_whose_every_check_is_skipped_has_nothing_to_score_here() -> None:
    skipped = dict.fromkeys(ALLOCATOR, "needs Triton, which installs on Linux only")
    part = score_parts(allocator(skipped=skipped), options(allocator=30))["allocator"]
    assert (part["score"], part["max_score"], part["ungraded_points"]) == (0, 0, 30)
    why = skipped["new_pool_is_all_free"]  # a reason the kit does not know: no id
    assert part["ungraded"] == [{"id": None, "reason": why, "points": 30.0}]


def test_a_part_without_checks_says_so_and_scores_nothing() -> None:
    part = score_parts([], options(allocator=15))["allocator"]
    assert (part["score"], part["max_score"], part["ungraded_points"]) == (0, 0, 0)
    assert part["ungraded"] == []
    assert part["note"] == "not graded by this version of the kit"
    assert "provisional" not in part


BROKEN = "import failed: kv_cache_manager.py could not be imported: SyntaxError: expected ':' "


def check(check_id: str, status: str, message: str = "") -> dict:
    return {"id": check_id, "status": status, "message": message}


def syntax_error(file: str) -> dict:
    return {"file": file, "line": 3, "column": 9, "message": "expected ':'", "code": "def f()"}


def test_a_syntax_error_is_blamed_for_each_failure_it_caused_and_no_other() -> None:
    """The checks and the engine check whose import of a file that does not compile failed,
    also through another module (scheduler.py importing the broken file); not a failure with
    another cause, nor a check that passed."""
    checks = [
        check("decode/a", "failed", f"{BROKEN}(kv_cache_manager.py, line 3)"),
        check("decode/b", "failed", "not implemented: manager.free raises NotImplementedError"),
        check("decode/c", "passed"),
        check(
            "scheduler/d",
            "failed",
            "import failed: scheduler.py could not be imported: "
            "SyntaxError: expected ':' (kv_cache_manager.py, line 3)",
        ),
        check("sharing/e", "failed", "import failed: block_allocator.py could not be imported"),
    ]
    report = {
        "parts": {"decode": {"checks": checks[:3]}, "other": {"checks": checks[3:]}},
        "integration": {"status": "failed", "message": BROKEN},
    }
    errors = [syntax_error("block_allocator.py"), syntax_error("kv_cache_manager.py")]
    allocator, manager = with_failures(errors, report)
    assert manager == syntax_error("kv_cache_manager.py") | {
        "checks": ["decode/a", "scheduler/d"],
        "engine_check": True,
    }
    assert (allocator["checks"], allocator["engine_check"]) == (["sharing/e"], False)


def test_an_engine_check_that_passed_or_a_report_without_one_blames_nothing() -> None:
    errors = [syntax_error("kv_cache_manager.py")]
    for report in ({"parts": {}}, {"parts": {}, "integration": {"status": "passed"}}):
        assert with_failures(errors, report)[0]["engine_check"] is False
    assert with_failures([], {"parts": {"decode": {"checks": [check("decode/a", "failed")]}}}) == []


def test_the_environment_says_which_kit_graded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    options = SimpleNamespace(profile=PROFILES["quick"], seed=None, parts=("gather",))
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "block_allocator.py").write_text("class BlockAllocator: ...\n")
    monkeypatch.setattr(grade, "ANSWER_KEY", solutions)  # as in the full kit
    assert grade.environment(options)["kit"] == "full"
    monkeypatch.setattr(grade, "ANSWER_KEY", tmp_path / "absent")  # as in the bundle
    assert grade.answer_key_files() is None
    assert grade.environment(options)["kit"] == "candidate"


@pytest.mark.parametrize(
    ("folder", "package"),
    [("buggy_sub", "buggy_sub"), ("exercises", "exercises"), ("my-sub", "submission"),
     ("class", "submission"), ("torch", "submission"), ("types", "submission"),
     ("kernels", "submission")],
)  # fmt: skip
def test_the_package_is_the_folders_name_unless_it_would_shadow_a_module(
    folder: str, package: str
) -> None:
    """A folder named `torch` imported as `torch` would stand in for torch in its own code and
    in a counterexample."""
    assert grade.package_name(folder) == package


def test_an_event_several_parts_sent_is_flagged_once_in_the_first_of_them() -> None:
    """Each part's worker imports the modules it runs, so an event of an import comes from each
    part that imports the module: it is flagged in the first part, by the statement's order,
    whichever process graded which part first."""
    events = {part: Events() for part in ("sharing", "decode", "gather")}
    for part in events:
        events[part].add("tried to import grader (blocked)")
    events["sharing"].add("tried to import os (blocked)")
    flags = [(flag["part"], flag["message"]) for flag in worker_flags(events)]
    assert flags == [
        ("sharing", "tried to import os (blocked)"),
        ("decode", "tried to import grader (blocked)"),
    ]


def owned(name: str, *rules: str) -> CheckResult:
    """A failed sharing check whose failure broke one of `rules`."""
    return replace(
        result(name, 2, "failed", "num_free must drop by n after allocate(n)"),
        id=f"sharing/{name}",
        part="sharing",
        rules=rules,
    )


def plugin_of(*results: CheckResult) -> SimpleNamespace:
    """What `leave_to_the_owners` reads of a plugin: its results by id."""
    return SimpleNamespace(results={check.id: check for check in results})


def test_a_failure_on_another_parts_rule_is_left_to_that_part_where_its_check_fails_on_it():
    """Left out of the part's maximum (not pending: the part is not provisional), its message
    naming the owner's check and the failure; charged where the owner's checks failed, but on
    another rule, and where its rule is its own part's."""
    left, other_rule, own = (
        owned("random_incref_and_free", FREE_BLOCKS),
        owned("bad_reference_calls_are_refused", "decode:decode_block"),
        owned("fork_shares_every_block"),
    )
    checks = allocator(failed={"random_allocate_and_free", "freed_blocks_are_reused"})
    checks[ALLOCATOR_ORDER.index("random_allocate_and_free")].rules = (FREE_BLOCKS,)
    graded = plugin_of(*checks, left, other_rule, own)
    chosen = options(allocator=15, decode=15, sharing=10)
    grade.leave_to_the_owners(graded, None, chosen)
    assert (left.status, left.points) == ("skipped", 0)
    assert (other_rule.status, own.status) == ("failed", "failed")
    assert left.message == (
        "not graded here: it fails on a rule of the allocator part, which "
        "allocator/random_allocate_and_free fails on too: num_free must drop by n after "
        "allocate(n)"
    )
    sharing = score_parts(list(graded.results.values()), chosen)["sharing"]
    assert sharing["ungraded"] == [
        {"id": "other_part", "reason": "fails on another part's rule, which that part grades",
         "points": 3.33}
    ]  # fmt: skip
    assert "provisional" not in sharing
    assert all("rules" not in check for check in sharing["checks"])


def test_a_failure_that_may_break_either_of_two_rules_is_left_to_the_owner_that_fails() -> None:
    """A manager's free count is its allocator's (part 1) or its own (part 2): a sharing check
    that finds it wrong is left to the part whose check breaks the rule, the first such rule
    where both do, and charged where neither does; a part 2 check that fails on part 1's bug
    breaks no rule of part 2's."""

    def decode_fails_free_count() -> CheckResult:
        check = result("free_returns_every_block", 2, "failed", "len(free_blocks) is 4")
        return replace(check, id="decode/free_returns_every_block", part="decode",
                       rules=(FREE_BLOCKS, FREE_COUNT))  # fmt: skip

    chosen = options(allocator=15, decode=15, sharing=10)
    both = (FREE_BLOCKS, FREE_COUNT)
    # A sharing check graded again on the kit's allocator keeps part 2's rule alone: it is not
    # left to part 2, whose check fails only on part 1's bug.
    cases = [(False, both, "decode"), (True, both, "allocator"), (None, both, None),
             (True, (FREE_COUNT,), None)]  # fmt: skip
    for allocator_fails, rules, left_to in cases:
        checks = allocator(failed={"random_allocate_and_free"} if allocator_fails else set())
        if allocator_fails:
            checks[ALLOCATOR_ORDER.index("random_allocate_and_free")].rules = (FREE_BLOCKS,)
        count = owned("fork_and_free_in_any_order", *rules)
        decode = [decode_fails_free_count()] if allocator_fails is not None else []
        grade.leave_to_the_owners(plugin_of(*checks, *decode, count), None, chosen)
        if left_to is None:
            assert count.status == "failed", count.message
        else:
            assert count.status == "skipped", count.message
            assert count.message.startswith(
                f"not graded here: it fails on a rule of the {left_to} part"
            ), count.message


def test_a_broken_rule_is_recorded_whatever_the_assertion_says() -> None:
    """The rule crosses from the process beside with its check's result (a pickle); an
    assertion without a message still breaks it."""
    with pytest.raises(RuleBroken) as raised, judged_by(FREE_BLOCKS):
        raise AssertionError(said("num_free must drop by n after allocate(n)"))
    assert (raised.value.args[0], raised.value.rules) == (
        "num_free must drop by n after allocate(n)",
        (FREE_BLOCKS,),
    )
    with pytest.raises(RuleBroken, match=r"^$"), judged_by(FREE_BLOCKS):
        raise AssertionError
    again = pickle.loads(pickle.dumps(owned("copy_on_write", FREE_BLOCKS, FREE_COUNT)))
    assert again.rules == (FREE_BLOCKS, FREE_COUNT)


def test_a_failure_that_breaks_a_rule_of_its_part_has_it_as_cause_and_is_labelled_by_its_harm():
    """Its cause in the report, its severity what breaking the rule harms: an eviction order not
    kept is contract in a check marked safety. A failure on another part's rule that stayed
    here, or one that broke no rule, has no cause, and keeps its check's severity."""
    own = replace(result("random_allocate_and_free", 6, "failed"), rules=(FREE_BLOCKS,))
    evicted = CheckResult("caching/random_prompts_decodes_and_frees", "caching",
                          "random_prompts_decodes_and_frees", "failed", 0, 7, "safety",
                          "took block 0", rules=(EVICTION_ORDER,))  # fmt: skip
    elsewhere = owned("random_incref_and_free", FREE_BLOCKS)
    plain = result("new_pool_is_all_free", 2, "failed")
    kept = replace(result("freed_blocks_are_reused", 2), rules=(FREE_BLOCKS,))
    grade.name_causes(plugin_of(own, evicted, elsewhere, plain, kept))
    assert [(check.cause, check.severity) for check in (own, evicted, elsewhere, plain, kept)] == [
        (FREE_BLOCKS, "safety"), (EVICTION_ORDER, "contract"), ("", "safety"), ("", "safety"),
        ("", "safety"),
    ]  # fmt: skip
    rows = score_parts([own, plain], options(allocator=15))["allocator"]["checks"]
    assert [row.get("cause") for row in rows] == [FREE_BLOCKS, None]
    assert not any("results_differ" in row for row in rows)


def differing(name: str) -> CheckResult:
    """An allocator timing whose results, the code's own, differ from the contract."""
    misstep = "allocation 0 (of 3) handed out 7, not a free block"
    check = result(
        name, ALLOCATOR[name], "failed", f"its results differ from the contract: {misstep}"
    )
    return replace(check, severity="speed", results_differ=misstep)


def test_a_timing_of_results_that_differ_from_the_contract_is_left_to_the_check_that_found_it():
    """Not timed where a check of its part that times nothing fails: out of the part's maximum,
    not pending, its message naming the most serious such check. Where none fails, it is the one
    check that finds the slip: charged here, as a contract slip, not as slow code."""
    checks = allocator(failed={"freed_blocks_are_reused", "random_allocate_and_free"})
    checks[ALLOCATOR_ORDER.index("freed_blocks_are_reused")].severity = "contract"
    timings = [differing(name) for name in sorted(TIMINGS)]
    grade.not_timed(plugin_of(*checks, *timings))
    assert [(check.status, check.points, check.severity) for check in timings] == [
        ("skipped", 0, "speed")
    ] * 2
    assert timings[0].message == (
        "not timed: its results differ from the contract (see allocator/random_allocate_and_free"
        "): allocation 0 (of 3) handed out 7, not a free block"
    )  # the most serious, not the first
    graded = [check for check in checks if check.id.split("/")[1] not in TIMINGS] + timings
    scored = score_parts(graded, options(allocator=15))["allocator"]
    assert [item["id"] for item in scored["ungraded"]] == ["not_timed"]
    assert "provisional" not in scored
    alone = differing("allocate_and_free_speed")
    grade.not_timed(plugin_of(*allocator(), alone))
    assert (alone.status, alone.severity, alone.cause) == ("failed", "contract", TIMED_RESULTS)
