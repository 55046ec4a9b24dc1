"""The worker sandbox and the proxy: what candidate code can and cannot reach, and what crosses."""

import contextlib
import gc
import resource
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
import torch

from grader.sandbox import launch, process
from grader.sandbox.process import (
    HANGS_PER_PART,
    PART_HUNG,
    BadReply,
    CallTimedOut,
    ImportFailed,
    Limits,
    NotCalled,
    NotImplementedInSubmission,
    NotSubmitted,
    Sandbox,
    WorkerCrashed,
    asks_for_hung,
    hang_key,
    hung_keys,
)
from grader.sandbox.proxy import (
    VALUE_DEPTH,
    Remote,
    RemoteError,
    Submission,
    attribute,
    fields_of_earlier,
    length,
    method,
    remote_error,
)
from grader.sandbox.transcript import Iter
from grader.sandbox.wire import TENSOR_DTYPES, tensor_from_wire, tensor_to_wire

PROBE = b"""
import os, sys, time

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

def sleep():
    time.sleep(3600)

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

    def itself(self):
        return self

    def consume(self, iterable):
        return [item * 2 for item in iterable]

    @property
    def broken(self):
        raise KeyError("gone")

    @property
    def missing(self):
        raise NotImplementedError
"""


def probe_submission(call_seconds: float) -> Submission:
    # Calls here import torch: their limit is generous, so that a busy machine cannot hit it.
    limits = Limits(memory_bytes=2 << 30, call_seconds=call_seconds, import_seconds=600.0)
    sandbox = Sandbox({"probe.py": PROBE}, limits, {}, time.monotonic() + 1200)
    return Submission(sandbox, "candidate")


@pytest.fixture
def probe():
    submission = probe_submission(call_seconds=600.0)
    yield submission
    submission.sandbox.close()


HANG_SECONDS = 1.0  # the call limit of a call that never returns: how long its test waits


@contextlib.contextmanager
def impatient(submission: Submission) -> Iterator[None]:
    """Calls that time out after `HANG_SECONDS`: only for calls that never return; the others
    keep their fixture's limit, which a busy machine cannot reach."""
    sandbox = submission.sandbox
    patient, sandbox.limits = sandbox.limits, replace(sandbox.limits, call_seconds=HANG_SECONDS)
    try:
        yield
    finally:
        sandbox.limits = patient


@pytest.mark.both_kits  # the full kit has solutions/ and full_kit/ to hide
def test_the_kit_is_not_importable_and_an_attempt_is_recorded(probe):
    module = probe.module("probe")
    assert module.can_import("torch")
    for name in ("grader", "solutions", "kernels", "full_kit", "exercises", "tests.grading"):
        assert not module.can_import(name), f"{name} is importable in the worker"
    assert any("'solutions'" in event for event in probe.sandbox.events.shown)


def test_the_environment_is_stripped_and_the_cwd_is_private(probe, monkeypatch):
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    module = probe.module("probe")
    environment = module.environment()
    assert "CI" not in environment
    assert "SECRET_TOKEN" not in environment
    assert "PYTHONPATH" not in environment
    assert environment["PYTHONHASHSEED"] == "0"
    assert module.cwd() == probe.sandbox.cwd


def test_prints_reach_the_log_not_the_channel(probe):
    assert probe.module("probe").shout() == "said"
    assert "fake reply" in probe.sandbox.log_tail()


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


def test_a_batch_gives_what_one_request_each_gives_and_the_same_transcript(probe):
    """Requests sent together come back in order, each entered in the transcript as it is taken,
    as its own request enters it; the first that raises ends the batch, and raises in its turn."""
    box, lines = probe.module("probe").Box(), probe.transcript.lines
    start = len(lines)
    alone = [box.items, len(box.ref("items")), box.echo(1, (2, 3))]
    middle = len(lines)
    batch = [attribute(box, "items"), length(box, "items"), method(box, "echo", 1, (2, 3))]
    assert list(probe.batch(batch)) == alone
    assert [str(line) for line in lines[middle:]] == [str(line) for line in lines[start:middle]]
    assert str(lines[-1]) == "box.echo(1, (2, 3))  # -> (1, (2, 3))"

    chained = probe.batch([method(box, "itself"), fields_of_earlier(0, "same", "items", "items")])
    assert isinstance(next(chained), Remote)
    assert next(chained) == [[1, 2], [1, 2]]
    assert str(lines[-1]) == "(same.items, same.items)  # -> [[1, 2], [1, 2]]"
    chained = probe.batch([method(box, "echo"), fields_of_earlier(0, "echoed", "items")])
    assert next(chained) == ()
    with pytest.raises(TypeError):  # a tuple came back, not an object the worker keeps
        next(chained)

    with pytest.raises(KeyError, match="gone"):
        box.broken  # noqa: B018 (a read, as a check makes it)
    raised = str(lines[-1])
    taken = probe.batch([attribute(box, name) for name in ("items", "broken", "items")])
    entered = len(lines)
    assert next(taken) == [1, 2]
    assert len(lines) == entered + 1  # entered when taken, not before
    with pytest.raises(KeyError, match="gone"):
        next(taken)
    assert str(lines[-1]) == raised
    with pytest.raises(StopIteration):
        next(taken)


def test_a_batch_says_which_read_is_not_implemented(probe):
    box = probe.module("probe").Box()
    taken = probe.batch([length(box, "items"), length(box, "missing")])
    assert next(taken) == 2
    with pytest.raises(NotImplementedInSubmission, match=r"^box\.missing raises NotImplemented"):
        next(taken)


class CannedSandbox:
    """A sandbox whose worker replies `reply` to every request."""

    def __init__(self, reply: dict) -> None:
        self.reply, self.extra_env, self.limits = reply, {}, Limits()
        self.generation = 1

    def request(self, message: dict, seconds: float) -> dict:
        return self.reply

    def fail(self, failure: BaseException) -> None:
        raise failure

    def release(self, handle: int, generation: int) -> None:
        pass


@pytest.mark.parametrize(
    "reply",
    [
        {"error": {"type": "ValueError", "builtin": "ValueError", "message": "", "traceback": ""}},
        {"ok": None},
        {"ok": [[1], None]},  # fewer values than requests, and no error
        {"ok": [[1, 2, 3], None]},
        {"ok": [[1, 2], {"type": "KeyError"}]},  # an error after every request answered
        {"ok": [[1], "KeyError"]},
        {"ok": [[{"$handle": 1, "type": "not a name", "methods": []}, 2], None]},
    ],
    ids=["error", "null", "short", "long", "error-after-all", "error-not-a-dict", "bad-handle"],
)
def test_a_malformed_batch_reply_fails_the_check_as_a_bad_reply(reply: dict) -> None:
    submission = Submission(CannedSandbox(reply), "candidate")
    box = Remote(submission, 1, "Box", [])
    with pytest.raises(BadReply):
        list(submission.batch([attribute(box, "items"), attribute(box, "pool")]))


def nested(depth: int) -> list:
    """`[1]` in `depth` lists more, each with a second item so that none is a plain list."""
    value: list = [1]
    for _ in range(depth):
        value = [value, None]
    return value


@pytest.mark.parametrize("depth", [VALUE_DEPTH - 1, VALUE_DEPTH + 1, 400])
def test_a_value_nested_past_the_limit_is_a_bad_reply_however_the_check_shows_it(depth) -> None:
    submission = Submission(CannedSandbox({"ok": nested(depth)}), "candidate")
    box = Remote(submission, 1, "Box", [])
    if depth < VALUE_DEPTH:
        assert box.items == nested(depth)
    else:
        with pytest.raises(BadReply, match=f"nested more than {VALUE_DEPTH} deep"):
            box.items  # noqa: B018 (a read that returns the value)


def test_a_kit_tool_runs_on_the_submission_modules_from_its_own_copy(probe, tmp_path, monkeypatch):
    tool = tmp_path / "count_tool.py"
    tool.write_text("def describe(module, scale):\n    return [module.__name__, __name__, scale]\n")
    monkeypatch.setitem(launch.TOOLS, "count", tool)
    module_name, tool_name, scale = probe.tool("count", "describe", 3, modules=("probe",))
    assert (module_name, tool_name, scale) == ("submission.probe", "kit_tool_count", 3)
    assert "count.describe(probe, 3)" in probe.transcript.render()


def test_only_a_worker_that_may_use_cuda_gets_the_weaker_memory_limit():
    assert process.memory_rlimit({"TRITON_INTERPRET": "1"}) == resource.RLIMIT_AS
    assert process.memory_rlimit(process.NO_CUDA) == resource.RLIMIT_AS
    assert process.memory_rlimit({}) == resource.RLIMIT_DATA


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
    with impatient(probe), pytest.raises(CallTimedOut):
        module.spin()
    with pytest.raises(CallTimedOut):  # the failure sticks for the rest of the check
        module.cwd()
    probe.sandbox.next_check()
    assert probe.module("probe").cwd()


def test_an_object_of_a_stopped_worker_collected_later_releases_nothing_in_the_next(probe):
    """A handle counts from 1 in each worker: the old worker's box, collected only once the next
    worker holds a box of the same number, must not take that one with it."""
    first_check = Submission(probe.sandbox, "candidate")  # its transcript holds the old box
    old = first_check.module("probe").Box()
    with impatient(first_check), pytest.raises(CallTimedOut):
        first_check.module("probe").spin()
    probe.sandbox.next_check()
    new = probe.module("probe").Box()
    assert object.__getattribute__(new, "_handle") == object.__getattribute__(old, "_handle")
    del old, first_check
    gc.collect()
    assert new.items == [1, 2]


def test_after_two_calls_of_a_part_hang_its_other_calls_fail_at_once() -> None:
    """Each hang costs the call limit once; the part's third call is never sent, whatever it
    is, and a part that starts afresh (its own list) calls again: an import refused that way is
    not an import that failed, kept for the rest of the grading."""
    limits = Limits(memory_bytes=2 << 30, call_seconds=1.0, import_seconds=600.0)
    sandbox = Sandbox({"probe.py": PROBE}, limits, {}, time.monotonic() + 1200)
    call = {"op": "new", "module": "probe"}
    try:
        sandbox.request({"op": "import", "module": "probe"}, 600.0)
        for name in ("spin", "sleep"):
            with pytest.raises(CallTimedOut, match="did not return in time"):
                sandbox.request(call | {"name": name})
            sandbox.next_check()
        assert len(sandbox.part_hangs) == HANGS_PER_PART == 2
        with pytest.raises(CallTimedOut) as refused:
            sandbox.request(call | {"name": "cwd"}, 600.0)
        assert str(refused.value) == PART_HUNG
        assert sandbox.process is None  # not even started again
        submission = Submission(sandbox, "candidate")
        with pytest.raises(NotCalled, match=PART_HUNG):
            submission.module("probe")
        sandbox.part_hangs = []  # the next part's
        submission.module("probe")
        assert "ok" in sandbox.request(call | {"name": "cwd"}, 600.0)
    finally:
        sandbox.close()


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


CHANNEL_ATTACKS = b"""
import os, time

def channels():
    fds = []
    for fd in range(3, 64):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                fds.append(fd)
        except OSError:
            pass
    return fds

def send(data):
    for fd in channels():
        try:
            os.write(fd, data)
        except OSError:  # the request channel's end, which cannot be written
            pass

def close_and_sleep():
    for fd in channels():
        os.close(fd)
    time.sleep(600)

def trickle():
    while True:
        send(b"x")
        time.sleep(0.01)

def flood():
    while True:
        send(b"x" * (1 << 20))

def garbage():
    send(b"garbage\\n")
    return 1

def fifo_log():
    print("before the swap", file=__import__("sys").stderr, flush=True)
    os.mkfifo("fifo")
    os.dup2(os.open("fifo", os.O_RDWR), 2)
    os._exit(3)
"""


@pytest.fixture
def attacker():
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    sandbox = Sandbox({"attack.py": CHANNEL_ATTACKS}, limits, {}, time.monotonic() + 1200)
    yield Submission(sandbox, "candidate")
    sandbox.close()


@pytest.mark.parametrize(
    ("attack", "failure", "says"),
    [
        # bubblewrap holds the channel open too: a closed channel ends at the call's deadline
        ("close_and_sleep", (WorkerCrashed, CallTimedOut), "closed its reply|in time"),
        ("trickle", CallTimedOut, "did not return in time"),
        ("flood", BadReply, "more than 64 MiB"),
        ("garbage", BadReply, "not one the kit's worker sends"),
        ("fifo_log", WorkerCrashed, "before the swap"),
    ],
)
def test_a_broken_channel_fails_the_check_and_the_next_gets_a_fresh_worker(
    attacker, attack, failure, says
):
    module = attacker.module("attack")
    waits = impatient(attacker) if "in time" in says else contextlib.nullcontext()
    with waits, pytest.raises(failure, match=says):  # only an attack that never returns waits
        getattr(module, attack)()
    attacker.sandbox.next_check()
    assert attacker.module("attack").channels()


def test_a_watched_function_reports_the_torch_ops_it_ran(tmp_path, monkeypatch):
    """A kit tool's calls of the candidate's kernel run under the worker's dispatch mode."""
    tool = tmp_path / "calls_tool.py"
    tool.write_text("def run(module, n):\n    return module.attend(n)\n")
    monkeypatch.setitem(launch.TOOLS, "calls", tool)
    attend = b"import torch\n\ndef attend(n):\n    return float((torch.ones(n, n) ** 2).sum())\n"
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    worker = Sandbox({"kernel.py": attend}, limits, {}, time.monotonic() + 1200)
    try:
        launches, ops, value = Submission(worker, "candidate").tool(
            "calls", "run", 2, modules=("kernel",), watch="attend"
        )
    finally:
        worker.close()
    assert (launches, value) == (0, 4.0)
    assert "aten.pow" in ops, ops


def test_a_tensor_must_carry_exactly_the_bytes_its_shape_needs():
    wire = tensor_to_wire(torch.zeros(2))["$tensor"]
    with pytest.raises(ValueError, match="do not make"):
        tensor_from_wire(wire | {"shape": [1 << 40]})
    with pytest.raises(ValueError, match="must be sizes"):
        tensor_from_wire(wire | {"shape": [-1]})


@pytest.mark.parametrize(
    "line",
    [b"[1]", b'{"ok": 1, "error": {}}', b'{"error": 5}', b'{"ok": 1, "events": 3}', b"[" * 10**5],
)
def test_a_reply_the_kit_never_sends_is_refused(line):
    sandbox = Sandbox({}, Limits(), {}, time.monotonic() + 60)
    with pytest.raises(BadReply):
        sandbox.parse(line)


def test_an_exception_whose_builtin_takes_other_arguments_still_comes_back():
    info = {"type": "Odd", "builtin": "UnicodeDecodeError", "message": "m", "traceback": ""}
    error = remote_error(info)
    assert isinstance(error, ValueError)
    assert str(error) == "Odd: m"


def test_a_hang_is_remembered_by_operation_type_and_name_not_by_arguments() -> None:
    call = {"op": "call", "handle": 3, "type": "BlockAllocator", "name": "free", "args": [[1]]}
    assert hang_key(call) == hang_key(call | {"handle": 9, "args": [[2, 3]]})
    for other in ({"type": "KVCacheManager"}, {"name": "allocate"}, {"op": "getattr"}):
        assert hang_key(call) != hang_key(call | other), other
    tool = {"op": "tool", "tool": "engine", "name": "serve", "modules": ["scheduler"]}
    assert hang_key(tool) != hang_key(tool | {"modules": []})
    assert hang_key({"op": "batch", "requests": [call]}) != hang_key(call)


def test_a_batch_that_hung_leaves_its_one_call_hung_and_a_batch_holding_a_hung_kind_is_refused():
    call = {"op": "call", "handle": 3, "type": "KVCacheManager", "name": "allocate_for_decode"}
    reads = [{"op": "getattr", "handle": 4, "type": "Request", "name": name}
             for name in ("seq_len", "block_table")]  # fmt: skip
    batch = {"op": "batch", "requests": [call, *reads]}
    assert hung_keys(batch) == [hang_key(batch), hang_key(call)]
    assert hung_keys(call) == [hang_key(call)]
    other = call | {"name": "free"}
    for ambiguous in ([call, other], [call, {"op": "setitem", "handle": 4, "type": "Tensor"}]):
        assert hung_keys({"op": "batch", "requests": ambiguous}) == [hang_key(
            {"op": "batch", "requests": ambiguous})]  # fmt: skip
    hung = {hang_key(call)}
    assert asks_for_hung(batch, hung)
    assert asks_for_hung(call | {"handle": 9}, hung)
    assert not asks_for_hung({"op": "batch", "requests": reads}, hung)
    assert not asks_for_hung(other, hung)


def test_a_method_that_hung_in_a_batch_is_not_called_again_alone() -> None:
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    sleeper = b"class Sleeper:\n    value = 1\n    def sleep(self):\n" \
              b"        __import__('time').sleep(3600)\n"  # fmt: skip
    sandbox = Sandbox({"sleeper.py": sleeper}, limits, {}, time.monotonic() + 1200)
    try:
        sandbox.request({"op": "import", "module": "sleeper"})
        made = sandbox.request({"op": "new", "module": "sleeper", "name": "Sleeper"})
        target = {"handle": made["ok"]["$handle"], "type": "Sleeper"}
        call = {"op": "call", **target, "name": "sleep", "args": [], "kwargs": {}}
        read = {"op": "getattr", **target, "name": "value"}
        with pytest.raises(CallTimedOut):  # a sleep that never ends: 1 s is as good as any limit
            sandbox.request({"op": "batch", "requests": [call, read]}, 1.0)
        sandbox.next_check()
        with pytest.raises(NotCalled, match="not called again"):
            sandbox.request(call, 1.0)
        assert sandbox.process is None  # refused before a worker was started again
        sandbox.request(read)  # a read of the batch is sent (the handle is gone with the worker)
        assert sandbox.process is not None
    finally:
        sandbox.close()


def test_every_message_of_a_call_that_hung_says_so_in_the_words_grading_looks_for() -> None:
    """`grade.hung_parts` finds a part whose calls hung by `DID_NOT_RETURN` in its messages."""
    assert all(process.DID_NOT_RETURN in said for said in (process.HANG, process.HUNG, PART_HUNG))
