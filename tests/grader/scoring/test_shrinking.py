"""A failing property's shrinking and explaining run at most `RUNS_PER_SHRINK` examples per step
of the profile's shrinks; a failure that needs fewer is shrunk and explained as Hypothesis alone
does it."""

import json
import subprocess
import sys

import hypothesis.core
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.internal.conjecture import engine

from grader import KIT_ROOT
from grader.scoring import shrinking
from grader.scoring.profiles import PROFILES, RUNS_PER_SHRINK, hypothesis_settings

QUICK = PROFILES["quick"]
NOTE = "# or any other generated value"
# A grading's plugin, configured as pytest configures it (in a process of its own: it sets up
# Hypothesis for the whole process), and the bounds Hypothesis then has.
CONFIGURED = """
import json, types
from dataclasses import replace
import hypothesis.core
from hypothesis.internal.conjecture import engine
from grader.sandbox.process import Limits
from grader.scoring.plugin import GradingPlugin
from grader.scoring.profiles import PROFILES

plugin = GradingPlugin(files={}, package="x", reference_files={}, seeded=False, limits=Limits(),
                       grading_profile=replace(PROFILES["quick"], shrinks=3), worker_env={})
plugin.pytest_configure(types.SimpleNamespace(addinivalue_line=lambda *_: None))
runner = hypothesis.core.ConjectureRunner
print(json.dumps([engine.MAX_SHRINKS, runner.__name__, runner.runs]))
"""


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `shrinking.bound` sets in this process, put back after the test."""
    for name in ("MAX_SHRINKS", "MAX_SHRINKING_SECONDS"):
        monkeypatch.setattr(engine, name, getattr(engine, name))
    monkeypatch.setattr(hypothesis.core, "ConjectureRunner", hypothesis.core.ConjectureRunner)
    monkeypatch.setattr(shrinking.BoundedRunner, "runs", shrinking.BoundedRunner.runs)


def failure(free_values: int) -> tuple[int, str]:
    """A property of `a` (it fails from 10 up) and of `free_values` other values that play no
    part: how many examples ran from its first failure on, and the failing case it reports."""
    ran: list[int] = []
    free = (st.lists(st.integers()), st.text(), st.binary(), st.lists(st.booleans()), st.floats())

    @hypothesis_settings(QUICK, seeded=False)
    @given(a=st.integers(), **{f"free_{index}": free[index] for index in range(free_values)})
    def below_ten(a: int, **_: object) -> None:
        ran.append(a)
        assert a < 10

    with pytest.raises(AssertionError) as failed:
        below_ten()
    first = next(index for index, a in enumerate(ran) if a >= 10)
    return len(ran) - first, failed.value.__notes__[0]


def test_a_failure_runs_at_most_its_bound_of_examples(restored: None) -> None:
    engine.MAX_SHRINKS = QUICK.shrinks
    unbounded, _ = failure(5)
    shrinking.bound(QUICK)
    bounded, case = failure(5)
    runs = RUNS_PER_SHRINK * QUICK.shrinks
    assert bounded < runs + 3 < unbounded  # with the failure itself and Hypothesis's replay
    assert "a=10," in case  # shrunk as far as ever: only the explaining was cut short


def test_a_failure_within_its_bound_is_shrunk_and_explained_as_hypothesis_alone_does(
    restored: None,
) -> None:
    """(That the bound binds at all is the test above's.)"""
    engine.MAX_SHRINKS = QUICK.shrinks
    alone = failure(2)
    shrinking.bound(QUICK)
    assert failure(2) == alone
    assert NOTE in alone[1]


def test_a_gradings_plugin_bounds_hypothesis_by_its_profile() -> None:
    done = subprocess.run([sys.executable, "-c", CONFIGURED], cwd=KIT_ROOT, capture_output=True,
                          text=True, timeout=120, check=True)  # fmt: skip
    assert json.loads(done.stdout) == [3, "BoundedRunner", 3 * RUNS_PER_SHRINK]
