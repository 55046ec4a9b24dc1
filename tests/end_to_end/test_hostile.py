"""Hostile submissions: the answer key (or a stub) with one file edited to attack the grader.

Each one must score 0 in the parts whose checks reach its code and keep full marks in a part they
do not reach (the allocator's checks import only `block_allocator.py`), and the grader must
write its own report with no error of its own. Every allocator method is reached by every other
part too (the manager allocates through it), so an allocator attack has no untouched part.

Most of them import what the file rule refuses (`os`, `__main__`...), and are graded with it off
(`guarded=False`): their tests are about what stops them when they run. Those marked `guarded`
are graded as users grade: the file rule is what stops them.
"""

import marshal
import re
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.parts import PARTS
from grader.sandbox.process import (
    DID_NOT_RETURN,
    EVENT_CHARS,
    EVENTS_SHOWN,
    HANGS_PER_PART,
    HUNG,
    PART_HUNG,
)
from tests.grading import (
    EXERCISES,
    KIT_ROOT,
    NOT_AS_ASKED,
    SOLUTIONS,
    VERDICTS_ONLY,
    Edit,
    Graded,
    build_submission,
    concurrently,
    grade,
)
from tests.grading import selected_params as selected

ALLOCATE_BODY = '"""Take `n` free blocks (reference count 1 each); all or nothing. O(n)."""\n'
MANAGER_IMPORTS = "from .block_allocator import BlockAllocator\n"  # solutions/kv_cache_manager.py
STUB_IMPORTS = "\nimport torch\n"  # exercises/kv_cache_manager.py
MANAGER_INIT = "        if block_size < 1:\n"
GATHER_TAIL = "        return rows[: req.seq_len]\n"
ALLOCATOR_IMPORTS = "from operator import index\n"
POOL_SIZE = "        num_blocks = index(num_blocks)\n"  # BlockAllocator.__init__
POP_ITEMS = "        block_ids = [self._free.popitem()[0] for _ in range(n)]\n"
LOOP_IN_A_METHOD = "        while True:\n            pass\n"
SEGFAULT_IN_A_METHOD = "        ctypes.string_at(0)\n"
FAKE_REPLY = '{"ok": null, "events": []}'
FAKE_SCORE = "score 100 / 100: all checks passed"
FAKE_REPORT = '{"score": 100.0, "max_score": 100.0, "parts": {}, "errors": []}'
# The answer key's allocator as bytecode, loaded by `marshal` reached through `zipimport` and run
# as a function of the stub's globals, after the stub's own classes: it replaces them.
STUB_TAIL = '        raise NotImplementedError("BlockAllocator.ref_count")\n'
BYTECODE = marshal.dumps(compile((SOLUTIONS / "block_allocator.py").read_text(), "key", "exec"))
BYTECODE_REPLAY = f"""

import zipimport

type(lambda: 0)(zipimport.marshal.loads(bytes.fromhex({BYTECODE.hex()!r})), globals())()
"""
OWN_WORKLOAD = """import dataclasses

dataclasses.sys.modules["__main__"].WORKLOADS = {}
"""
FLOOD = """
import itertools
import sys

_events = next(finder.events for finder in sys.meta_path if hasattr(finder, "events"))
_numbers = itertools.count()


def _flood():  # 25 new 300-character events on each new pool (in the worker's own list)
    _events.extend(f"event {next(_numbers):0294d}" for _ in range(25))
"""


@dataclass(frozen=True)
class Hostile:
    id: str
    edits: tuple[Edit, ...]
    zero: tuple[str, ...]  # parts whose checks reach the hostile code: they must score 0
    full: tuple[str, ...] = ("allocator",)  # parts they do not reach: full marks
    says: str = ""  # what each failed check of a zero part must say
    options: tuple[str, ...] = ()
    on_stub: bool = False  # kv_cache_manager.py is the exercise stub, not the answer key
    stubs: tuple[str, ...] = ()  # other files that are the exercise stubs, not the answer key
    guarded: bool = False  # graded with the file rule on (the others: off, `tests/unguarded.py`)

    @property
    def parts(self) -> str:
        return ",".join(self.zero + self.full)

    @property
    def inputs(self) -> tuple[tuple[str, ...], tuple[Edit, ...], tuple[str, ...], bool]:
        """What its grading is made of: the stub files it keeps, its edits of the answer key, the
        grader's options, and whether the file rule is on. Hostiles alike in it are graded once."""
        stubs = self.stubs + (("kv_cache_manager.py",) if self.on_stub else ())
        options = ("--parts", self.parts, *self.options, *VERDICTS_ONLY)
        return stubs, self.edits, options, self.guarded


def at_import(code: str, stub: bool = False) -> tuple[Edit, ...]:
    """`code` run when kv_cache_manager.py is imported."""
    anchor = STUB_IMPORTS if stub else MANAGER_IMPORTS
    return (Edit("kv_cache_manager.py", anchor, f"{anchor}\n{code}\n"),)


HOSTILES = [
    Hostile(
        "infinite_loop_in_allocate",
        (Edit("block_allocator.py", ALLOCATE_BODY, f"{ALLOCATE_BODY}{LOOP_IN_A_METHOD}"),),
        zero=("allocator",),
        full=(),
        says="time",  # "did not return in time", or the part's "time budget" once it is spent
        options=("--call-timeout", "3", "--part-timeout", "8"),
    ),
    Hostile(
        "infinite_loop_at_import",
        at_import("while True:\n    pass"),
        zero=("decode",),
        says="could not be imported",
        options=("--import-timeout", "10"),
    ),
    Hostile(
        "exit_at_import", at_import("import os\n\nos._exit(0)"), zero=("gather",), says="exited"
    ),
    Hostile(
        "segfault_in_a_method",
        (
            Edit("kv_cache_manager.py", MANAGER_INIT, f"{SEGFAULT_IN_A_METHOD}{MANAGER_INIT}"),
            Edit("kv_cache_manager.py", MANAGER_IMPORTS, f"import ctypes\n\n{MANAGER_IMPORTS}"),
        ),
        zero=("decode",),
        says="SIGSEGV",
    ),
    Hostile(
        "allocates_64_gib_at_import",
        at_import("BALLAST = torch.empty(64 << 30, dtype=torch.uint8)"),
        zero=("gather",),
        says="could not be imported",
    ),
    Hostile(  # never run: the grader refuses the file before any worker sees it
        "runs_code_it_decodes",
        at_import("run = exec\nrun(bytes.fromhex('783d31').decode())"),
        zero=("decode",),
        says="kv_cache_manager.py is not run: line",
        guarded=True,
    ),
    Hostile(  # the answer key's allocator, compiled and run from its bytecode, in the stub
        "replays_the_answer_keys_bytecode",
        (Edit("block_allocator.py", STUB_TAIL, f"{STUB_TAIL}{BYTECODE_REPLAY}"),),
        zero=("allocator",),
        full=(),
        says="imports zipimport, a module outside the contract's list",
        stubs=("block_allocator.py",),
        guarded=True,
    ),
    Hostile(  # the same with the file rule off: the key's full marks, so the rule is what stops it
        # (`scan.decoded_code` lists `marshal.loads`, not `zipimport.marshal.loads`)
        "replays_the_answer_keys_bytecode_with_the_rule_off",
        (Edit("block_allocator.py", STUB_TAIL, f"{STUB_TAIL}{BYTECODE_REPLAY}"),),
        zero=(),
        stubs=("block_allocator.py",),
    ),
    Hostile(  # its timed workload replaced by one that allocates nothing, reached through sys
        "replaces_its_timed_workload_through_dataclasses",
        (Edit("block_allocator.py", ALLOCATOR_IMPORTS, f"{ALLOCATOR_IMPORTS}{OWN_WORKLOAD}"),),
        zero=("allocator",),
        full=(),
        says="reads dataclasses.sys, which is the module sys",
        guarded=True,
    ),
    Hostile(
        "imports_the_answer_key",
        at_import("import solutions"),
        zero=("decode",),
        says="could not be imported",
    ),
    Hostile(
        "prints_fake_replies_and_scores",
        at_import(
            "import os\nimport sys\n\n"
            f"for line in ({FAKE_REPLY!r}, {FAKE_SCORE!r}):\n"
            "    print(line, flush=True)\n"
            "    sys.__stdout__.write(line + '\\n')\n"
            "    sys.__stdout__.flush()\n"
            "    os.write(1, (line + '\\n').encode())",
            stub=True,
        ),
        zero=("decode",),
        says="not implemented",
        on_stub=True,
    ),
    Hostile(
        "writes_fake_reports",
        at_import(
            "import contextlib\nfrom pathlib import Path\n\n"
            "for folder in (Path.cwd(), Path.cwd().parent):\n"
            "    with contextlib.suppress(OSError):  # where it may write\n"
            f"        (folder / 'report.json').write_text({FAKE_REPORT!r})",
            stub=True,
        ),
        zero=("decode",),
        says="not implemented",
        on_stub=True,
    ),
    Hostile(
        "floods_integrity_events",
        (
            Edit("block_allocator.py", ALLOCATOR_IMPORTS, ALLOCATOR_IMPORTS + FLOOD),
            Edit("block_allocator.py", POOL_SIZE, f"        _flood()\n{POOL_SIZE}"),
        ),
        zero=(),
    ),
    Hostile(  # 200,000 empty lists in 0.6 MB: the count is refused before any is decoded
        "replies_with_too_many_values",
        (
            Edit(
                "block_allocator.py",
                ALLOCATE_BODY,
                f"{ALLOCATE_BODY}        return [[]] * 200_000\n",
            ),
        ),
        zero=("allocator",),
        full=(),
        says="values or 100,000 lists in one reply",
    ),
    Hostile(  # bounded: 64 children at most, each exits at once, should the filter let them
        "forks_processes",
        at_import(
            "import os\n\n"
            "started = 0\n"
            "for _ in range(64):\n"
            "    try:\n"
            "        if os.fork() == 0:\n"
            "            os._exit(0)\n"
            "    except OSError:  # refused: the worker of a CPU part starts no process\n"
            "        break\n"
            "    started += 1\n"
            "if started:\n"
            "    raise RuntimeError(f'started {started} processes')",
            stub=True,
        ),
        zero=("decode",),
        says="not implemented",
        on_stub=True,
    ),
]


@dataclass(frozen=True)
class Attack:
    """A buggy submission graded with and without `patch`, which must gain nothing in `part`;
    where `caught` is given, a failed check of the patched one says it (so the patch ran)."""

    part: str
    bug: tuple[Edit, ...]
    patch: tuple[Edit, ...]
    caught: str | None = None  # None: the patch acts where no check can see it

    def hostiles(self, name: str) -> tuple[Hostile, Hostile]:
        """The buggy submission alone and with the patch, each graded on `part` alone."""
        plain = Hostile(f"{name}_plain", self.bug, zero=(self.part,), full=())
        return plain, Hostile(f"{name}_patched", self.bug + self.patch, zero=(self.part,), full=())


TORCH_PATCHES = """\
torch.equal = lambda *args, **kwargs: True
torch.allclose = lambda *args, **kwargs: True
torch.Tensor.equal = lambda *args, **kwargs: True
torch.Tensor.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None"""
# The worker's timed workloads (`grader/sandbox/workloads.py`, loaded by the worker, which runs as
# __main__, as `workloads`) replaced, or run on other inputs than the grader asked for.
WORKLOAD_PATCH = """\
import __main__

if hasattr(__main__, "workloads"):
    __main__.workloads.WORKLOADS["allocate_free_rounds"] = lambda _, sizes: [[]] * len(sizes)
"""
SMALL_POOL_PATCH = """\
import __main__

if hasattr(__main__, "workloads"):
    _honest = __main__.workloads.WORKLOADS["allocate_free_rounds"]

    def _on_a_small_pool(allocator, *args):
        small = type(allocator)(1000)
        small.allocate(500)
        return _honest(small, *args)

    __main__.workloads.WORKLOADS["allocate_free_rounds"] = _on_a_small_pool
"""
FEWER_TOKENS_PATCH = """\
import __main__

if hasattr(__main__, "workloads"):
    def _on_fewer_tokens(honest):
        def workload(manager, requests, *args):
            for request in requests:
                request.seq_len = min(request.seq_len, 256)
            return honest(manager, requests, *args)

        return workload

    for _name in ("gather_rounds", "slot_mapping_rounds"):
        __main__.workloads.WORKLOADS[_name] = _on_fewer_tokens(__main__.workloads.WORKLOADS[_name])
"""
GATHER_BODY = """\
        blocks = torch.tensor(req.block_table, dtype=torch.long)
        rows = self.physical_kv_cache.index_select(0, blocks).view(-1, self.head_dim)
        return rows[: req.seq_len]
"""
SLOT_MAPPING_BODY = """\
        slots = blocks[:, None] * self.block_size + torch.arange(self.block_size)
        return slots.flatten()[: req.seq_len]
"""
GATHER_PER_TOKEN = """\
        rows, slots = self.physical_kv_cache.view(-1, self.head_dim), self.slot_mapping(req)
        return torch.stack([rows[slot] for slot in slots.tolist()]) if len(slots) else rows[:0]
"""
SLOT_MAPPING_PER_TOKEN = """\
        return torch.tensor(
            [req.block_table[i // self.block_size] * self.block_size + i % self.block_size
             for i in range(req.seq_len)],
            dtype=torch.long,
        )
"""
ATTACKS = {
    # A gather whose every row is off by one, with torch's comparisons patched to say "equal"
    # (in the worker: the grader compares in its own process).
    "torch_comparisons": Attack(
        "gather",
        (Edit("kv_cache_manager.py", GATHER_TAIL, "        return rows[: req.seq_len] + 1.0\n"),),
        at_import(TORCH_PATCHES),
    ),
    # An allocator that copies its free set on each allocate (O(num_blocks)) and replaces the
    # worker's timed workload with one that returns a list per allocation without allocating.
    "timed_workload": Attack(
        "allocator",
        (Edit("block_allocator.py", POP_ITEMS, f"        list(self._free)\n{POP_ITEMS}"),),
        (Edit("block_allocator.py", ALLOCATOR_IMPORTS, f"{ALLOCATOR_IMPORTS}\n{WORKLOAD_PATCH}"),),
        NOT_AS_ASKED,
    ),
    # The same allocator, its timed workload run on a 1,000-block pool of its own: the ratios
    # of an O(1) allocator, but ids that are not the free blocks of the pool the grader set up.
    "timed_workload_on_a_small_pool": Attack(
        "allocator",
        (Edit("block_allocator.py", POP_ITEMS, f"        list(self._free)\n{POP_ITEMS}"),),
        (
            Edit(
                "block_allocator.py", ALLOCATOR_IMPORTS, f"{ALLOCATOR_IMPORTS}\n{SMALL_POOL_PATCH}"
            ),
        ),
        NOT_AS_ASKED,
    ),
    # A gather and a slot mapping that loop over tokens, their timed workloads run on requests
    # cut to 256 tokens: sums over other rows and slots than the grader asked for.
    "timed_workloads_on_fewer_tokens": Attack(
        "gather",
        (
            Edit("kv_cache_manager.py", GATHER_BODY, GATHER_PER_TOKEN),
            Edit("kv_cache_manager.py", SLOT_MAPPING_BODY, SLOT_MAPPING_PER_TOKEN),
        ),
        (Edit("kv_cache_manager.py", MANAGER_IMPORTS, f"{MANAGER_IMPORTS}\n{FEWER_TOKENS_PATCH}"),),
        NOT_AS_ASKED,  # shapes of 256 tokens, not the lengths asked: other work than its methods'
    ),
}


@pytest.fixture(scope="module")
def graded(request: pytest.FixtureRequest, tmp_path_factory) -> dict[str, Future[Graded]]:
    """Every selected hostile, and both twins of each selected attack, graded two at a time (once
    for those graded alike: two attacks on one bug share its plain twin); their tests read
    verdicts and messages, not counterexamples (`VERDICTS_ONLY`)."""
    root: Path = tmp_path_factory.mktemp("hostile")

    def job(hostile: Hostile):
        stubs, edits, options, guarded = hostile.inputs
        files = {name: EXERCISES / name for name in stubs}
        folder = build_submission(root / hostile.id, files=files, edits=edits)
        return lambda: grade(folder, *options, guarded=guarded)

    hostiles = selected(request, "hostile")
    for name in selected(request, "attack"):
        hostiles += ATTACKS[name].hostiles(name)
    first = {}
    for hostile in hostiles:
        first.setdefault(hostile.inputs, hostile)
    graded = concurrently({hostile.id: job(hostile) for hostile in first.values()})
    return {hostile.id: graded[first[hostile.inputs].id] for hostile in hostiles}


@pytest.mark.parametrize("hostile", HOSTILES, ids=[hostile.id for hostile in HOSTILES])
def test_hostile_scores_zero_where_it_reaches_and_harms_nothing_else(
    hostile: Hostile, graded: dict[str, Future[Graded]]
) -> None:
    result = graded[hostile.id].result()
    result.assert_clean()
    for part in hostile.zero:
        assert result.max_score(part) > 0, f"part {part} has no checks\n{result.describe(part)}"
        assert result.score(part) == 0, f"{hostile.id} scored\n{result.describe(part)}"
        silent = [
            check["id"]
            for check in result.part(part)["checks"]
            if hostile.says not in check["message"]
        ]
        assert not silent, f"checks that do not say {hostile.says!r}\n{result.describe(part)}"
    for part in hostile.full:
        assert 0 < result.score(part) == result.max_score(part), (
            f"{hostile.id} cost points in part {part}, which never runs its code\n"
            f"{result.describe(part)}"
        )


def test_importing_the_answer_key_is_flagged(graded: dict[str, Future[Graded]]) -> None:
    integrity = graded["imports_the_answer_key"].result().report["integrity"]
    assert any("solutions" in str(flag) for flag in integrity), integrity


def test_fake_output_reaches_neither_the_grader_nor_its_summary(
    graded: dict[str, Future[Graded]],
) -> None:
    result = graded["prints_fake_replies_and_scores"].result()
    for fake in (FAKE_REPLY, FAKE_SCORE):
        assert fake not in result.stdout + result.stderr, f"{fake!r} reached the grader\n{result}"
    assert result.report["score"] == result.max_score("allocator"), result.report["score"]


def test_fake_reports_replace_neither_the_report_nor_land_in_the_kit(
    graded: dict[str, Future[Graded]],
) -> None:
    result = graded["writes_fake_reports"].result()
    assert result.report["score"] == result.max_score("allocator"), result.report["score"]
    assert result.report["environment"]["parts"] == ["decode", "allocator"], result.report
    for folder in (KIT_ROOT, KIT_ROOT.parent):
        fake = folder / "report.json"
        assert not (fake.exists() and FAKE_REPORT in fake.read_text()), f"{fake} was written"


def test_a_flood_of_integrity_events_leaves_a_few_and_a_count(
    graded: dict[str, Future[Graded]],
) -> None:
    flags = graded["floods_integrity_events"].result().report["integrity"]
    sent = [flag["message"] for flag in flags if flag["source"] == "worker"]
    assert len(sent) == EVENTS_SHOWN + 1, sent
    assert all(len(message) <= EVENT_CHARS for message in sent)
    more = re.fullmatch(r"and (\d+) more events from this part's workers", sent[-1])
    assert more, sent[-1]
    assert int(more.group(1)) > 100, sent[-1]


@pytest.mark.parametrize("attack", ATTACKS)
def test_patching_gains_nothing(attack: str, graded: dict[str, Future[Graded]]) -> None:
    plain, patched = (graded[hostile.id].result() for hostile in ATTACKS[attack].hostiles(attack))
    part = ATTACKS[attack].part
    patched.assert_clean()
    assert plain.score(part) < plain.max_score(part), plain.describe(part)
    assert patched.score(part) <= plain.score(part), (
        f"the patch raised the score\n{patched.describe(part)}\nwithout it:\n{plain.describe(part)}"
    )
    assert set(plain.not_passed(part)) <= set(patched.not_passed(part))
    messages = [check["message"] for check in patched.report["parts"][part]["checks"]]
    caught = ATTACKS[attack].caught
    if caught is not None:
        assert any(caught in message for message in messages), patched.describe(part)


def test_a_submission_whose_every_call_hangs_is_waited_for_once_per_call(tmp_path: Path) -> None:
    """The stubs with every `raise NotImplementedError` a sleep (in the kernel's file, which may
    import no `time`, an endless loop), graded on every part with a one-second call limit: every
    check fails as timed out, and once a call of a method has not returned in time, the part's
    later calls of it are not waited for, nor any call of a part where two have not (with the
    default 30 s a call, such a grading waits at most 7 parts x 2 calls x 30 s, split between its
    two processes, not the 39 minutes of a wait on every call)."""
    for stub in EXERCISES.glob("*.py"):
        kernel = stub.name == "paged_attention.py"
        hang = "while True: pass" if kernel else "time.sleep(3600)"
        text = re.sub(r"raise NotImplementedError\(.*\)", hang, stub.read_text())
        (tmp_path / stub.name).write_text(text if kernel else f"import time\n{text}")
    report = grade(tmp_path, "--call-timeout", "1", guarded=False).report
    for part, graded in report["parts"].items():
        checks = [check for check in graded["checks"] if check["status"] != "skipped"]
        other = [f"{check['id']}: {check['message']}" for check in checks
                 if not check["message"].startswith("timed out")]  # fmt: skip
        assert not other, f"checks of {part} that did not time out:\n" + "\n".join(other)
        waited = [check for check in checks if DID_NOT_RETURN + " (" in check["message"]]
        assert 1 <= len(waited) <= HANGS_PER_PART, (part, checks)
        assert any(HUNG in check["message"] or PART_HUNG in check["message"]
                   for check in checks), (part, checks)  # fmt: skip
    assert report["integration"]["status"] == "skipped", report["integration"]


def test_a_submission_whose_every_call_sleeps_just_under_the_limit_is_cut_short_by_its_budget(
    tmp_path: Path,
) -> None:
    """The stubs with a sleep just under the call limit before each `raise NotImplementedError`
    (the kernel's file, which may import no `time`, as it ships): no call is ever late, so none
    counts as hung, and only the submission's budget bounds the grading. Graded on every part
    with a 20 s budget, a report is written, every part is in it, and the checks the budget cut
    short say so (with the default limits, 30 s a call and 300 s a quick grading, such a
    submission would otherwise hold its grading for over an hour)."""
    for stub in EXERCISES.glob("*.py"):
        text = stub.read_text()
        if stub.name != "paged_attention.py":
            sleep = r"time.sleep(0.9)\n        \g<0>"
            text = "import time\n" + re.sub(r"raise NotImplementedError\(.*\)", sleep, text)
        (tmp_path / stub.name).write_text(text)
    graded = grade(tmp_path, "--call-timeout", "1", "--submission-timeout", "20", guarded=False)
    graded.assert_clean()
    report = graded.report
    assert set(report["parts"]) == set(PARTS)
    budget = "the submission's time budget (20 s) is spent"
    messages = [check["message"] for part in report["parts"].values() for check in part["checks"]]
    assert any(budget in message for message in messages), messages
    assert not any(DID_NOT_RETURN in message for message in messages), messages
    assert all(part["score"] == 0 for part in report["parts"].values())
