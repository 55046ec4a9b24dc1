"""CPU-time measurement: the worker's CPU time read from outside, rounds, and confirmation."""

import time
from itertools import count

import pytest

from grader.sandbox.process import Limits, Sandbox
from grader.sandbox.proxy import Submission
from grader.timing import Timed, time_confirmed, time_interleaved

SPIN = b"""
import os

def spin(n):
    total = 0
    for i in range(n):
        total += i
    return total

def spin_in_a_child(n):
    pid = os.fork()
    if pid == 0:
        spin(n)
        os._exit(0)
    os.waitpid(pid, 0)
    return 0
"""


class FakeSandbox:
    """A worker whose CPU clock advances by the next of `costs` on each call."""

    def __init__(self, costs: list[float]) -> None:
        self.costs, self.clock, self.reads = iter(costs), 0.0, count()

    def cpu_seconds(self) -> float:
        if next(self.reads) % 2:  # the read after the call
            self.clock += next(self.costs)
        return self.clock


class FakeBenchmark:
    def pedantic(self, target, rounds: int, warmup_rounds: int) -> None:
        for _ in range(warmup_rounds + rounds):
            target()


def timed(costs: list[float]) -> Timed:
    return Timed(lambda: None, FakeSandbox(costs))


def test_the_least_cpu_time_after_the_warm_up_is_kept():
    calls = {"reference": timed([9.0, 2.0, 3.0]), "candidate": timed([9.0, 4.0, 5.0])}
    best = time_interleaved(FakeBenchmark(), calls, rounds=2)
    assert best == {"reference": 2.0, "candidate": 4.0}


def test_a_failing_ratio_is_measured_again_and_a_passing_one_is_not():
    passing = {"reference": timed([1.0, 1.0]), "candidate": timed([1.0, 1.0])}
    assert time_confirmed(FakeBenchmark(), passing, 1, fails=lambda best: False) == {
        "reference": 1.0,
        "candidate": 1.0,
    }  # only warm-up + one round were drawn: a second measurement would exhaust the costs
    calls = {"reference": timed([1.0, 1.0, 1.0]), "candidate": timed([1.0, 9.0, 2.0])}
    best = time_confirmed(FakeBenchmark(), calls, 1, fails=lambda best: best["candidate"] > 3)
    assert best == {"reference": 1.0, "candidate": 2.0}


@pytest.fixture
def worker():
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    sandbox = Sandbox({"spin.py": SPIN}, limits, {}, time.monotonic() + 1200)
    yield Submission(sandbox, "candidate").module("spin"), sandbox
    sandbox.close()


def test_the_worker_cpu_time_is_read_from_outside_and_counts_its_children(worker):
    module, sandbox = worker
    before = sandbox.cpu_seconds()
    module.spin(3_000_000)
    own = sandbox.cpu_seconds() - before
    module.spin_in_a_child(3_000_000)
    with_child = sandbox.cpu_seconds() - before - own
    assert own > 0.01, own
    assert with_child > own / 4, (own, with_child)  # the child's time is counted, not hidden
