"""Grading profiles: how hard the checks look. Both run every check; `full` looks longer.

Typical wall time of a whole grading (`python -m grader SUBMISSION`, every part, the engine check
included) on a 2-core machine without a GPU (the kernel's GPU checks skipped), on idle cores,
measured several times over an hour in which the machine's speed drifted, the parts split
between two processes (`grader/beside.py`): the answer key takes about 12 s with `quick` and 43 to
47 s with `full`; the stubs take 3 s. A slow submission takes longer (its timing rounds, its
calls up to `--call-timeout`), as does one whose failures take long to shrink: each part's checks
stop at its budget (`--part-timeout`), and the whole grading at the profile's
(`budget_seconds`).

The grade never depends on the environment: hypothesis loads its `ci` profile by itself whenever
`CI` is set, so the grader builds its settings from the profile alone and applies them to every
property explicitly. Without `--seed` the examples are derandomized (the same on every machine);
with `--seed N` they come from N instead, a fresh set that a candidate cannot have seen.
"""

from dataclasses import dataclass

from hypothesis import HealthCheck, settings


@dataclass(frozen=True)
class Profile:
    name: str
    max_examples: int  # per property
    stateful_steps: int  # per state-machine example
    timing_rounds: int  # per timed workload, with the reference's; a third for a clear pass
    shrinks: int  # per failing property: how many smaller counterexamples (`shrinking.py`)
    budget_seconds: float  # the whole grading of one submission, whatever it does


RUNS_PER_SHRINK = 16  # examples a failure's shrinking and explaining may run, per shrink, in all

PROFILES = {
    "quick": Profile(
        "quick",
        max_examples=40,
        stateful_steps=30,
        timing_rounds=15,
        shrinks=25,
        budget_seconds=300.0,
    ),
    "full": Profile(
        "full",
        max_examples=200,
        stateful_steps=50,
        timing_rounds=60,
        shrinks=100,
        budget_seconds=900.0,
    ),
}


def hypothesis_settings(profile: Profile, seeded: bool, **overrides: object) -> settings:
    """The settings of every property the grader runs (seeded: `--seed` gave the randomness)."""
    return settings(
        max_examples=profile.max_examples,
        stateful_step_count=profile.stateful_steps,
        derandomize=not seeded,
        database=None,
        deadline=None,
        print_blob=True,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        **overrides,
    )
