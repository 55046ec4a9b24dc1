"""A Python file's program in one normal form, before its tokens are fingerprinted.

Each rewrite keeps what the code does (or, for the order of operands, what a reader sees it do), so
that a copy edited mechanically all over, which adds tokens everywhere and leaves no run of
`fingerprints.K` tokens as it was, reads as the file it copied:

- **dead code goes** (`dead_code.py`): a statement without effect (an expression that calls
  nothing, `pass`, what follows a `return`, `raise`, `break` or `continue`), and in a function an
  assignment to a name nothing live reads (one whose value calls something stays as the call;
  at module or class level an assignment defines an attribute, and stays);
- **one spelling of each construct** (`spelling.py`): `getattr(x, "a")` is `x.a` (`setattr` and
  `delattr` alike); where only truth counts, `not not e` and `bool(e)` are `e`; `a > b` is
  `b < a` (`>=` alike); `x = x + y` is `x += y`; constant arithmetic is folded; `while True:`
  that starts with `if c: break` is `while not c:`; `i = a` followed by `while i < b:` that ends
  with `i += 1` is `for i in range(a, b):`; `range(0, n)` is `range(n)`; `else: if` is `elif`
  (the syntax tree makes no difference);
- **one order** (`spelling.py`): the operands of a commutative operator (`+ * | & ^`, `== !=
  is is not`, `and or`), chains of one operator flattened, sorted by their shape (names and
  literals set aside, as the token stream sets them aside).

`normal_form(source)` gives the rewritten syntax tree, each statement on the line of the file it
comes from (`written.py` gives its tokens). A file with a syntax error gives the tree of its
complete statements before the error (`parsed`), so that a copy with a broken line at its end
still reads as the file it copied; one whose error is on its first line, or that nests deeper
than `spelling.MAX_DEPTH`, gives None, and is fingerprinted from its tokens as written.
This normalises code for comparing it, not for running it: a rewrite may change what the code
does where a reader would call the two the same: `a + b` for strings, `x = x + y` for a list
another name also holds, a counted loop's variable after the loop.
"""

import ast
import warnings

from grader.similarity.dead_code import prune
from grader.similarity.spelling import Rewriter, TooDeep, loops


def normal_form(source: bytes) -> ast.Module | None:
    """The syntax tree of `source` (`parsed`) in the normal form; None where there is none."""
    tree = parsed(source)
    if tree is None:
        return None
    rewriter = Rewriter()
    try:
        tree = rewriter.visit(tree)
    except (TooDeep, RecursionError):
        return None
    prune(tree, None, rewriter.lives)
    loops(tree)
    return tree


def parsed(source: bytes) -> ast.Module | None:
    """The syntax tree of `source`; where it has a syntax error, of its lines before the error,
    or failing that before the last line at the top level (no indentation) above the error; None
    where neither parses, or leaves no statement. Warnings (an invalid escape) are not printed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError) as error:
            broken = getattr(error, "lineno", None) or 0
        except (RecursionError, MemoryError):  # nests past what the parser builds
            return None
        lines = source.splitlines(keepends=True)[: max(broken - 1, 0)]
        top = max((at for at, line in enumerate(lines) if line[:1] not in b" \t\r\n#"), default=0)
        for end in dict.fromkeys((len(lines), top)):
            try:
                tree = ast.parse(b"".join(lines[:end]))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            return tree if tree.body else None
    return None
