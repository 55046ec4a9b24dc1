"""The grading process beside (`grader/beside.py`): its progress lines come through as it writes
them, its outcome once it ends; a child that fails, dies or hangs is reported, never waited for
past its time; and the parts split into the two groups whose dearer one costs least, each part
in one."""

import json
import subprocess
import sys
from dataclasses import replace
from types import MappingProxyType

import pytest

from grader import KIT_ROOT, grade
from grader.grade import split_parts
from grader.parts import PARTS
from grader.scoring.profiles import PROFILES

# Each case forks from a process of its own with no thread (as `grade` does), not from pytest's.
CASES = """
import json, os, sys, time
from grader.beside import Beside

def fine(stream):
    stream.write("  allocator   1/2 checks\\n  allocator   2 checks\\n")
    return {"results": {"a": 1}, "text": "x" * 200_000}

def fails(stream):
    raise ValueError("a check module did not import")

def dies(stream):
    os._exit(3)

def hangs(stream):
    time.sleep(600)

run = {"fine": fine, "fails": fails, "dies": dies, "hangs": hangs}[sys.argv[1]]
beside = Beside.fork(run, ("caching",))
shown = []
deadline = time.monotonic() - 59.0 if sys.argv[1] == "hangs" else time.monotonic() + 60
try:
    outcome = beside.outcome(deadline, shown.append)
    print(json.dumps({"shown": shown, "results": outcome["results"], "size": len(outcome["text"])}))
except RuntimeError as error:
    print(json.dumps({"shown": shown, "error": str(error), "status": beside.stop()}))
"""


def case(name: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CASES, name], cwd=KIT_ROOT, capture_output=True,
                          text=True, timeout=300, check=True)  # fmt: skip
    return json.loads(done.stdout)


def test_the_lines_and_the_outcome_come_through_whole():
    fine = case("fine")
    assert fine["shown"] == ["  allocator   1/2 checks", "  allocator   2 checks"]
    assert fine["results"] == {"a": 1}
    assert fine["size"] == 200_000  # more than a pipe holds: read while it is written


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("fails", "ValueError: a check module did not import"),
        ("dies", "ended with status 3"),
        ("hangs", "did not end in time"),
    ],
)
def test_a_child_that_fails_dies_or_hangs_is_reported(name: str, said: str):
    outcome = case(name)
    assert said in outcome["error"]
    assert outcome["shown"] == []


@pytest.mark.parametrize("profile", PROFILES)
def test_the_parts_split_in_two_of_about_equal_cost(profile: str):
    parts = tuple(PARTS)
    assert all(set(PARTS[part].cost) == set(PROFILES) for part in parts)
    here, there = split_parts(parts, profile)
    assert sorted(here + there) == sorted(parts)
    assert here == tuple(part for part in parts if part in here)  # each in the order given
    cost = {name: sum(PARTS[part].cost[profile] for part in group) for name, group in
            (("here", here), ("there", there))}  # fmt: skip
    dearest = max(PARTS[part].cost[profile] for part in parts)
    assert 0 < cost["here"] <= cost["there"] <= cost["here"] + dearest
    assert split_parts(("caching",), profile) == (("caching",), ())
    assert split_parts(("caching", "kernel"), profile) == (("kernel",), ("caching",))


def test_the_split_is_the_best_one_where_dearest_first_is_not(monkeypatch):
    """Costs 3, 3, 2, 2, 2: dearest first, each to the cheaper group, gives 7 against 5; the
    best split is 6 against 6."""
    costs = dict(zip(PARTS, (3, 3, 2, 2, 2), strict=False))
    parts = {part: replace(PARTS[part], cost=MappingProxyType({"quick": cost}))
             for part, cost in costs.items()}  # fmt: skip
    monkeypatch.setattr(grade, "PARTS", parts)
    here, there = split_parts(tuple(parts), "quick")
    assert sorted(sum(costs[part] for part in group) for group in (here, there)) == [6, 6]


def test_parts_that_use_cuda_stay_here() -> None:
    here, there = split_parts(tuple(PARTS), "quick", here_only=(part for part in ["kernel"]))
    assert "kernel" in here
    assert there
    split = split_parts(("kernel", "caching"), "quick", here_only=["kernel"])
    assert split == (("kernel",), ("caching",))
