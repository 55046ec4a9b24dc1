"""How far Hypothesis goes with a failing property: bounded by work, never by seconds, so that a
busy machine ends it at the same counterexample.

A failure is shrunk by at most the profile's `shrinks` steps, each to a smaller counterexample,
and its shrinking and explaining (the "# or any other generated value" notes) together run at
most `RUNS_PER_SHRINK` examples per step. Explaining alone tries up to 500 variations of each
value drawn, and a state machine of many calls through a worker pays for each: one prefix-cache
check spent 3 s shrinking and 31 s explaining (1421 examples) before this bound, 8 s after.
The failures of the saved reports (`tests/end_to_end/golden/`, at most 346 examples) stay within
it: their counterexamples are the same.
`SHRINK_SECONDS` only guards against a shrinker stuck on failed attempts, far past what an
honest shrink takes.
"""

import hypothesis.core
from hypothesis.internal.conjecture import engine
from hypothesis.internal.conjecture.data import ConjectureData

from grader.scoring.profiles import Profile

RUNS_PER_SHRINK = 16
SHRINK_SECONDS = 300


class BoundedRunner(engine.ConjectureRunner):
    """Hypothesis's runner, which ends its run once shrinking has run `runs` examples."""

    runs = 0  # set by `bound`

    def shrink_interesting_test_cases(self) -> None:
        self.last_shrink_run = self.call_count + self.runs
        super().shrink_interesting_test_cases()

    def test_function(self, data: ConjectureData) -> None:
        super().test_function(data)
        if self.call_count >= getattr(self, "last_shrink_run", float("inf")):
            self.exit_with(engine.ExitReason.max_shrinks)  # keeps the smallest failure found


def bound(profile: Profile) -> None:
    """Hypothesis, in this process, shrinks each failure as far as `profile` allows."""
    engine.MAX_SHRINKS = profile.shrinks
    engine.MAX_SHRINKING_SECONDS = SHRINK_SECONDS
    BoundedRunner.runs = RUNS_PER_SHRINK * profile.shrinks
    hypothesis.core.ConjectureRunner = BoundedRunner
