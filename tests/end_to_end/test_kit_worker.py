"""The kit's worker: the answer key's objects served to a candidate's stand-ins, and nothing else.

Part 5 and the second grading of parts 2 and 6 run the candidate's code on the kit's manager or
allocator; the answer key never enters the candidate's worker, in any form. A searcher submitted as
the candidate's scheduler reads every file it can see and every code object, docstring and string
in its memory, after its stand-ins served it the kit's objects, and finds nothing of `solutions/`
in any part; handed the answer key's files, the same searcher finds them (so it searches).
"""

import importlib
import json
import time
from pathlib import Path

import pytest

from grader.grade import KIT_ALLOCATOR, answer_key_files, device_environment
from grader.parts import PARTS
from grader.sandbox import isolation, kit_server
from grader.sandbox.process import Limits, Sandbox
from grader.scoring.fixtures import WorkerFixtures
from grader.scoring.profiles import PROFILES
from tests.grading import EXERCISES

PARTS_REGRADED = [part for part in PARTS if PARTS[part].regraded]

# Strings found only in the answer key (its messages, its private names), kept reversed here so
# that the searcher's own memory holds them only as locals, never in a dict it searches.
FINGERPRINTS = [
    "_copy_on_write",
    "_check_consistent",
    "prefill it only once",
    "(double free?)",
    "only an allocated block can be shared",
    "The free set is a dict used as an ordered set",
]

SEARCHER = b'''
import gc
import os
import sys
import types

try:
    from .block_allocator import BlockAllocator
    from .kv_cache_manager import KVCacheManager, Request
except ImportError:  # a worker that holds one file, the kernel's: no kit's objects to call
    BlockAllocator = KVCacheManager = Request = None

# Not read: the system's, the runtime's and the site-packages' folders, which the kit never writes.
SKIPPED = {os.path.normpath(path) for path in ("/proc", "/sys", "/dev", "/usr", sys.base_prefix,
                                               *sys.path[1:]) if path}


SEEN = ""  # what the kit's exceptions said, kept where the search looks


def use_the_kit():
    """Every kind of call a stand-in makes, so that the kit has answered each."""
    global SEEN
    if Request is None:
        return
    try:
        manager = KVCacheManager(8, 2, 1)
        req = Request(0, 3)
        manager.allocate_for_prefill(req)
        manager.allocate_for_decode(req)
        len(manager.free_blocks)
        manager.free(req)
        manager.allocate_for_prefill(req)
        manager.allocate_for_prefill(req)  # refused: the kit's ValueError
    except Exception as error:
        SEEN += str(error)
    try:
        allocator = BlockAllocator(4)
        allocator.incref(allocator.allocate(2)[0])
        allocator.ref_count(0), allocator.num_free
        allocator.free([3, 3])  # refused
    except Exception as error:
        SEEN += str(error)


def strings_of(code):
    yield from (code.co_name, code.co_filename, *code.co_names, *code.co_varnames)
    for constant in code.co_consts:
        if isinstance(constant, str):
            yield constant
        elif isinstance(constant, types.CodeType):
            yield from strings_of(constant)


def search(reversed_fingerprints):
    use_the_kit()
    wanted = [text[::-1] for text in reversed_fingerprints]
    found = set()

    def look(text, where):
        for fingerprint in wanted:
            if fingerprint in text:
                found.add(f"{fingerprint!r} in {where}")

    paths = set()
    for top, folders, files in os.walk("/"):  # what it may list
        folders[:] = [name for name in folders if os.path.join(top, name) not in SKIPPED]
        paths |= {os.path.join(top, name) for name in files}
    for module in list(sys.modules.values()):  # and its modules' folders, which it may not list
        folder = os.path.dirname(getattr(module, "__file__", None) or "/proc")
        if folder not in SKIPPED and os.path.isdir(folder):
            paths |= {os.path.join(folder, name) for name in os.listdir(folder)}
    for path in paths:
        try:
            with open(path, "rb") as file:
                look(file.read(50 << 20).decode("latin-1"), path)
        except OSError:
            pass
    for module in list(sys.modules.values()):
        loader = getattr(module, "__loader__", None)
        for read in ("get_source", "get_code"):
            try:
                value = getattr(loader, read)(module.__name__)
            except Exception:
                continue
            if isinstance(value, str):
                look(value, f"{read}({module.__name__})")
            elif isinstance(value, types.CodeType):
                for text in strings_of(value):
                    look(text, f"{read}({module.__name__})")
    for thing in gc.get_objects():
        if isinstance(thing, types.FunctionType):
            for text in strings_of(thing.__code__):
                look(text, f"the code of {thing.__qualname__}")
        elif isinstance(thing, type):
            look(f"{thing.__qualname__} {thing.__doc__}", f"the class {thing.__qualname__}")
        elif isinstance(thing, dict):
            for key, value in list(thing.items()):
                for text in (key, value):
                    if isinstance(text, str):
                        look(text, "a dict")
    return sorted(found)
'''


@pytest.fixture(scope="module")
def found() -> isolation.Isolation:
    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"this test needs a sandbox: {found.reason} (make test installs bubblewrap)")
    return found


def fixtures(swapped: tuple[str, ...] = ()) -> WorkerFixtures:
    """The grading's worker fixtures, for the stubs with the searcher as their scheduler."""
    stubs = ("block_allocator.py", "kv_cache_manager.py", "paged_attention.py")
    return WorkerFixtures(
        files={name: (EXERCISES / name).read_bytes() for name in stubs}
        | {"scheduler.py": SEARCHER},
        package="submission",
        reference_files=answer_key_files(),
        grading_profile=PROFILES["quick"],
        limits=Limits(call_seconds=600.0, import_seconds=600.0),
        worker_env={part: device_environment(part) for part in PARTS},
        swapped=swapped,
    )


def scheduler_call(files: dict[str, bytes], kit_files: dict[str, bytes], found, name: str,
                   *args: object, module: str = "scheduler") -> object:  # fmt: skip
    """`<module>.<name>(*args)` (the scheduler's, by default), among `files` in a worker served
    by a kit's worker of `kit_files`: its value."""
    limits = Limits(call_seconds=600.0, import_seconds=600.0)
    sandbox = Sandbox(files, limits, {}, time.monotonic() + 1200, found, kit_files=kit_files)
    message = {"op": "new", "module": module, "name": name, "args": list(args)}
    try:
        reply = sandbox.request(message, 600.0)
    finally:
        sandbox.close()
    assert "ok" in reply, reply
    return reply["ok"]


def search(files: dict[str, bytes], kit_files: dict[str, bytes], found) -> list[str]:
    """What the searcher finds of the answer key, run as the scheduler among `files`, or in
    place of the one file of a worker that holds only one (the kernel's, graded alone)."""
    reversed_fingerprints = [text[::-1] for text in FINGERPRINTS]
    module = "scheduler" if "scheduler.py" in files or len(files) != 1 else Path(*files).stem
    files = files | {f"{module}.py": SEARCHER}
    return scheduler_call(files, kit_files, found, "search", reversed_fingerprints, module=module)


def candidate_workers() -> dict[str, tuple[dict, dict, set[bool]]]:
    """Each distinct kind of candidate's worker of a grading, by the parts whose workers are of
    that kind: its files, those of the kit's worker that serves it, and whether each of those
    parts must have a kit's worker (it swaps files for the kit's, `parts.toml`'s `swapped`, or is
    graded again on the kit's allocator). The workers of parts 1, 2, 3 and 6 hold the same (the
    candidate's files alone), part 4's its own (`paged_attention.py` alone), part 5's another
    (the stand-ins of the allocator and the manager), and so does the second grading of the
    parts built on the allocator (its stand-in)."""
    distinct: dict[tuple, list[tuple[str, bool]]] = {}
    for swapped, parts in (((), list(PARTS)), ((KIT_ALLOCATOR,), PARTS_REGRADED)):
        plugin = fixtures(swapped)
        for part in parts:
            files, kit = plugin.files_for(part), plugin.kit_files(part)
            key = (tuple(sorted(files.items())), tuple(sorted(kit.items())))
            served = (f"{part} again" if swapped else part, bool(PARTS[part].swapped or swapped))
            distinct.setdefault(key, []).append(served)
    return {
        "+".join(name for name, _ in served): (dict(files), dict(kit), {need for _, need in served})
        for (files, kit), served in distinct.items()
    }


WORKERS = candidate_workers()


def test_the_kernels_worker_holds_its_file_alone() -> None:
    """Nothing else the submission wrote runs beside the kernel (`alone` in parts.toml)."""
    (files, kit, _) = WORKERS["kernel"]
    assert set(files) == {"paged_attention.py"}
    assert kit == {}


@pytest.mark.parametrize("parts", WORKERS)
def test_no_candidate_worker_holds_anything_of_the_answer_key(parts, found):
    files, kit, needs_kit = WORKERS[parts]
    assert needs_kit == {bool(kit)}, parts
    assert search(files, kit, found) == []


def test_the_searcher_finds_the_answer_key_where_it_is(found):
    answer_key = answer_key_files()
    files = {name: answer_key[name] for name in ("block_allocator.py", "kv_cache_manager.py")}
    seen = search(files | {"scheduler.py": SEARCHER}, {}, found)
    assert {line.split(" in ")[0] for line in seen} == {repr(text) for text in FINGERPRINTS}, seen
    assert any("/sandbox/" in line for line in seen), seen  # in its files
    assert any("the code of" in line for line in seen), seen  # in its memory


LIVE_VIEW = b"""
from .kv_cache_manager import KVCacheManager, Request


def free_counts():
    manager = KVCacheManager(8, 2, 1)
    free = manager.free_blocks  # kept, as a scheduler may keep it
    before = len(free)
    req = Request(0, 3)
    manager.allocate_for_prefill(req)
    manager.allocate_for_decode(req)
    return [before, len(free), len(manager.free_blocks), req.seq_len, len(req.block_table)]
"""


def test_the_stand_in_manager_is_the_kits_live(found):
    """Through the stand-ins, a scheduler sees the kit's manager as it would in its own process:
    `free_blocks` a live view, its requests changed in place."""
    plugin = fixtures()
    plugin.files |= {"scheduler.py": LIVE_VIEW}
    files, kit = plugin.files_for("scheduler"), plugin.kit_files("scheduler")
    assert scheduler_call(files, kit, found, "free_counts") == [8, 6, 6, 4, 2]


def kit() -> kit_server.Kit:
    """The kit's objects as its worker serves them, here on the answer key imported directly."""
    return kit_server.Kit(lambda name: importlib.import_module(f"solutions.{name}"))


@pytest.mark.parametrize(
    "message",
    [
        {"op": "new", "class": "Request", "args": [0, 1]},
        {"op": "new", "class": "BlockAllocator", "args": [1.5]},
        {"op": "new", "class": "KVCacheManager", "args": [4, 1]},
        {"op": "call", "handle": 1, "name": "__reduce__", "args": []},
        {"op": "call", "handle": 1, "name": "_checked_id", "args": [0]},
        {"op": "call", "handle": 1, "name": "free", "args": [["0"]]},
        {"op": "get", "handle": 1, "name": "__loader__"},
        {"op": "get", "handle": 1, "name": "_free"},
        {"op": "request", "handle": 1, "name": "free", "request": [0, []]},
        {"op": "call", "handle": 2, "name": "allocate", "args": [1]},
        ["op", "new"],
    ],
)
def test_the_kit_answers_only_what_a_stand_in_asks(message):
    served = kit()
    assert served.answer({"op": "new", "class": "BlockAllocator", "args": [4]}) == 1
    with pytest.raises(kit_server.Refused):
        served.answer(json.loads(json.dumps(message)))


def test_the_kit_answers_a_stand_in_with_values_and_with_its_exceptions():
    served = kit()
    manager = served.answer({"op": "new", "class": "KVCacheManager", "args": [4, 2, 1]})
    request = {"op": "request", "handle": manager, "name": "allocate_for_prefill"}
    seq_len, table = served.answer(request | {"request": [3, []]})
    assert (seq_len, len(table)) == (3, 2)
    assert served.answer({"op": "get", "handle": manager, "name": "free_blocks"}) == 2
    with pytest.raises(kit_server.Raised) as raised:  # prefilled twice
        served.answer(request | {"request": [3, table]})
    call = "the kit's KVCacheManager.allocate_for_prefill"
    assert raised.value.reply == {
        "type": "ValueError",
        "builtin": "ValueError",
        "message": f"{call} raised ValueError",  # the kit's words, not the answer key's
    }
    with pytest.raises(kit_server.Raised) as raised:  # 2 blocks free, 3 asked
        served.answer(request | {"request": [5, []]})
    assert raised.value.reply["type"] == "OutOfBlocks"
    assert raised.value.reply["message"].startswith("OOM: ")
