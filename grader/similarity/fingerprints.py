"""Winnowed fingerprints of a Python file's normalized token stream (MOSS's winnowing).

`tokens(source)` first puts the program in one normal form (`normalize.py`: dead code gone, one
spelling of each construct, commutative operands in one order) and takes its tokens as the
unparser writes them (`written.py`), where the file parses (up to a syntax error: `parsed`);
else the tokens as written. Then it keeps the code only, as a syntax tree would see it:
comments, docstrings, line breaks, line joins, indentation, statement separators (`;`), `pass`
and grouping parentheses (not a call's) go; every identifier becomes `V`, every number `N` and
every string (f-strings whole, adjacent strings one) `S`; keywords, operators and other brackets
stay; a comma just before a closing bracket goes (a re-wrap adds one), but the one of a
one-element tuple. Then each run of assignments that follow one another in a block is put in one
canonical order that keeps every statement after those it depends on (`canonical_order`), so
that reordering independent assignments changes nothing. Renaming, re-commenting, re-wrapping,
semicolons and added parentheses leave a file's stream unchanged (every grouping parenthesis
goes, needed or not: `(a + b) * c` reads as `a + b * c`, a loss a comparison of code can bear).

This is JPlag's and Dolos's idea (compare what the code does, not how it is laid out), taken
lighter: they tokenize a parse tree (JPlag into statement tokens, `ASSIGN`, `APPLY`, `IF_BEGIN`;
Dolos into tree-sitter node types), where this keeps Python's own tokens, normalized, so that a
file that does not parse is still compared up to its error; and JPlag's normalization of
independent statements (built on a dependency graph, for Java and C++) is done here on name
chains (`effects`).

`fingerprints(source)` hashes each run of `K` consecutive tokens of one segment (a function or
class with its decorators, or the code between them: see `Token`) (blake2b, 64 bits: stable
across runs and machines, unlike `hash()`) and keeps the smallest hash of every `W` consecutive
ones (the rightmost on ties). Any run of `K + W - 1` tokens that two files share yields at least
one fingerprint they share; a run (or a segment) shorter than `K` yields none. Each fingerprint
keeps the lines its tokens span in the original file (its statements' lines), for highlighting.
A file that does not tokenize (a syntax error) is fingerprinted up to the error.
"""

import io
import keyword
import threading
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from hashlib import blake2b
from itertools import accumulate, groupby

from grader.similarity.normalize import normal_form
from grader.similarity.written import written_tokens

K = 25  # tokens per hashed run: about three lines of code
W = 8  # winnowing window: a shared run of K + W - 1 = 32 tokens is always caught
NORMALIZATION = 3  # the token stream's version: fingerprints of another are not comparable

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
BLOCK_EDGES = frozenset({tokenize.INDENT, tokenize.DEDENT})
DEFINITIONS = frozenset({"def", "class", "async", "@"})
OPENERS = frozenset({"(", "[", "{"})
CLOSERS = frozenset({")", "]", "}"})
CALLED = frozenset({")", "]"})  # a `(` after one of these (or after a name) is a call's
ASSIGNMENTS = frozenset({"=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^="})
ASSIGNMENTS |= {"<<=", ">>="}
BARRIERS = frozenset({"yield", "await", "lambda", ":="})  # an assignment holding one stays put
MAX_RUN = 64  # assignments in a run put in order; a longer run stays as written (order is O(n^2))
FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+: f-strings are split
FSTRING_END = getattr(tokenize, "FSTRING_END", None)


@dataclass(frozen=True)
class Token:
    """One normalized token, the source line it starts on (1-based) and its segment: a new one
    starts at each `def`/`class` (with its decorators), so that no hashed run spans two
    functions and reordering functions changes no fingerprint. `statement` counts the simple
    statements, `block` the indented blocks (a new count at each indent and dedent), and `name`
    is an identifier's own name (its `text` is `V`), for `canonical_order`."""

    text: str
    line: int
    segment: int
    statement: int = 0
    block: int = 0
    name: str = ""


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


def is_docstring(raw: Sequence[tuple], at: int, before: int) -> bool:
    """Whether the STRING at `raw[at]`, after a token of type `before`, starts a statement made
    of strings only."""
    if before not in STATEMENT_START:
        return False
    after = at
    while after < len(raw) and raw[after][0] in (tokenize.STRING, tokenize.NL, tokenize.COMMENT):
        after += 1
    ends = after == len(raw) or raw[after][0] in (tokenize.NEWLINE, tokenize.ENDMARKER)
    return ends or raw[after][1] == ";"


def tokens(source: bytes) -> list[Token]:
    """The normalized token stream of a Python file (see the module docstring): of its normal
    form where it has one, each token on the line of the file its statement comes from, else
    as written."""
    raw = normal_tokens(source)
    return canonical_order(layout_free(raw_tokens(source) if raw is None else raw))


def normal_tokens(source: bytes) -> list[tuple] | None:
    """The tokens of `source`'s normal form; None where it has none, or the rewriting or the
    unparser fails on it (a hostile file must not stop the comparison of a whole drive). Made
    on a thread of its own, on a stack of its own: how deep its caller's stack is changes
    nothing."""
    found: list[list[tuple] | None] = [None]

    def make() -> None:
        try:
            tree = normal_form(source)
            found[0] = None if tree is None else written_tokens(tree)
        except Exception:  # any failure: the file is compared as written
            found[0] = None

    thread = threading.Thread(target=make, name="normal form")
    thread.start()
    thread.join()
    return found[0]


def layout_free(raw: Sequence[tuple]) -> list[Token]:
    """The normalized tokens of `raw` (`tokenize`'s, or `written_tokens`', read by index: type,
    text, start) in their order: all but `canonical_order`."""
    out: list[Token] = []
    before, in_docstring, fstring_depth = tokenize.ENCODING, False, 0
    segment, decorated, statement, block = 0, False, 0, 0
    last, brackets = "", []  # the last code token's text; each open bracket: [groups, commas]
    for at, token in enumerate(raw):
        kind, text, (line, _) = token[0], token[1], token[2]
        if kind == tokenize.OP and text == ";":
            kind = tokenize.NEWLINE  # a statement's end, as a line break
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
        statement += kind in STATEMENT_START
        block += kind in BLOCK_EDGES
        if kind in STATEMENT_START:
            last = ""  # a `(` that starts a statement groups
        if kind in SKIPPED or (kind == tokenize.NAME and text == "pass"):
            continue
        called, last = last in CALLED or (last.isidentifier() and not keyword.iskeyword(last)), text
        if previous in STATEMENT_START and text in DEFINITIONS:
            segment += not decorated
            decorated = text == "@"
        if text in OPENERS:
            brackets.append([text == "(" and not called, 0])
            if brackets[-1][0]:
                continue
        elif text == "," and brackets:
            brackets[-1][1] += 1
        elif text in CLOSERS and brackets:
            groups, commas = brackets.pop()
            if groups:
                if commas > 1 and out and out[-1].text == ",":
                    out.pop()  # `(a, b,)` is `(a, b)`; `(a,)` stays a tuple
                continue
        here = {"line": line, "segment": segment, "statement": statement, "block": block}
        if kind in (tokenize.STRING, FSTRING_START):
            fstring_depth = int(kind == FSTRING_START)
            if not (out and out[-1].text == "S" and out[-1].statement == statement):
                out.append(Token("S", **here))  # "a" "b" is one string
        elif kind == tokenize.NAME:
            is_name = not keyword.iskeyword(text)
            out.append(Token("V" if is_name else text, **here, name=text if is_name else ""))
        elif kind == tokenize.NUMBER:
            out.append(Token("N", **here))
        elif text in CLOSERS and out and out[-1].text == ",":
            out[-1] = Token(text, **here)
        else:
            out.append(Token(text, **here))
    return out


# -- independent assignments in one order ------------------------------------------------------

Chain = tuple[str, ...]  # a dotted name as it is written: `self.free` is ("self", "free")


def effects(statement: list[Token]) -> tuple[set[Chain], set[Chain]] | None:
    """The name chains an assignment statement writes (its targets) and uses (all of its
    chains); None for any other statement, which no other statement crosses (an expression
    statement is most often a call, which may change anything), and for an assignment that
    yields, awaits, defines a lambda or assigns inside. A call inside an assignment is taken for
    what its chains say (`a = pool.pop()` uses `pool`), and an f-string's names are not seen:
    a normaliser for comparing code, not a compiler."""
    if statement[0].text != "V" or any(token.text in BARRIERS for token in statement):
        return None
    depths = list(
        accumulate(((t.text in OPENERS) - (t.text in CLOSERS) for t in statement), initial=0)
    )
    split = max(
        (at for at, t in enumerate(statement) if depths[at] == 0 and t.text in ASSIGNMENTS),
        default=None,
    )
    if split is None:
        return None
    found = chains(statement)
    written = {
        chain
        for at, chain in found
        if at < split and depths[at] == 0 and (at == 0 or statement[at - 1].text in ("=", ",", "*"))
    }
    return written, {chain for _, chain in found}


def chains(statement: list[Token]) -> list[tuple[int, Chain]]:
    """Each dotted name in `statement` (`a`, `self.free`) and where it starts; the attribute of
    anything else (`f(x).y`) is none."""
    found: list[tuple[int, Chain]] = []
    ends: list[int] = []
    for at, token in enumerate(statement):
        follows = statement[at - 1].text if at else ""
        if token.text != "V":
            continue
        if follows == "." and ends and ends[-1] == at - 2:
            found[-1] = (found[-1][0], (*found[-1][1], token.name))
            ends[-1] = at
        elif follows != ".":
            found.append((at, (token.name,)))
            ends.append(at)
    return found


def overlap(one: Chain, two: Chain) -> bool:
    """Whether the two chains may name the same thing: one is the other, or starts it."""
    return one[: len(two)] == two or two[: len(one)] == one


def depends(later: tuple[set[Chain], set[Chain]], earlier: tuple[set[Chain], set[Chain]]) -> bool:
    """Whether `later` must stay after `earlier`: one writes what the other uses or writes."""
    (writes_later, uses_later), (writes_earlier, uses_earlier) = later, earlier
    return any(overlap(w, u) for w in writes_earlier for u in uses_later) or any(
        overlap(w, u) for w in writes_later for u in uses_earlier
    )


def canonical_order(stream: list[Token]) -> list[Token]:
    """`stream` with each run of consecutive assignments of one block (`effects`) in one order
    (`ordered`): two orders of the same statements that keep each after what it depends on give
    the same stream."""
    statements = [list(group) for _, group in groupby(stream, key=lambda token: token.statement)]
    out: list[Token] = []
    run: list[tuple[list[Token], tuple]] = []
    for statement in [*statements, []]:
        found = effects(statement) if statement else None
        if run and (found is None or statement[0].block != run[0][0][0].block):
            out += [token for tokens_of, _ in ordered(run) for token in tokens_of]
            run = []
        if found is None:
            out += statement
        else:
            run.append((statement, found))
    return out


def ordered(run: list[tuple[list[Token], tuple]]) -> list[tuple[list[Token], tuple]]:
    """The statements of `run` in the canonical order (see `canonical_order`), or as written
    where it is longer than `MAX_RUN`: at each step,
    every statement that is ready (all it depends on is out) and has the smallest text, at once.
    Ready statements are independent of each other, so which ones are out after each step does
    not depend on the order they were written in, ties included."""
    if len(run) > MAX_RUN:
        return run
    texts = [[token.text for token in statement] for statement, _ in run]
    after = [{j for j in range(i) if depends(run[i][1], run[j][1])} for i in range(len(run))]
    waiting, done = set(range(len(run))), []
    while waiting:
        ready = [i for i in sorted(waiting) if not after[i] & waiting]
        least = min(texts[i] for i in ready)
        step = [i for i in ready if texts[i] == least]
        done += step
        waiting -= set(step)
    return [run[i] for i in done]


def kgram_hashes(texts: list[str], k: int = K) -> list[int]:
    """The 64-bit hash of each run of `k` consecutive tokens, in order."""
    return [
        int.from_bytes(blake2b(" ".join(texts[i : i + k]).encode(), digest_size=8).digest())
        for i in range(len(texts) - k + 1)
    ]


def winnow(hashes: list[int], w: int = W) -> list[int]:
    """Indices of the selected hashes: the rightmost minimum of each window of `w`, once each."""
    if len(hashes) <= w:
        return [len(hashes) - 1 - hashes[::-1].index(min(hashes))] if hashes else []
    selected: list[int] = []
    for start in range(len(hashes) - w + 1):
        window = hashes[start : start + w]
        best = start + w - 1 - window[::-1].index(min(window))
        if not selected or selected[-1] != best:
            selected.append(best)
    return selected


def fingerprints(source: bytes, k: int = K, w: int = W) -> list[Fingerprint]:
    """The winnowed fingerprints of a Python file, each with the lines its k-gram spans."""
    found: list[Fingerprint] = []
    for _, group in groupby(tokens(source), key=lambda token: token.segment):
        stream = list(group)
        hashes = kgram_hashes([token.text for token in stream], k)
        lines = [token.line for token in stream]
        found += (
            Fingerprint(hashes[i], min(lines[i : i + k]), max(lines[i : i + k]))
            for i in winnow(hashes, w)
        )
    return found
