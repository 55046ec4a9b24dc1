"""The normal form (`grader.similarity.normalize`): each rewrite the module names makes two
spellings of one program give one token stream; code that does something else keeps its own; and
the tokens written from a tree are those `tokenize` reads from its text."""

import ast
import tokenize
import warnings
from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.similarity.fingerprints import (
    canonical_order,
    layout_free,
    normal_tokens,
    raw_tokens,
    tokens,
)
from grader.similarity.normalize import normal_form
from grader.similarity.written import written_tokens


def texts(source: str) -> list[str]:
    return [token.text for token in tokens(source.encode())]


def function(*lines: str) -> str:
    """A function whose body is `lines`, returning what they compute."""
    body = "".join(f"    {line}\n" for line in lines)
    return f"def f(a, b, c, xs):\n{body}    return a, b, c, xs\n"


SAME = {
    "an assignment to a name never read": (
        function("_ = 0", "a = b", "_ = 0"),
        function("a = b"),
    ),
    "its call kept": (function("unused = g(a)"), function("g(a)")),
    "names dead but for each other": (
        function("_ = 0", "t = _ + 1", "_ = t", "a = b"),
        function("a = b"),
    ),
    "what follows a return": (
        "def f(a):\n    _ = 0\n    return a\n    _ = _\n    print(_)\n",
        "def f(a):\n    return a\n",
    ),
    "an expression that calls nothing": (function("'.'", "a.b", "a = b"), function("a = b")),
    "getattr, setattr, delattr with a literal name": (
        function("a = getattr(b, 'size')", "setattr(b, 'size', c)", "delattr(b, 'x')"),
        function("a = b.size", "b.size = c", "del b.x"),
    ),
    "a double negation where only truth counts": (
        function("if not not (a < b):", "    a = c", "while bool(c):", "    c = g(c)"),
        function("if a < b:", "    a = c", "while c:", "    c = g(c)"),
    ),
    "a comparison the other way round": (
        function("a = b > c", "a = b >= 1 > c"),
        function("a = c < b", "a = c < 1 <= b"),
    ),
    "commutative operands in any order": (
        function("a = b * (c + 1) | xs", "a = (b == c) and g(a) or c"),
        function("a = xs | (1 + c) * b", "a = c or g(a) and (c == b)"),
    ),
    "an augmented assignment": (
        function("a = a + b", "b = c * b", "xs[0] = xs[0] - 1"),
        function("a += b", "b *= c", "xs[0] -= 1"),
    ),
    "constant arithmetic": (function("a = 2 * 3 + b", "c = -(-1)"), function("a = 6 + b", "c = 1")),
    "while True that starts with a break": (
        function("while True:", "    if not c:", "        break", "    c = g(c)"),
        function("while c:", "    c = g(c)"),
    ),
    "a counted while": (
        function("i = 0", "while i < b:", "    xs.append(i)", "    i += 1"),
        function("for i in range(0, b, 1):", "    xs.append(i)"),
    ),
    "else: if": (
        function("if a:", "    b = 1", "else:", "    if c:", "        b = 2", "    pass"),
        function("if a:", "    b = 1", "elif c:", "    b = 2"),
    ),
}


@pytest.mark.parametrize("rewrite", SAME)
def test_one_program_spelled_two_ways_gives_one_stream(rewrite: str) -> None:
    one, two = SAME[rewrite]
    assert texts(one) == texts(two), rewrite


DIFFERENT = {
    "another operator": (function("a = b - c"), function("a = b + c")),
    "a name that is read": (function("a = 0", "b = a"), function("b = a")),
    "a module attribute": ("LIMIT = 5\n", ""),
    "a class attribute": ("class C:\n    max_live = 5\n", "class C:\n    pass\n"),
    "a call": (function("g(a)"), function("a = b")),
    "a while that does not count": (
        function("i = 0", "while i < b:", "    i += 2"),
        function("for i in range(b):", "    pass"),
    ),
    "a subtraction the other way round": (function("a = b - a"), function("a -= b")),
    "an augmented assignment through an alias": (function("v = xs[:1]", "v += c"), function()),
    "a name deleted": (function("t = g()", "del t"), function("g()")),
    "a function that reads any name": (
        function("t = 1", "g(**locals())"),
        function("g(**locals())"),
    ),
    "a class attribute in a function": (
        function("t = a * 2", "class C:", "    size = t"),
        function("class C:", "    size = t"),
    ),
    "a while True with an else": (
        function("while True:", " if not c:", "  break", " c = g(c)", "else:", " g(a)"),
        function("while c:", " c = g(c)", "else:", " g(a)"),
    ),
    "a while whose bound changes": (
        function("i = 0", "while i < b:", "    b = g(b)", "    i += 1"),
        function("for i in range(b):", "    b = g(b)"),
    ),
    "a private name, which a class mangles": (
        function("a = getattr(b, '__size')"),
        function("a = b.__size"),
    ),
    "a while that ends with a break": (
        function("while True:", "    c = g(c)", "    if not c:", "        break"),
        function("while c:", "    c = g(c)"),
    ),
}


@pytest.mark.parametrize("change", DIFFERENT)
def test_code_that_does_something_else_keeps_its_own_stream(change: str) -> None:
    one, two = DIFFERENT[change]
    assert texts(one) != texts(two), change


FILES = sorted(
    path
    for folder in ("exercises", "grader/similarity", "grader/checks")
    for path in (KIT_ROOT / folder).glob("*.py")
)


@pytest.mark.parametrize("path", FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_tokens_written_from_a_tree_are_those_of_its_text(path: Path) -> None:
    """`written_tokens` gives what `tokenize` reads from `ast.unparse` of the same normal form,
    as the fingerprints read tokens."""
    tree = normal_form(path.read_bytes())
    assert tree is not None
    read = layout_free(raw_tokens(ast.unparse(tree).encode()))
    written = layout_free(written_tokens(tree))
    assert [token.text for token in written] == [token.text for token in read]
    assert [token.statement for token in written] == [token.statement for token in read]


def test_each_token_is_on_the_line_its_statement_comes_from() -> None:
    source = "import os\n\n\n# a comment\ndef f(a):\n    '''Doc.'''\n    return a > 1\n"
    lines = {token.text: token.line for token in tokens(source.encode())}
    assert (lines["import"], lines["def"], lines["return"]) == (1, 5, 7)


DEEP = {
    "a list 200 deep": b"x = " + b"[" * 200 + b"a" + b"]" * 200 + b"\n",
    "a sum of 600 terms": b"x = " + b" + ".join([b"a"] * 600) + b"\n",
    "300 attributes": b"x = a" + b".b" * 300 + b"\n",
    "300 nested lambdas": b"f = " + b"lambda: " * 300 + b"0\n",
    "300 nested conditionals": b"x = " + b"a if b else " * 300 + b"c\n",
    "300 elifs": b"if a:\n    g()\n" + b"elif a:\n    g()\n" * 300,
}
PLAIN = function("t = g(a, b)", "if b > t:", "    c = t + 1")


@pytest.mark.parametrize("line", DEEP.values(), ids=DEEP)
def test_a_statement_too_deep_is_left_out_and_the_rest_keeps_its_normal_form(line: bytes) -> None:
    """Nested past `MAX_DEPTH` (a chain of one operator as deep as a balanced tree of it): the
    statement goes, alone; one deep line does not keep a copy from its normal form."""
    assert texts(PLAIN) != texts_as_written(PLAIN.encode())
    assert texts((PLAIN + "\n").encode().decode() + line.decode())[: len(texts(PLAIN))] == texts(
        PLAIN
    )


def test_a_loop_left_empty_by_a_statement_too_deep_keeps_its_normal_form() -> None:
    deep = "x = " + "[" * 120 + "a" + "]" * 120
    source = function("i = 0", "while i < b:", f"    {deep}", "while True:", f"    {deep}")
    assert normal_form(source.encode()) is not None


def test_how_deep_the_callers_stack_is_changes_no_token() -> None:
    nested = "".join(f"{'    ' * depth}if a{depth}:\n" for depth in range(60))
    source = (nested + "    " * 60 + "g(a + b * c)\n").encode()

    def deep(frames: int) -> list[str]:
        return [token.text for token in tokens(source)] if frames == 0 else deep(frames - 1)

    assert deep(700) == deep(0)


NO_STATEMENT = {
    "a null byte": b"x = 1\n\x00\n",
    "a syntax error on the first line": b"}\nx = 1\n",
    "nests past what the parser builds": b"x = " + b"-" * 3000 + b"1\n",
}


@pytest.mark.parametrize("source", NO_STATEMENT.values(), ids=NO_STATEMENT)
def test_a_file_with_no_normal_form_is_read_as_written(source: bytes) -> None:
    assert normal_form(source) is None
    assert [token.text for token in tokens(source)] == texts_as_written(source)


ODD = {
    "match": "match x:\n case [1, *rest] if rest:\n  g(rest)\n case {'a': y}:\n  g(y)\n",
    "async": "async def f(x):\n async with x as y:\n  async for z in y:\n   await z\n",
    "walrus": "if (n := len(xs)) > 1:\n    g(n)\n",
    "except*": "try:\n    g()\nexcept* ValueError:\n    raise\nelse:\n    pass\n",
    "constants that do not fold": "x = ~1.5\ny = 1.0 | 2\nz = 10 ** 10 ** 10\nw = 1 / 0\n",
    "complex and negative numbers": "def f(x):\n    return x * 2j - -3.5 + -(10 ** 30)\n",
    "nonlocal": "def f():\n x = 0\n def g():\n  nonlocal x\n  x = 1\n return g\n",
    "an invalid escape": "x = '\\d'\n",
}


@pytest.mark.parametrize("source", ODD.values(), ids=ODD)
def test_any_python_has_a_normal_form(source: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing printed, not even a warning
        assert normal_form(source.encode()) is not None
        assert normal_tokens(source.encode()) is not None  # the unparser writes it too
        assert texts(source)


def texts_as_written(source: bytes) -> list[str]:
    return [token.text for token in canonical_order(layout_free(raw_tokens(source)))]


def test_the_unparser_writes_every_kind_of_token() -> None:
    """Strings (f-strings whole), numbers, keywords, operators, and blocks."""
    tree = normal_form(b"def f(a):\n    if a:\n        return f'{a!r}' + 'x' * 2 ** -1.5\n")
    kinds = {token[0] for token in written_tokens(tree)}
    assert {tokenize.STRING, tokenize.NUMBER, tokenize.NAME, tokenize.OP} <= kinds
    assert {tokenize.INDENT, tokenize.DEDENT, tokenize.NEWLINE, tokenize.ENDMARKER} <= kinds
