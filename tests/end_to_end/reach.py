"""Which CPU parts a mutant of the answer key can cost points: those whose checks run the code it
edits (`reached`).

A part's checks make the same calls on the same examples whatever the submission, for as long as
every call returns what the answer key's returns: the examples are derandomized, and drawn in the
grading process. So a part that never calls any function a mutant edits runs it exactly as it
runs the answer key (its timings time the same work), and gives it the answer key's full marks.
Grading it would tell nothing; the tests of mutants (`test_buggy.py`, `cascade.py`) grade only
the parts a mutant reaches.

A part reaches a file it runs (its own, and the allocator where it runs the manager, which builds
one). Within those files, `NEVER_CALLED` lists by part the answer key's functions that its checks
never call; an edit inside one of them does not reach the part, and an edit anywhere else (a
function not listed, a class body, the module) does. `test_reach.py` proves each list on the
examples the tests of mutants grade (the quick profile's, no `--seed`): the part, graded with every
function in it raising at its first line (`tripwired`), passes every check.
"""

import ast
from collections.abc import Iterable, Mapping

from grader.parts import PARTS
from tests.grading import GRADED_PARTS as CPU_PARTS
from tests.grading import SOLUTIONS, Edit

(ALLOCATOR,) = PARTS["allocator"].files
(MANAGER,) = PARTS["decode"].files
ALLOCATOR_CALLS = ("num_free", "allocate", "free", "incref", "ref_count", "_checked_id")

# By part, the answer key's functions (qualified names: a class's methods and their nesting) of
# the files it runs that its checks never call.
NEVER_CALLED: Mapping[str, frozenset[str]] = {
    # reference counts are part 6's
    "allocator": frozenset({"BlockAllocator.incref", "BlockAllocator.ref_count"}),
    "decode": frozenset(
        {
            "BlockAllocator.incref",
            "KVCacheManager.get_physical_cache",
            "KVCacheManager.slot_mapping",
            "KVCacheManager.fork",
            "KVCacheManager._copy_on_write",
        }
    ),
    # its requests are built from plain data: no allocation, no prefill, decode or free
    "gather": frozenset(
        {f"BlockAllocator.{name}" for name in ALLOCATOR_CALLS}
        | {f"FreeBlocks.{name}" for name in ("__init__", "__len__", "__contains__", "__iter__")}
        | {
            f"KVCacheManager.{name}"
            for name in (
                "free_blocks",
                "allocate_for_prefill",
                "allocate_for_decode",
                "free",
                "fork",
                "_copy_on_write",
            )
        }
    ),
    "sharing": frozenset({"KVCacheManager.get_physical_cache", "KVCacheManager.slot_mapping"}),
}
TRIPWIRE = "tripwire: a function this part's checks are said never to call"


def reached(edits: Iterable[Edit]) -> tuple[str, ...]:
    """The CPU parts that run code `edits` change. Part 5 runs the answer key's allocator and
    manager in place of the candidate's (`swapped`): no mutant of them reaches it."""
    edits = list(edits)
    return tuple(part for part in CPU_PARTS if any(reaches(part, edit) for edit in edits))


def reaches(part: str, edit: Edit) -> bool:
    """Whether `part` runs code `edit` changes: in a file it runs, outside the functions it never
    calls."""
    return edit.file in runs(part) and edited_function(edit) not in NEVER_CALLED.get(part, ())


def runs(part: str) -> set[str]:
    """The submission files a part runs: its own, and the allocator where it runs the manager,
    which builds one."""
    own = set(PARTS[part].files)
    return own | {ALLOCATOR} if MANAGER in own else own


def functions(source: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Each function `source` defines, by qualified name ("Class.method", "f.inner")."""
    found = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found[name] = child
                visit(child, f"{name}.")

    visit(ast.parse(source), "")
    return found


def edited_function(edit: Edit) -> str | None:
    """The innermost function of the answer key's file whose lines hold all of `edit`'s old
    text; None where no function does (a class body, the module)."""
    source = (SOLUTIONS / edit.file).read_text()
    first = source[: source.index(edit.old)].count("\n") + 1
    last = first + edit.old.rstrip("\n").count("\n")
    holding = [
        (node.lineno, name)
        for name, node in functions(source).items()
        if node.lineno <= first and last <= node.end_lineno
    ]
    return max(holding)[1] if holding else None


def tripwired(part: str) -> dict[str, str]:
    """The answer key's files that `part` runs, each function of `NEVER_CALLED[part]` in them
    raising `NotImplementedError(TRIPWIRE)` as its first statement (`with_tripwires`); fails
    where the answer key defines no function of that name."""
    sources = {file: (SOLUTIONS / file).read_text() for file in sorted(runs(part))}
    named = {file: NEVER_CALLED[part] & set(functions(text)) for file, text in sources.items()}
    missing = sorted(NEVER_CALLED[part] - set().union(*named.values()))
    assert not missing, f"the answer key defines no {missing}: update NEVER_CALLED[{part!r}]"
    return {file: with_tripwires(text, named[file]) for file, text in sources.items()}


def with_tripwires(source: str, names: Iterable[str]) -> str:
    """`source` with each of its functions `names` raising `NotImplementedError(TRIPWIRE)` as
    its first statement."""
    defined, lines = functions(source), source.splitlines(keepends=True)
    firsts = sorted((defined[name].body[0] for name in names), key=lambda node: -node.lineno)
    for first in firsts:  # from the bottom up: the line numbers above stay right
        indent = " " * first.col_offset
        lines.insert(first.lineno - 1, f"{indent}raise NotImplementedError({TRIPWIRE!r})\n")
    return "".join(lines)
