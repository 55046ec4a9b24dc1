"""The worker sandbox and the proxy: what candidate code can and cannot reach, and what crosses."""

import resource
import time

import pytest
import torch

from grader import sandbox
from grader.proxy import Iter, RemoteError, Submission
from grader.sandbox import (
    CallTimedOut,
    ImportFailed,
    Limits,
    NotImplementedInSubmission,
    NotSubmitted,
    Sandbox,
    WorkerCrashed,
)
from grader.worker import TENSOR_DTYPES, tensor_from_wire, tensor_to_wire

PROBE = b"""
import os, sys

def environment():
    return dict(os.environ)

def cwd():
    return os.getcwd()

def can_import(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True

def shout():
    print("{'ok': 'fake reply'}")
    return "said"

def allocate(gib):
    return len(bytearray(int(gib * (1 << 30))))

def spin():
    while True:
        pass

def die():
    os._exit(0)

def unfinished():
    raise NotImplementedError("unfinished")

def refuse(kind):
    raise {"value": ValueError, "key": KeyError, "exit": SystemExit}[kind]("no")

class Box:
    def __init__(self):
        self.items = [1, 2]
        self.pool = __import__("torch").zeros(2, 3)

    def echo(self, *args):
        return args

    def consume(self, iterable):
        return [item * 2 for item in iterable]
"""


@pytest.fixture
def probe():
    limits = Limits(memory_bytes=2 << 30, call_seconds=3.0, import_seconds=60.0)
    sandbox = Sandbox({"probe.py": PROBE}, limits, {}, time.monotonic() + 120)
    yield Submission(sandbox, "candidate")
    sandbox.close()


def test_the_kit_is_not_importable_and_an_attempt_is_recorded(probe):
    module = probe.module("probe")
    assert module.can_import("torch")
    for name in ("grader", "solutions", "kernels", "exercises", "tests.checks"):
        assert not module.can_import(name), f"{name} is importable in the worker"
    assert any("'solutions'" in event for event in probe.sandbox.events)


def test_the_environment_is_stripped_and_the_cwd_is_private(probe, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    module = probe.module("probe")
    environment = module.environment()
    assert "CI" not in environment
    assert "SECRET_TOKEN" not in environment
    assert "PYTHONPATH" not in environment
    assert environment["PYTHONHASHSEED"] == "0"
    assert module.cwd().startswith(str(probe.sandbox.home))


def test_prints_reach_the_log_not_the_channel(probe):
    assert probe.module("probe").shout() == "said"
    probe.sandbox.log.flush()
    assert "fake reply" in (probe.sandbox.home / "worker.log").read_text()


def test_values_handles_and_iterators_cross(probe):
    box = probe.module("probe").Box()
    assert box.items == [1, 2]
    assert len(box.ref("items")) == 2
    assert box.echo(1, (2, 3), None, "x") == (1, (2, 3), None, "x")
    assert box.consume(Iter([1, 2, 3])) == [2, 4, 6]
    items, pool = box.fields("items", "pool")
    assert items == [1, 2]
    assert torch.equal(pool, torch.zeros(2, 3))
    assert "(box.items, box.pool)" in probe.transcript.render()
    pool = box.ref("pool")
    pool[1, ...] = torch.tensor([1.0, 2.0, 3.0])
    assert torch.equal(box.pool, torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]))
    assert "box.pool[1, ...] = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float32)" in (
        probe.transcript.render()
    )


def test_a_kit_tool_runs_on_the_submission_modules_from_its_own_copy(probe, tmp_path, monkeypatch):
    tool = tmp_path / "count_tool.py"
    tool.write_text("def describe(module, scale):\n    return [module.__name__, __name__, scale]\n")
    monkeypatch.setitem(sandbox.TOOLS, "count", tool)
    module_name, tool_name, scale = probe.tool("count", "describe", 3, modules=("probe",))
    assert (module_name, tool_name, scale) == ("submission.probe", "kit_tool_count", 3)
    assert "count.describe(probe, 3)" in probe.transcript.render()


def test_only_a_worker_that_may_use_cuda_gets_the_weaker_memory_limit():
    assert sandbox.memory_rlimit({"TRITON_INTERPRET": "1"}) == resource.RLIMIT_AS
    assert sandbox.memory_rlimit(sandbox.NO_CUDA) == resource.RLIMIT_AS
    assert sandbox.memory_rlimit({}) == resource.RLIMIT_DATA


def test_exceptions_keep_their_builtin_class(probe):
    module = probe.module("probe")
    with pytest.raises(ValueError, match="no") as caught:
        module.refuse("value")
    assert isinstance(caught.value, RemoteError)
    with pytest.raises(LookupError):
        module.refuse("key")
    with pytest.raises(RemoteError) as caught:
        module.refuse("exit")
    assert not isinstance(caught.value, SystemExit)


def test_not_implemented_is_not_a_runtime_error(probe):
    with pytest.raises(NotImplementedInSubmission, match="unfinished raises NotImplementedError"):
        probe.module("probe").unfinished()


def test_a_hang_times_out_and_the_next_check_gets_a_fresh_worker(probe):
    module = probe.module("probe")
    with pytest.raises(CallTimedOut):
        module.spin()
    with pytest.raises(CallTimedOut):  # the failure sticks for the rest of the check
        module.cwd()
    probe.sandbox.next_check()
    assert probe.module("probe").cwd()


def test_an_early_exit_is_a_crash(probe):
    with pytest.raises(WorkerCrashed, match="exited with status 0"):
        probe.module("probe").die()


def test_memory_is_limited(probe):
    module = probe.module("probe")
    assert module.allocate(0.5) == 1 << 29
    with pytest.raises(MemoryError):
        module.allocate(3)


def test_missing_and_broken_modules():
    files = {"broken.py": b"raise ImportError('no such thing')\n"}
    sandbox = Sandbox(files, Limits(), {}, time.monotonic() + 60)
    submission = Submission(sandbox, "candidate")
    try:
        with pytest.raises(NotSubmitted, match=r"scheduler\.py was not submitted"):
            submission.module("scheduler")
        with pytest.raises(ImportFailed, match="no such thing"):
            submission.module("broken")
        started = sandbox.process.pid
        with pytest.raises(ImportFailed):  # remembered: not imported again
            submission.module("broken")
        assert sandbox.process.pid == started
    finally:
        sandbox.close()


@pytest.mark.parametrize("dtype", TENSOR_DTYPES)
def test_tensors_cross_bit_exact(dtype):
    values = torch.arange(-6, 6).reshape(3, 4)
    tensor = (values > 0) if dtype == "bool" else values.to(getattr(torch, dtype))
    if tensor.is_floating_point():
        tensor = tensor / 3
    back = tensor_from_wire(tensor_to_wire(tensor.t())["$tensor"])
    assert back.dtype == tensor.dtype
    assert torch.equal(back, tensor.t())
    empty = tensor_from_wire(tensor_to_wire(tensor[:0])["$tensor"])
    assert empty.shape == (0, 4)


def test_unknown_dtypes_are_refused():
    wire = tensor_to_wire(torch.zeros(2))["$tensor"] | {"dtype": "object"}
    with pytest.raises(ValueError, match="unexpected tensor dtype"):
        tensor_from_wire(wire)
