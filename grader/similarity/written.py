"""The tokens of a syntax tree as Python's own unparser writes it, without the text in between.

`written_tokens(tree)` gives what `tokenize` would give for `ast.unparse(tree)`, as far as the
fingerprints read tokens (type, text, line: `fingerprints.layout_free`), each on the line of the
original file its statement comes from. It drives the unparser behind `ast.unparse` (private to
the standard library: `ast._Unparser`, `_ast_unparse.Unparser` from Python 3.14; the tests check
that its tokens are those of `ast.unparse`'s text) and lexes the pieces it writes: keywords,
operators and brackets as written, names from the tree, every number a NUMBER and every string
(an f-string whole) a STRING; a new statement line ends the last with NEWLINE and opens or closes
blocks with INDENT and DEDENT. Writing tokens spares a pass of `tokenize` over the text, the slow
part of fingerprinting.
"""

import ast
import functools
import math
import re
import tokenize
from typing import Any

try:
    from _ast_unparse import Unparser  # Python 3.14 and later
except ImportError:
    from ast import _Unparser as Unparser

# A token as `fingerprints.layout_free` reads `tokenize`'s, by index: its type, its text, and
# where it starts (the line; the column is always 0 here).
RawToken = tuple[int, str, tuple[int, int]]

# The pieces the unparser writes between the names and literals it takes from the tree.
PIECE = re.compile(
    r"\s+|(?P<name>(?:[^\W\d]|[^\x00-\x7f])(?:\w|[^\x00-\x7f])*)|(?P<number>\d[\w.]*)"
    r"|(?P<op>\*\*=|//=|>>=|<<=|\.\.\.|->|:=|\*\*|//|<<|>>|<=|>=|==|!=|[-+*/%&|^@]="
    r"|[-+*/%&|^@~<>()\[\]{}:;,.=!])"
)


def written_tokens(tree: ast.Module) -> list[RawToken]:
    """The tokens of `tree` as `ast.unparse` writes it (see the module docstring)."""
    writer = TokenWriter()
    writer.traverse(tree)
    return writer.finish()


class TokenWriter(Unparser):
    """An unparser that keeps tokens where `ast.unparse`'s keeps text."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[RawToken] = [(tokenize.ENCODING, "utf-8", (0, 0))]
        self.indents = 0
        self.at = (1, 0)  # where the statement being written starts in the original file

    def traverse(self, node: Any) -> None:
        if isinstance(node, ast.stmt):
            self.at = (getattr(node, "lineno", self.at[0]), 0)
        super().traverse(node)

    def write(self, *text: str) -> None:
        for piece in text:
            for kind, word in lexed(piece):
                self.add(kind, word)

    def add(self, kind: int, text: str) -> None:
        self.tokens.append((kind, text, self.at))

    def visit_Name(self, node: ast.Name) -> None:
        self.tokens.append((tokenize.NAME, node.id, self.at))

    def fill(self, text: str = "", **_: object) -> None:
        """A new statement line: the last one ends, blocks open or close to its indentation.
        (Python 3.14's unparser passes `allow_semicolon`: no semicolon is a token here.)"""
        self.end_line()
        while self.indents < self._indent:
            self.indents += 1
            self.add(tokenize.INDENT, "    ")
        while self.indents > self._indent:
            self.indents -= 1
            self.add(tokenize.DEDENT, "")
        self.write(text)

    def maybe_newline(self) -> None:
        """Blank lines are not tokens."""

    def end_line(self) -> None:
        if self.tokens[-1][0] not in (tokenize.NEWLINE, tokenize.ENCODING, tokenize.DEDENT):
            self.add(tokenize.NEWLINE, "\n")

    def finish(self) -> list[RawToken]:
        self.end_line()
        self.tokens += [(tokenize.DEDENT, "", self.at)] * self.indents
        self.tokens.append((tokenize.ENDMARKER, "", self.at))
        return self.tokens

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, str | bytes):
            self.add(tokenize.STRING, "''")
        elif value is None or isinstance(value, bool):
            self.add(tokenize.NAME, repr(value))
        elif value is ...:
            self.add(tokenize.OP, "...")
        else:  # a number: a folded negative one keeps its sign (-1, -0.0); a complex has none
            if isinstance(value, int):
                negative = value < 0  # exact, however large
            else:
                negative = isinstance(value, float) and math.copysign(1, value) < 0
            if negative:
                self.add(tokenize.OP, "-")
            self.add(tokenize.NUMBER, "0")

    def visit_JoinedStr(self, node: ast.AST) -> None:
        self.add(tokenize.STRING, "f''")

    visit_TemplateStr = visit_JoinedStr  # Python 3.14's t-strings


@functools.lru_cache(maxsize=4096)
def lexed(piece: str) -> tuple[tuple[int, str], ...]:
    """The tokens of a piece the unparser writes (most are few and recur: `" = "`, `"("`)."""
    kinds = {"name": tokenize.NAME, "number": tokenize.NUMBER, "op": tokenize.OP}
    return tuple(
        (kinds[found.lastgroup], found.group())
        for found in PIECE.finditer(piece)
        if found.lastgroup is not None
    )
