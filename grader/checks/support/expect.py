"""Assertions the checks share, each failing with a message in exercises/README.md's terms."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from grader.sandbox.proxy import RemoteError


@contextmanager
def raises(kind: type[Exception], call: str) -> Iterator[None]:
    """The block must raise `kind` (the candidate's exception, re-raised here)."""
    try:
        yield
    except kind as error:
        if isinstance(error, RemoteError):
            error.expected(kind)
        return
    except RemoteError as error:
        raise AssertionError(f"{call} must raise {kind.__name__}, but raised {error}") from None
    raise AssertionError(f"{call} must raise {kind.__name__}, but returned normally")


def int_list(value: Any, what: str) -> list[int]:
    """`value` must be a list of plain ints."""
    assert type(value) is list, f"{what} must return a list, got {type(value).__name__}"
    assert all(type(item) is int for item in value), f"{what} must return ints, got {value!r}"
    return value


def plain_int(value: Any, what: str) -> int:
    assert type(value) is int, f"{what} must be an int, got {value!r}"
    return value
