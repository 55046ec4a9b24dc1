"""A stand-in for the kit's `block_allocator.py` in a candidate's worker: the allocator's
interface, and no allocator.

Where a part runs the candidate's code on the kit's allocator (the second grading of parts 2 and 6,
`grade.rescore_on_the_kit_allocator`) or manager (part 5), the kit's objects live in a worker of
their own (`grader/sandbox/kit_server.py`), and the candidate's worker gets this file in place of
the answer key's. `BlockAllocator` holds only the number of the kit's allocator there: each call
goes to the kit's worker through `kit_link.ask` (a module the worker makes, on a pair of pipes
between the two), which checks it, makes it and sends back its value or its exception (the type,
without the kit's words). `OutOfBlocks` is the stub's.

Only the contract's members (exercises/README.md, parts 1 and 6) are here.
"""

import builtins
import operator
from collections.abc import Iterable
from typing import Any


class OutOfBlocks(RuntimeError):
    """Raised when the pool has fewer free blocks than asked for; the message starts with OOM.

    Given: use it as it is, e.g. `raise OutOfBlocks(f"OOM: asked for {n}, {free} free")`.
    """


def answer(message: dict) -> Any:
    """What the kit's object gave for `message`; its exception raised here, as the nearest
    built-in class (`OutOfBlocks` for the kit's)."""
    from kit_link import ask  # made by the worker, where a kit's worker serves it

    reply = ask(message)
    if "ok" in reply:
        return reply["ok"]
    error = reply["error"]
    if error["type"] == "OutOfBlocks":
        raise OutOfBlocks(error["message"])
    kind = getattr(builtins, error["builtin"], RuntimeError)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = RuntimeError
    raise kind(error["message"])


def block_number(block_id: object) -> int:
    """A block id as an int; one that is none is no allocated block: ValueError."""
    try:
        return operator.index(block_id)
    except TypeError:
        raise ValueError(f"block id must be an integer, got {block_id!r}") from None


class BlockAllocator:
    """The kit's block allocator, served from the kit's worker."""

    def __init__(self, num_blocks: int) -> None:
        number = operator.index(num_blocks)
        self.handle = answer({"op": "new", "class": "BlockAllocator", "args": [number]})
        self.num_blocks = num_blocks

    @property
    def num_free(self) -> int:
        return answer({"op": "get", "handle": self.handle, "name": "num_free"})

    def allocate(self, n: int = 1) -> list[int]:
        return self.call("allocate", operator.index(n))

    def free(self, block_ids: Iterable[int]) -> None:
        self.call("free", [block_number(block_id) for block_id in block_ids])

    def incref(self, block_id: int) -> None:
        self.call("incref", block_number(block_id))

    def ref_count(self, block_id: int) -> int:
        return self.call("ref_count", block_number(block_id))

    def call(self, name: str, argument: Any) -> Any:
        return answer({"op": "call", "handle": self.handle, "name": name, "args": [argument]})
