"""Assertions the checks share, each failing with a message in exercises/README.md's terms.

Each also states, on failure, the property it enforces as the counterexample's last line (an
`assert` in the transcript's names, `Transcript.fail`), so that the counterexample fails on the
candidate's code and passes on any code that follows the contract. The code of each side is
given by the check (`got`, `expected`); by default `got` is where the value came from
(`Transcript.source`) and `expected` the value written out.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from grader.said import said
from grader.sandbox.proxy import RemoteError
from grader.sandbox.transcript import Shown, Transcript


@contextmanager
def raises(transcript: Transcript, kind: type[Exception], call: str) -> Iterator[None]:
    """The block, one call on the candidate's code, must raise `kind` (the candidate's exception,
    re-raised here)."""
    try:
        yield
    except kind as error:
        if isinstance(error, RemoteError):
            error.expected(kind)
        return
    except RemoteError as error:
        transcript.fail_to_raise(kind)
        raise AssertionError(
            said(
                "{call} must raise {kind}, but raised {error}",
                call=call,
                kind=kind.__name__,
                error=error,
            )
        ) from None
    transcript.fail_to_raise(kind)
    raise AssertionError(
        said("{call} must raise {kind}, but returned normally", call=call, kind=kind.__name__)
    )


class RuleBroken(AssertionError):
    """A failed assertion of `rules`, rules that checks of several parts meet (`rules.py`)."""

    def __init__(self, message: str, rules: tuple[str, ...]) -> None:
        super().__init__(message)
        self.rules = rules


@contextmanager
def judged_by(*rules: str) -> Iterator[None]:
    """The assertions inside judge `rules` (`rules.py`): a failure there is a `RuleBroken`, and
    the check records the rules (the innermost `judged_by`'s). Several rules, most likely first,
    where the failure may be any one of theirs: a manager's free count is wrong where its
    allocator miscounts (part 1's rule) or where it loses a block itself (part 2's)."""
    try:
        yield
    except RuleBroken:
        raise
    except AssertionError as error:
        message = error.args[0] if error.args else str(error)
        raise RuleBroken(message, rules).with_traceback(error.__traceback__) from None


@contextmanager
def succeeds(call: str, why: str) -> Iterator[None]:
    """`call`, made inside, must not raise: the model says it is allowed, because `why`."""
    try:
        yield
    except RemoteError as error:
        raise AssertionError(
            said("{call} must succeed ({why}), but raised {error}", call=call, why=why, error=error)
        ) from None


# A counterexample's code or a failure's message, or what writes it, only on failure: code may
# name lines the transcript has yet to write; a tensor's repr is slow, and the checks assert often.
Code = Message = str | Callable[[], str]


def expect(
    transcript: Transcript,
    ok: bool,
    message: Message,
    got: Code,
    expected: Code,
    op: str = "==",
    before: tuple[str, ...] = (),
) -> None:
    """Passes when `ok`; else the counterexample ends in `before` (statements), then `assert
    <got> <op> <expected>` (code), and the check fails with `message`."""
    if not ok:
        transcript.fail(written(got), written(expected), op, before)
        raise AssertionError(written(message))


def written(text: Code) -> str:
    """`text`, written out."""
    return text() if callable(text) else text


def same(
    transcript: Transcript,
    value: Any,
    wanted: Any,
    message: Message,
    got: Code | None = None,
    expected: Code | None = None,
) -> None:
    """`value == wanted` (plain values); the counterexample's code of each side defaults to
    where `value` came from and to `wanted` written out."""
    if value != wanted:
        got = written(got) if got else transcript.source(value)
        transcript.fail(got, written(expected) if expected else transcript.code(wanted))
        raise AssertionError(written(message))


def distinct(transcript: Transcript, values: list, code: str, message: Message) -> None:
    """`values` (`code` in the counterexample) hold nothing twice."""
    same(
        transcript,
        len(set(values)),
        len(values),
        message,
        got=f"len(set({code}))",
        expected=f"len({code})",
    )


def a_tensor(transcript: Transcript, value: Any, code: str, message: Message) -> None:
    """`value` (`code` in the counterexample) is a tensor."""
    expect(
        transcript,
        isinstance(value, torch.Tensor),
        message,
        got=f"type({code}).__name__",
        expected="'Tensor'",
    )


def int_list(transcript: Transcript, value: Any, what: str) -> list[int]:
    """`value` must be a list of plain ints."""
    if type(value) is not list:
        transcript.fail(f"type({transcript.source(value, 'ids')}).__name__", "'list'")
        raise AssertionError(
            said("{what} must return a list, got {type}", what=what, type=type(value).__name__)
        )
    if not {int}.issuperset(map(type, value)):
        shown = transcript.source(value, "ids")
        transcript.fail(f"[type(i).__name__ for i in {shown}]", f"['int'] * len({shown})")
        raise AssertionError(
            said("{what} must return ints, got {value}", what=what, value=f"{value!r}")
        )
    return value


def plain_int(transcript: Transcript, value: Any, what: str) -> int:
    if type(value) is not int:
        transcript.fail(f"type({transcript.source(value)}).__name__", "'int'")
        raise AssertionError(
            said("{what} must be an int, got {value}", what=what, value=f"{value!r}")
        )
    return value


class Held:
    """The block ids of a pool that the model says are held, each with its code in the
    counterexample: where it was handed out (`ids[2]`), never the id itself, so that the
    counterexample frees, shares and judges the same blocks on any allocator. A block in range
    that is not held is shown by its place among the free ones."""

    def __init__(self, transcript: Transcript, num_blocks: int) -> None:
        self.transcript, self.num_blocks = transcript, num_blocks
        self.codes: dict[int, list[str]] = {}  # by held id: every place it was handed out at
        self.lists: dict[str, list[int]] = {}  # the named lists the ids came from

    def __len__(self) -> int:
        return len(self.codes)

    def ids(self) -> set[int]:
        return set(self.codes)

    def add(self, ids: list[int], hint: str = "ids") -> str:
        """`ids`, just handed out by a call, are held; returns the name they are given."""
        name = self.transcript.source(ids, hint)
        self.lists[name] = ids
        for index, block in enumerate(ids):
            self.codes.setdefault(block, []).append(f"{name}[{index}]")
        return name

    def drop(self, ids: list[int]) -> None:
        for block in ids:
            self.codes.pop(block, None)

    def code(self, block: int) -> str:
        if block in self.codes:
            return self.codes[block][0]
        if not 0 <= block < self.num_blocks:
            return repr(block)
        place = block - sum(0 <= held < block for held in self.codes)
        return f"sorted(set(range({self.num_blocks})) - {self.set_code()})[{place}]"

    def shown(self, ids: list[int]) -> Shown:
        """`ids` as an argument, each shown by its code."""
        return Shown(ids, f"[{', '.join(self.code(block) for block in ids)}]")

    def set_code(self) -> str:
        """The held ids as a set display, every place each was handed out at (where an allocator
        handed out an id twice, another gives two ids): `{*ids, ids2[0]}`, a list all held
        starred."""
        held = {code for codes in self.codes.values() for code in codes}
        parts = []
        for name, ids in self.lists.items():
            places = {f"{name}[{index}]" for index in range(len(ids))}
            if ids and places <= held:
                parts.append(f"*{name}")
                held -= places
        parts += [code for codes in self.codes.values() for code in codes if code in held]
        return f"{{{', '.join(parts)}}}" if parts else "set()"
