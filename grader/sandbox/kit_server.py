"""The kit's worker: the answer key's allocator and manager, served to a candidate's worker.

Part 5 runs the candidate's scheduler on the kit's `KVCacheManager`, and the second grading of
parts 2 and 6 runs the candidate's manager on the kit's `BlockAllocator`. The answer key never
enters the candidate's worker, in any form: there, the kit's modules are stand-ins
(`stand_ins/`) whose objects hold only a number, and each of their calls comes here, on a pair
of pipes between the two workers (`kit_link` there). This worker, sandboxed like any other, holds
the answer key's files as its package and does only what the stand-ins ask, checked field by
field; it answers with the value, or the exception's type and message (never its traceback).

    {"op": "new", "class": "BlockAllocator" | "KVCacheManager", "args": [int, ...]}  -> number
    {"op": "call", "handle": number, "name": "allocate" | "free" | ..., "args": [value]}
    {"op": "get", "handle": number, "name": "num_free" | "free_blocks"}  -> int (a length)
    {"op": "request", "handle": number, "name": "allocate_for_decode" | ...,
     "request": [request_id, seq_len, block_table]}                       -> [seq_len, block_table]

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
MESSAGE_CHARS = 500  # of an exception's message


def is_int(value: Any) -> bool:
    return type(value) is int


def are_ints(value: Any) -> bool:
    return type(value) is list and all(map(is_int, value))


class Refused(Exception):
    """A message no stand-in sends."""


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
        if op == "get" and name == READS[kind]:
            value = getattr(target, name)
            return value if kind == "BlockAllocator" else len(value)
        if op == "call" and kind == "BlockAllocator" and name in CALLS:
            args = message.get("args")
            if not (type(args) is list and len(args) == 1 and type(args[0]) is CALLS[name]):
                raise Refused(message)
            if CALLS[name] is list and not are_ints(args[0]):
                raise Refused(message)
            return getattr(target, name)(args[0])
        if op == "request" and kind == "KVCacheManager" and name in REQUEST_CALLS:
            return self.on_request(target, name, message.get("request"))
        raise Refused(message)

    def new(self, kind: Any, args: Any) -> int:
        if kind not in MODULES or not are_ints(args) or len(args) != ARGUMENTS[kind]:
            raise Refused({"class": kind, "args": args})
        number = len(self.objects) + 1
        self.objects[number] = kind, getattr(self.module(MODULES[kind]), kind)(*args)
        return number

    def on_request(self, manager: Any, name: str, request: Any) -> list:
        """`manager.<name>(req)` on a request made of the stand-in's; then its seq_len and
        table."""
        if not (type(request) is list and len(request) == 3):
            raise Refused(request)
        request_id, seq_len, table = request
        if type(request_id) not in (int, str) or not is_int(seq_len) or not are_ints(table):
            raise Refused(request)
        req = self.module("kv_cache_manager").Request(request_id, 0)
        req.seq_len, req.block_table = seq_len, table
        getattr(manager, name)(req)
        return [req.seq_len, list(req.block_table)]


def error(exception: BaseException) -> dict:
    """An exception as the stand-ins raise it again: its class, its nearest built-in, its
    message."""
    builtin = next(
        (kind.__name__ for kind in type(exception).__mro__ if kind.__module__ == "builtins"),
        "Exception",
    )
    message = str(exception)[:MESSAGE_CHARS]
    return {"type": type(exception).__name__, "builtin": builtin, "message": message}


def serve(channel_in: TextIO, channel_out: TextIO, module: Callable[[str], Any]) -> None:
    """Answer the stand-ins' messages, one JSON line each, until the channel closes."""
    kit = Kit(module)
    for line in channel_in:
        try:
            reply = {"ok": kit.answer(json.loads(line))}
        except Refused as refused:
            message = f"no stand-in asks the kit this: {str(refused)[:200]}"
            reply = {"error": {"type": "Refused", "builtin": "RuntimeError", "message": message}}
        except Exception as exception:  # the kit's own, as the stand-in raises it again
            reply = {"error": error(exception)}
        channel_out.write(json.dumps(reply) + "\n")
        channel_out.flush()
