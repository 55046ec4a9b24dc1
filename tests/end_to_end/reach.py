"""Which CPU parts a mutant of the answer key can cost points: those whose checks run the code it
changes (`reached`).

A part's checks make the same calls on the same examples whatever the submission, for as long as
every call returns what the answer key's returns: the examples are derandomized and drawn in the
grading process, and a timing's inputs, drawn afresh each run, go to the same functions whatever
they are (`grader/sandbox/workloads.py`). So a part that never calls any function a mutant
changes runs it as it runs the answer key, and gives it the answer key's full marks (each part
has a worker of its own; the parts share only the grading's time budget). Grading it would tell
nothing; the tests of mutants (`test_buggy.py`, `cascade.py`) grade only the parts it reaches.

A mutant is compared with the answer key file by file, as Python reads them. A file it changes
outside its functions' bodies (the module, a class body, a signature, a decorator), or that does
not parse, or that the grader refuses to run (`grade.runnable_items`, given the files the CPU
parts run), reaches every part that runs the file: its own, and the allocator's where it runs
the manager, which builds one. Else it reaches the parts that may call a function whose body it
changes: `NEVER_CALLED` lists by part the answer key's functions its checks never call.
`test_reach.py` proves each list on the examples the tests of mutants grade (the quick profile's,
no `--seed`): the part, graded with every function in it raising at its first line, passes every
check.
"""

import ast
import functools
from collections.abc import Mapping

from grader.grade import runnable_items
from grader.parts import PARTS
from tests.grading import GRADED_PARTS as CPU_PARTS
from tests.grading import Edit, submission_texts

(ALLOCATOR,) = PARTS["allocator"].files
(MANAGER,) = PARTS["decode"].files


def methods(cls: str, *names: str) -> frozenset[str]:
    """The qualified names of methods `names` of class `cls`."""
    return frozenset(f"{cls}.{name}" for name in names)


# By part, the answer key's functions (qualified names: "Class.method") of the files it runs
# that its checks never call.
NEVER_CALLED: Mapping[str, frozenset[str]] = {
    # reference counts are part 6's
    "allocator": methods("BlockAllocator", "incref", "ref_count"),
    "decode": methods("BlockAllocator", "incref")
    | methods("KVCacheManager", "get_physical_cache", "slot_mapping", "fork", "_copy_on_write"),
    # its requests are built from plain data: no allocation, no prefill, decode or free
    "gather": methods(
        "BlockAllocator", "num_free", "allocate", "free", "incref", "ref_count", "_checked_id"
    )
    | methods("FreeBlocks", "__init__", "__len__", "__contains__", "__iter__")
    | methods(
        "KVCacheManager",
        "free_blocks",
        "allocate_for_prefill",
        "allocate_for_decode",
        "free",
        "fork",
        "_copy_on_write",
    ),
    "sharing": methods("KVCacheManager", "get_physical_cache", "slot_mapping"),
}


@functools.cache
def reached(edits: tuple[Edit, ...]) -> tuple[str, ...]:
    """The CPU parts that run code `edits` (applied to the answer key in turn) change. Part 5
    runs the answer key's allocator and manager in place of the candidate's (`swapped`): no
    mutant of them reaches it."""
    key, mutant = submission_texts(), submission_texts(edits=edits)
    # The kernel's file is not among them: the file rule would import Triton to read it, here,
    # before a test sets Triton's interpreter on (`TRITON_INTERPRET`, read as its own kernels
    # are defined).
    files = {file: mutant[file].encode() for file in sorted(set().union(*map(runs, CPU_PARTS)))}
    runnable = dict(runnable_items(tuple(files.items())))
    changed = {
        file: changes(key[file], mutant[file], runnable[file] == text)
        for file, text in files.items()
    }
    return tuple(
        part
        for part in CPU_PARTS
        if any(
            changed[file] is None or changed[file] - NEVER_CALLED.get(part, frozenset())
            for file in runs(part)
        )
    )


def runs(part: str) -> set[str]:
    """The submission files a part runs: its own, and the allocator where it runs the manager,
    which builds one."""
    own = set(PARTS[part].files)
    return own | {ALLOCATOR} if MANAGER in own else own


def changes(before: str, after: str, runs_as_written: bool) -> frozenset[str] | None:
    """The functions whose bodies `after` changes from `before`, by qualified name; None where it
    changes anything else, does not parse, or is not run as written (`runs_as_written`)."""
    if before == after:
        return frozenset()
    try:
        old, new = functions(before), functions(after)
    except SyntaxError:
        return None
    if not runs_as_written or skeleton(before) != skeleton(after):
        return None
    return frozenset(
        name
        for (name, was), (_, now) in zip(old, new, strict=True)
        if ast.dump(was) != ast.dump(now)
    )


def functions(source: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each function `source` defines, in order, by qualified name ("Class.method",
    "f.inner"); a name defined twice (a property's getter and setter) is there twice."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, f"{name}.")

    visit(ast.parse(source), "")
    return found


def skeleton(source: str) -> str:
    """`source` as Python reads it, every function's body set aside: what a change outside the
    bodies changes."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.body = [ast.Pass()]
    return ast.dump(tree)
