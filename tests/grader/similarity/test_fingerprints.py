"""Token streams and fingerprints (`grader.similarity.fingerprints`): what a disguise changes
does not change them (names, comments, wrapping, semicolons, redundant parentheses, `pass`, the
order of independent assignments), what the code does still does, and no source, however broken,
stops them."""

import pytest

from grader.similarity.fingerprints import fingerprints, tokens

SOURCE = b"""\
class Pool:
    def __init__(self, size):
        self.free = list(range(size))
        self.held = set()

    def take(self, n):
        if n > len(self.free):
            raise MemoryError(f"{n} > {len(self.free)}")
        taken = [self.free.pop() for _ in range(n)]
        self.held.update(taken)
        return taken
"""


def test_tokens_drop_comments_docstrings_and_names() -> None:
    one = b'def f(a, b):\n    """Doc."""\n    return a + 1  # sum\n'
    two = b"def g(x,\n      y,):\n    return x + 2\n"
    assert [t.text for t in tokens(one)] == [t.text for t in tokens(two)]
    assert [t.text for t in tokens(one)] == [
        "def",
        "V",
        "(",
        "V",
        ",",
        "V",
        ")",
        ":",
        "return",
        "N",
        "+",
        "V",
    ]  # the operands of `+` in one order, by their shape


def texts(source: bytes) -> list[str]:
    return [token.text for token in tokens(source)]


def test_semicolons_pass_and_grouping_parentheses_change_no_token() -> None:
    plain = b"def f(a):\n    x = a + 1\n    if x:\n        return g(x), a\n    return x\n"
    dressed = (
        b"def f(a):\n    pass\n    x = (a + 1); pass;\n    if (x): return (g(x), a,);\n"
        b"    return (x)\n"
    )
    assert texts(plain) == texts(dressed)
    assert texts(b"x = (a,)\n") == ["V", "=", "V", ","]  # a one-element tuple stays one
    assert texts(b'x = "a" "b"\n') == texts(b'x = "ab"\n')


def test_independent_assignments_in_any_order_give_one_stream() -> None:
    lines = [b"self.free = list(range(n))", b"self.held = set()", b"count = 0", b"seen = {}"]
    streams = {
        tuple(texts(b"def f(self, n):\n    " + b"\n    ".join(order) + b"\n    return n\n"))
        for order in (lines, lines[::-1], lines[1::2] + lines[::2])
    }
    assert len(streams) == 1


def test_an_assignment_stays_after_what_it_depends_on() -> None:
    """Swapping statements that read or write what the other writes changes the stream: the
    code does something else."""
    pairs = [
        (b"a = 1\nb = a + 1\n", b"b = a + 1\na = 1\n"),  # b reads a
        (b"a = b\nb = 2\n", b"b = 2\na = b\n"),  # a reads the old b
        (b"self.x = 1\nself.x += 2\n", b"self.x += 2\nself.x = 1\n"),  # both write it
        (b"self.pool = []\nn = len(self.pool)\n", b"n = len(self.pool)\nself.pool = []\n"),
    ]
    for first, second in pairs:
        assert texts(first) != texts(second), (first, second)
    call = b"a = 1\nf()\nb = x + y\n"  # a call may change anything: nothing moves across it
    assert texts(call) != texts(b"b = x + y\nf()\na = 1\n")


@pytest.mark.parametrize(
    "tail",
    [b'\nx = """unterminated\n', b"\nname = '\xff\xfe'\n", b"\nif (:\n"],
    ids=["unterminated string", "bytes not utf-8", "syntax error"],
)
def test_a_broken_file_is_fingerprinted_up_to_the_error(tail: bytes) -> None:
    whole = {mark.hash for mark in fingerprints(SOURCE)}
    kept = {mark.hash for mark in fingerprints(SOURCE + tail)}
    assert len(whole) >= 3
    assert len(kept & whole) >= len(whole) - 1  # the last window may end at the break


def test_a_bad_encoding_cookie_gives_no_fingerprint_and_no_error() -> None:
    assert fingerprints(b"# -*- coding: no-such-codec -*-\n" + SOURCE) == []
