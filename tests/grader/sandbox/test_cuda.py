"""Where a grading runs part 4: natively only where a sandboxed worker can use the GPU
(`grader.sandbox.cuda`), else under Triton's interpreter with the reason in the report."""

import pytest
import torch

from grader import grade
from grader.sandbox import cuda, isolation
from grader.sandbox.process import INTERPRETED, NO_CUDA, Limits


@pytest.fixture
def unsettled():
    """`cuda` with nothing remembered, and as it was again after the test."""
    saved, cuda._problem = cuda._problem, ""
    yield
    cuda._problem = saved


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
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
    assert cuda.settle(isolation.probe(), limits) == cuda.problem() != ""
    assert asked == [limits]
    assert not cuda.native()
    assert grade.device_environment("kernel") == grade.device_environment(None) == INTERPRETED
    assert grade.device_environment("allocator") == INTERPRETED
    (error,) = grade.gpu_errors()
    assert "Test GPU" in error
    assert "part 4 ran under Triton's interpreter" in error
    assert error.endswith("The sandboxed probe said: " + cuda.problem())


def test_a_gpu_the_workers_can_use_runs_part_4_natively(monkeypatch, unsettled):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(cuda, "probe", lambda *_: "")
    assert cuda.settle(isolation.probe(), Limits()) == ""
    assert cuda.native()
    assert grade.device_environment("kernel") == {}
    assert grade.device_environment("allocator") == NO_CUDA
    assert grade.gpu_errors() == []


def test_without_a_gpu_nothing_is_asked(monkeypatch, unsettled):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cuda, "probe", lambda *_: pytest.fail("asked without a GPU"))
    cuda._problem = "left from an earlier grading"
    assert cuda.settle(isolation.probe(), Limits()) == ""
    assert not cuda.native()
    assert grade.device_environment("kernel") == INTERPRETED
    assert grade.gpu_errors() == []
