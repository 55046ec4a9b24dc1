"""Where a grading runs part 4: natively only where a sandboxed worker can use the GPU
(`grader.sandbox.cuda`), else under Triton's interpreter with the reason in the report."""

import importlib.util

import pytest
import torch

from grader import grade
from grader.parts import ENGINE_PARTS, PARTS
from grader.sandbox import cuda, isolation
from grader.sandbox.process import INTERPRETED, NO_CUDA, Limits
from grader.scoring.profiles import PROFILES
from grader.scoring.rubric import load_rubric


@pytest.fixture
def unsettled():
    """`cuda` with nothing remembered, and as it was again after the test."""
    saved, cuda._settled = cuda._settled, cuda.Settled()
    yield
    cuda._settled = saved


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="the probe runs Triton")
def test_the_probe_runs_in_a_sandboxed_worker_and_says_why_it_sees_no_gpu():
    problem = cuda.probe(isolation.probe(), Limits(), cuda.PROBE_BYTES)
    assert problem.startswith("torch cannot use CUDA here: ")
    assert "cuInit returned" in problem or "the driver's library does not load" in problem
    assert "/dev/nvidia" in problem


def test_a_gpu_the_workers_cannot_use_sends_part_4_to_the_interpreter(monkeypatch, unsettled):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Test GPU")
    asked = []

    def probe(isolation, limits, allocate_bytes):
        asked.append(limits)
        return "torch cannot use CUDA here: no device (cuInit returned 100)"

    monkeypatch.setattr(cuda, "probe", probe)
    assert grade.device_environment("kernel") == {}  # before it is asked: the GPU is assumed
    limits = Limits(memory_bytes=3 << 30)
    found = cuda.settle(isolation.probe(), limits)
    assert found == cuda.settled() == cuda.Settled("Test GPU", probe(None, limits, 0))
    assert asked[0] == limits
    assert not cuda.native()
    assert grade.device_environment("kernel") == grade.device_environment(None) == INTERPRETED
    assert grade.device_environment("allocator") == INTERPRETED
    (error,) = grade.gpu_errors()
    assert "Test GPU" in error
    assert "part 4 ran under Triton's interpreter" in error
    assert error.endswith("The sandboxed probe said: " + found.problem)


def test_a_gpu_whose_name_torch_cannot_read_is_still_said(monkeypatch, unsettled):
    def broken(*_):
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", broken)
    monkeypatch.setattr(cuda, "probe", lambda *_: "torch cannot use CUDA here")
    cuda.settle(isolation.probe(), Limits())
    (error,) = grade.gpu_errors()
    assert "whose name torch cannot read (CUDA driver initialization failed)" in error


def test_a_gpu_the_workers_can_use_runs_part_4_natively(monkeypatch, unsettled):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *_: "Test GPU")
    monkeypatch.setattr(cuda, "probe", lambda *_: "")
    assert cuda.settle(isolation.probe(), Limits()) == cuda.Settled("Test GPU", "")
    assert cuda.native()
    assert grade.device_environment("kernel") == {}
    assert grade.device_environment("allocator") == NO_CUDA
    assert grade.gpu_errors() == []


def test_without_a_gpu_nothing_is_asked(monkeypatch, unsettled):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cuda, "probe", lambda *_: pytest.fail("asked without a GPU"))
    cuda._settled = cuda.Settled("Earlier GPU", "left from an earlier grading")
    assert cuda.settle(isolation.probe(), Limits()) == cuda.Settled()
    assert not cuda.native()
    assert grade.device_environment("kernel") == INTERPRETED
    assert grade.gpu_errors() == []


@pytest.mark.parametrize(
    ("parts", "asks"),
    [(["kernel"], True), (sorted(ENGINE_PARTS), True), (sorted(set(PARTS) - {"kernel"}), False)],
)  # fmt: skip
def test_a_grading_asks_before_its_budget_starts_where_part_4_is_graded(
    monkeypatch, unsettled, parts, asks
):
    """The probe's time is the machine's, not the submission's: its budget starts after it.
    (The grading is stopped as its budget starts: a stand-in.)"""
    events = []

    class Stop(Exception):
        pass

    def budget(options):
        events.append("budget")
        raise Stop

    monkeypatch.setattr(cuda, "settle", lambda *_: events.append("settle"))
    monkeypatch.setattr(grade, "with_budget", budget)
    options = grade.Options(tuple(parts), PROFILES["quick"], None, Limits(), load_rubric(None),
                            isolation.probe("none"))  # fmt: skip
    with pytest.raises(Stop):
        grade.grade(None, options)
    assert events == (["settle", "budget"] if asks else ["budget"])
