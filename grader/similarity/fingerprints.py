"""Winnowed fingerprints of a Python file's normalized token stream (MOSS's winnowing).

`tokens(source)` keeps the code only: comments, docstrings, line breaks and indentation go;
every identifier becomes `V`, every number `N` and every string (f-strings whole) `S`; keywords
and operators stay; a comma just before a closing bracket goes (a re-wrap adds one). Renaming,
re-commenting and re-wrapping a file leaves its stream unchanged.

`fingerprints(source)` hashes each run of `K` consecutive tokens of one segment (a function or
class with its decorators, or the code between them: see `Token`) (blake2b, 64 bits: stable
across runs and machines, unlike `hash()`) and keeps the smallest hash of every `W` consecutive
ones (the rightmost on ties). Any run of `K + W - 1` tokens that two files share yields at least
one fingerprint they share; a run (or a segment) shorter than `K` yields none. Each fingerprint
keeps the lines its tokens span in the original file, for highlighting. A file that does not
tokenize (a syntax error) is fingerprinted up to the error.
"""

import io
import keyword
import tokenize
from dataclasses import dataclass
from hashlib import blake2b
from itertools import groupby

K = 25  # tokens per hashed run: about three lines of code
W = 8  # winnowing window: a shared run of K + W - 1 = 32 tokens is always caught

SKIPPED = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENCODING,
        tokenize.ENDMARKER,
    }
)
STATEMENT_START = frozenset({tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING})
DEFINITIONS = frozenset({"def", "class", "async", "@"})
CLOSERS = frozenset({")", "]", "}"})
FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+: f-strings are split
FSTRING_END = getattr(tokenize, "FSTRING_END", None)


@dataclass(frozen=True)
class Token:
    """One normalized token, the source line it starts on (1-based) and its segment: a new one
    starts at each `def`/`class` (with its decorators), so that no hashed run spans two
    functions and reordering functions changes no fingerprint."""

    text: str
    line: int
    segment: int


@dataclass(frozen=True)
class Fingerprint:
    """A selected k-gram hash and the source lines (first, last; 1-based) its tokens span."""

    hash: int
    first: int
    last: int


def raw_tokens(source: bytes) -> list[tokenize.TokenInfo]:
    """The file's tokens, up to the first tokenize error if there is one (bytes that are not
    its encoding's, a bad cookie, an unclosed bracket...)."""
    found: list[tokenize.TokenInfo] = []
    try:
        for token in tokenize.tokenize(io.BytesIO(source).readline):
            found.append(token)
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, LookupError):
        pass
    return found


def is_docstring(raw: list[tokenize.TokenInfo], at: int, before: int) -> bool:
    """Whether the STRING at `raw[at]`, after a token of type `before`, starts a statement made
    of strings only."""
    if before not in STATEMENT_START:
        return False
    after = at
    while after < len(raw) and raw[after].type in (tokenize.STRING, tokenize.NL, tokenize.COMMENT):
        after += 1
    return after == len(raw) or raw[after].type in (tokenize.NEWLINE, tokenize.ENDMARKER)


def tokens(source: bytes) -> list[Token]:
    """The normalized token stream of a Python file (see the module docstring)."""
    raw = raw_tokens(source)
    out: list[Token] = []
    before, in_docstring, fstring_depth = tokenize.ENCODING, False, 0
    segment, decorated = 0, False
    for at, token in enumerate(raw):
        kind, text, line = token.type, token.string, token.start[0]
        previous = before
        if kind not in (tokenize.NL, tokenize.COMMENT):
            before = kind
        if fstring_depth:
            fstring_depth += (kind == FSTRING_START) - (kind == FSTRING_END)
            continue
        if kind == tokenize.STRING and (in_docstring or is_docstring(raw, at, previous)):
            in_docstring = True
            continue
        in_docstring = False
        if kind in SKIPPED:
            continue
        if previous in STATEMENT_START and text in DEFINITIONS:
            segment += not decorated
            decorated = text == "@"
        if kind == FSTRING_START:
            fstring_depth = 1
            out.append(Token("S", line, segment))
        elif kind == tokenize.NAME:
            out.append(Token(text if keyword.iskeyword(text) else "V", line, segment))
        elif kind == tokenize.NUMBER:
            out.append(Token("N", line, segment))
        elif kind == tokenize.STRING:
            out.append(Token("S", line, segment))
        elif text in CLOSERS and out and out[-1].text == ",":
            out[-1] = Token(text, line, segment)
        else:
            out.append(Token(text, line, segment))
    return out


def kgram_hashes(texts: list[str], k: int = K) -> list[int]:
    """The 64-bit hash of each run of `k` consecutive tokens, in order."""
    return [
        int.from_bytes(blake2b(" ".join(texts[i : i + k]).encode(), digest_size=8).digest())
        for i in range(len(texts) - k + 1)
    ]


def winnow(hashes: list[int], w: int = W) -> list[int]:
    """Indices of the selected hashes: the rightmost minimum of each window of `w`, once each."""
    if len(hashes) <= w:
        return [min(range(len(hashes)), key=lambda i: (hashes[i], -i))] if hashes else []
    selected: list[int] = []
    for start in range(len(hashes) - w + 1):
        window = range(start, start + w)
        best = min(window, key=lambda i: (hashes[i], -i))
        if not selected or selected[-1] != best:
            selected.append(best)
    return selected


def fingerprints(source: bytes, k: int = K, w: int = W) -> list[Fingerprint]:
    """The winnowed fingerprints of a Python file, each with the lines its k-gram spans."""
    found: list[Fingerprint] = []
    for _, group in groupby(tokens(source), key=lambda token: token.segment):
        stream = list(group)
        hashes = kgram_hashes([token.text for token in stream], k)
        found += (
            Fingerprint(hashes[i], stream[i].line, stream[i + k - 1].line)
            for i in winnow(hashes, w)
        )
    return found
