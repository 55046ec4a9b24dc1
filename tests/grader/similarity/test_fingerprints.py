"""Token streams and fingerprints (`grader.similarity.fingerprints`): what a disguise changes
does not change them, and no source, however broken, stops them."""

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
        "V",
        "+",
        "N",
    ]


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
