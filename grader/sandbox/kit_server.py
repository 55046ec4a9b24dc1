"""The kit's worker: the answer key's allocator and manager, served to a candidate's worker.

Part 5 runs the candidate's scheduler on the kit's `KVCacheManager`, and the second grading of
parts 2 and 6 runs the candidate's manager on the kit's `BlockAllocator`. The answer key never
enters the candidate's worker, in any form: there, the kit's modules are stand-ins
(`stand_ins/`) whose objects hold only a number, and each of their calls comes here, on a pair
of pipes between the two workers (`kit_link` there). This worker, sandboxed like any other, holds
the answer key's files as its package and does only what the stand-ins ask, checked field by
field; it answers with the value, or the exception's type in the kit's neutral words (never the
answer key's own message or traceback: they are its text).

    {"op": "new", "class": "BlockAllocator" | "KVCacheManager", "args": [int, ...]}  -> number
    {"op": "call", "handle": number, "name": "allocate" | "free" | ..., "args": [value]}
    {"op": "get", "handle": number, "name": "num_free" | "free_blocks"}  -> int (a length)
    {"op": "request", "handle": number, "name": "allocate_for_decode" | ...,
     "request": [seq_len, block_table]}                                   -> [seq_len, block_table]

Its first line says it is ready (`{"ready": true}`, its modules imported), so that the candidate's
worker waits for it before it takes any request, within the import limit.

Nothing here is the grader's evidence: the grader judges what the candidate's worker replies. It
runs in the kit's worker and imports nothing from the kit by name (`worker.load_sibling`).
"""

import json
from collections.abc import Callable
from typing import Any, TextIO

MODULES = {"BlockAllocator": "block_allocator", "KVCacheManager": "kv_cache_manager"}
ARGUMENTS = {"BlockAllocator": 1, "KVCacheManager": 3}  # of each class's constructor
CALLS = {"allocate": int, "free": list, "incref": int, "ref_count": int}  # BlockAllocator's
READS = {"BlockAllocator": "num_free", "KVCacheManager": "free_blocks"}  # as numbers
REQUEST_CALLS = frozenset({"allocate_for_prefill", "allocate_for_decode", "free"})
READY = {"ready": True}


def is_int(value: Any) -> bool:
    return type(value) is int


def are_ints(value: Any) -> bool:
    return type(value) is list and all(map(is_int, value))


class Refused(Exception):
    """A message no stand-in sends."""


class Raised(Exception):
    """The kit's code raised: `reply` is the error the stand-in raises again (`error`)."""

    def __init__(self, reply: dict) -> None:
        self.reply = reply


class Kit:
    """The objects the stand-ins of one candidate's worker made, by number."""

    def __init__(self, module: Callable[[str], Any]) -> None:
        self.module = module  # the answer key's module by its name
        self.objects: dict[int, tuple[str, Any]] = {}

    def answer(self, message: Any) -> Any:
        if not isinstance(message, dict):
            raise Refused(message)
        op, name = message.get("op"), message.get("name")
        if op == "new":
            return self.new(message.get("class"), message.get("args"))
        kind, target = self.objects.get(message.get("handle"), (None, None))
        if kind is None:
            raise Refused(message)
        call = f"the kit's {kind}.{name}"
        if op == "get" and name == READS[kind]:
            value = run(call, getattr, target, name)
            return value if kind == "BlockAllocator" else len(value)
        if op == "call" and kind == "BlockAllocator" and name in CALLS:
            args = message.get("args")
            if not (type(args) is list and len(args) == 1 and type(args[0]) is CALLS[name]):
                raise Refused(message)
            if CALLS[name] is list and not are_ints(args[0]):
                raise Refused(message)
            return run(call, getattr(target, name), args[0])
        if op == "request" and kind == "KVCacheManager" and name in REQUEST_CALLS:
            return self.on_request(target, call, name, message.get("request"))
        raise Refused(message)

    def new(self, kind: Any, args: Any) -> int:
        if kind not in MODULES or not are_ints(args) or len(args) != ARGUMENTS[kind]:
            raise Refused({"class": kind, "args": args})
        number = len(self.objects) + 1
        made = run(f"the kit's {kind}()", getattr(self.module(MODULES[kind]), kind), *args)
        self.objects[number] = kind, made
        return number

    def on_request(self, manager: Any, call: str, name: str, request: Any) -> list:
        """`manager.<name>(req)` on a request made of the stand-in's `[seq_len, block_table]`;
        then the request's."""
        if not (type(request) is list and len(request) == 2):
            raise Refused(request)
        seq_len, table = request
        if not is_int(seq_len) or not are_ints(table):
            raise Refused(request)
        req = self.module("kv_cache_manager").Request(0, 0)
        req.seq_len, req.block_table = seq_len, table
        run(call, getattr(manager, name), req)
        return [req.seq_len, list(req.block_table)]


def run(call: str, function: Callable, *args: Any) -> Any:
    """`function(*args)`, the kit's code; what it raises, as `Raised`."""
    try:
        return function(*args)
    except Exception as exception:
        raise Raised(error(exception, call)) from None


def error(exception: Exception, call: str) -> dict:
    """An exception of `call` as the stand-ins raise it again: its nearest built-in class (or
    `OutOfBlocks`), and a message in the kit's words, not the answer key's."""
    builtin = next(
        kind.__name__ for kind in type(exception).__mro__ if kind.__module__ == "builtins"
    )
    if type(exception).__name__ == "OutOfBlocks":
        return {
            "type": "OutOfBlocks",
            "builtin": builtin,
            "message": f"OOM: {call} is short of blocks",
        }
    return {"type": builtin, "builtin": builtin, "message": f"{call} raised {builtin}"}


def serve(channel_in: TextIO, channel_out: TextIO, module: Callable[[str], Any]) -> None:
    """Say it is ready, then answer the stand-ins' messages, a JSON line each, until the channel
    closes."""
    kit = Kit(module)
    channel_out.write(json.dumps(READY) + "\n")
    channel_out.flush()
    for line in channel_in:
        try:
            reply = {"ok": kit.answer(json.loads(line))}
        except Raised as raised:
            reply = {"error": raised.reply}
        except (Refused, ValueError, TypeError, RecursionError) as refused:  # not JSON, or odd
            message = f"no stand-in asks the kit this: {str(refused)[:200]}"
            reply = {"error": {"type": "TypeError", "builtin": "TypeError", "message": message}}
        channel_out.write(json.dumps(reply) + "\n")
        channel_out.flush()
