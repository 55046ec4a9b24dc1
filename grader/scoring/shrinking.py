"""How far Hypothesis goes with a failing property: bounded by work, never by seconds, so that a
busy machine ends it at the same counterexample.

A failure is shrunk by at most the profile's `shrinks` steps, each to a smaller counterexample,
and its shrinking and explaining (the "# or any other generated value" notes) run at most
`RUNS_PER_SHRINK` times as many examples in all; Hypothesis then replays the smallest failure
found. Explaining tries up to 500 variations of each value drawn, each a run of a state machine
through a worker: without this bound, tens of seconds for one check. A failure whose shrinking
and explaining need fewer runs gets what Hypothesis alone gives. `SHRINK_SECONDS` only guards
against a shrinker stuck on failed attempts, far past what an honest shrink takes.
"""

import math

import hypothesis.core
from hypothesis.internal.conjecture import engine
from hypothesis.internal.conjecture.data import ConjectureData

from grader.scoring.profiles import RUNS_PER_SHRINK, Profile

SHRINK_SECONDS = 300


class BoundedRunner(engine.ConjectureRunner):
    """Hypothesis's runner, which ends its run once shrinking has run `runs` examples."""

    runs = 0  # set by `bound`
    last_shrink_run: float = math.inf  # until shrinking starts

    def shrink_interesting_test_cases(self) -> None:
        self.last_shrink_run = self.call_count + self.runs
        super().shrink_interesting_test_cases()

    def test_function(self, data: ConjectureData) -> None:
        super().test_function(data)
        if self.call_count >= self.last_shrink_run:
            # Ends the run as MAX_SHRINKS does, keeping the smallest failure found (Hypothesis's
            # statistics then say "shrunk test case 500 times", a text fixed at its import).
            self.exit_with(engine.ExitReason.max_shrinks)


def bound(profile: Profile) -> None:
    """Hypothesis, in this process, shrinks each failure as far as `profile` allows."""
    engine.MAX_SHRINKS = profile.shrinks
    engine.MAX_SHRINKING_SECONDS = SHRINK_SECONDS
    BoundedRunner.runs = RUNS_PER_SHRINK * profile.shrinks
    hypothesis.core.ConjectureRunner = BoundedRunner
