"""The parts a mutant reaches (`reach.py`): each part's list of the answer key's functions it never
calls holds, proven by grading the part with every one of them raising at its first line (a
tripwire); a tripwire a part does meet fails it, or is masked by the kit's allocator, which the
proof therefore refuses; and a mutant is graded on exactly the parts that run what it changes.
"""

import ast
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.end_to_end.reach import ALLOCATOR, MANAGER, NEVER_CALLED, functions, reached, runs
from tests.grading import (
    KIT_ROOT,
    SOLUTIONS,
    VERDICTS_ONLY,
    Edit,
    Graded,
    build_submission,
    concurrently,
    grade,
    module_items,
)
from tests.grading import selected_params as selected

TRIPWIRE = "tripwire: a function this part's checks are said never to call"
# Tripwires a part meets (part, file, function): the manager's fails its checks; the allocator's
# fails them too, and the kit's allocator then stands in for it (`rescored`).
CANARIES = {
    "manager_canary": ("decode", MANAGER, "KVCacheManager.allocate_for_prefill"),
    "allocator_canary": ("decode", ALLOCATOR, "BlockAllocator.allocate"),
}
EVERY_PART_OF = {
    ALLOCATOR: ("allocator", "decode", "gather", "sharing"),
    MANAGER: ("decode", "gather", "sharing"),
}


def tripwired(part: str) -> dict[str, str]:
    """The answer key's files that `part` runs, each function of `NEVER_CALLED[part]` in them
    raising at its first statement (`with_tripwires`); fails where the answer key defines none
    of a name."""
    sources = {file: (SOLUTIONS / file).read_text() for file in sorted(runs(part))}
    named = {file: NEVER_CALLED[part] & {n for n, _ in functions(text)}
             for file, text in sources.items()}  # fmt: skip
    missing = sorted(NEVER_CALLED[part] - set().union(*named.values()))
    assert not missing, f"the answer key defines no {missing}: update NEVER_CALLED[{part!r}]"
    return {file: with_tripwires(text, named[file]) for file, text in sources.items()}


def with_tripwires(source: str, names: Iterable[str]) -> str:
    """`source` with each function of `names` raising `NotImplementedError(TRIPWIRE)` as its
    first statement, on a line of its own. A generator would raise only once iterated, and a
    body on its `def` line has no line of its own: neither is a tripwire's."""
    names, lines = set(names), source.splitlines(keepends=True)
    nodes = [node for name, node in functions(source) if name in names]
    for node in nodes:
        assert node.body[0].lineno > node.lineno, f"{node.name}: its body is on its def line"
        assert not any(isinstance(inner, ast.Yield | ast.YieldFrom) for inner in ast.walk(node)), (
            f"{node.name} is a generator"
        )
    for first in sorted((node.body[0] for node in nodes), key=lambda first: -first.lineno):
        indent = " " * first.col_offset  # from the bottom up: the lines above keep their numbers
        lines.insert(first.lineno - 1, f"{indent}raise NotImplementedError({TRIPWIRE!r})\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def graded(request: pytest.FixtureRequest, tmp_path_factory) -> dict[str, Future[Graded]]:
    root: Path = tmp_path_factory.mktemp("reach")

    def job(name: str, part: str, files: dict[str, str]):
        folder = build_submission(root / name, files=files)
        return lambda: grade(folder, "--parts", part, *VERDICTS_ONLY)

    jobs = {part: job(part, part, tripwired(part)) for part in selected(request, "part")}
    names = {item.originalname for item in module_items(request)}
    if test_a_tripwire_a_part_meets_fails_it_or_is_masked_by_the_kits_allocator.__name__ in names:
        for canary, (part, file, name) in CANARIES.items():
            tripped = with_tripwires((SOLUTIONS / file).read_text(), [name])
            jobs[canary] = job(canary, part, {file: tripped})
    return concurrently(jobs)


@pytest.mark.parametrize("part", sorted(NEVER_CALLED))
def test_a_part_passes_every_check_with_what_it_never_calls_raising(
    part: str, graded: dict[str, Future[Graded]]
) -> None:
    """Every check runs and passes, and no part is graded again on the kit's allocator, which
    would stand in for a tripwired one."""
    result = graded[part].result()
    result.assert_clean()
    assert result.max_score(part) > 0, result.describe(part)
    assert result.not_passed(part) == [], result.describe(part)
    assert result.report["rescored"] == {}, result.report["rescored"]


def test_a_tripwire_a_part_meets_fails_it_or_is_masked_by_the_kits_allocator(
    graded: dict[str, Future[Graded]],
) -> None:
    part, _, name = CANARIES["manager_canary"]
    result = graded["manager_canary"].result()
    assert result.caught(part), f"{name} raised, yet nothing failed\n{result.describe(part)}"
    part, _, name = CANARIES["allocator_canary"]
    rescored = graded["allocator_canary"].result().report["rescored"]
    assert rescored.get(part, {}).get("kept") == "kit", f"{name} raised: {rescored}"


@pytest.mark.parametrize("listed", sorted(NEVER_CALLED))
def test_a_tripwire_is_a_listed_functions_first_statement_and_changes_nothing_else(
    listed: str,
) -> None:
    for file, text in tripwired(listed).items():
        original = (SOLUTIONS / file).read_text()
        tripped = {
            name
            for name, node in functions(text)
            if isinstance(node.body[0], ast.Raise) and TRIPWIRE in ast.unparse(node.body[0])
        }
        assert tripped == NEVER_CALLED[listed] & {name for name, _ in functions(original)}, file
        kept = [line for line in text.splitlines() if TRIPWIRE not in line]
        assert kept == original.splitlines(), file


def test_a_tripwire_refuses_a_body_on_its_def_line_and_a_generator() -> None:
    with pytest.raises(AssertionError, match="def line"):
        with_tripwires("def f():  return 1\n", ["f"])
    with pytest.raises(AssertionError, match="generator"):
        with_tripwires("def f():\n    yield 1\n", ["f"])


def in_body(file: str, name: str, new: str = "        pass\n") -> Edit:
    """`new` added at the end of the body of the answer key's function `name` in `file`."""
    source = (SOLUTIONS / file).read_text()
    node = dict(functions(source))[name]
    body = "".join(source.splitlines(keepends=True)[node.body[0].lineno - 1 : node.end_lineno])
    return Edit(file, body, body + new)


def line_of(file: str, text: str, new: str) -> Edit:
    """The answer key's line of `file` that holds `text`, made `new`."""
    (line,) = [line for line in (SOLUTIONS / file).read_text().splitlines() if text in line]
    return Edit(file, line, new)


INCREF_DEF = "    def incref(self, block_id: int) -> None:"


@pytest.mark.parametrize(
    ("edits", "parts"),
    [
        pytest.param((in_body(ALLOCATOR, "BlockAllocator.incref"),), ("sharing",), id="incref"),
        pytest.param(
            (in_body(ALLOCATOR, "BlockAllocator.allocate"),),
            ("allocator", "decode", "sharing"),
            id="allocate",
        ),
        pytest.param(
            (in_body(ALLOCATOR, "BlockAllocator.__init__"),), EVERY_PART_OF[ALLOCATOR], id="init"
        ),
        pytest.param(
            (in_body(MANAGER, "KVCacheManager.get_physical_cache"),), ("gather",), id="gather"
        ),
        pytest.param((in_body(MANAGER, "KVCacheManager.fork"),), ("sharing",), id="fork"),
        pytest.param(
            (
                in_body(MANAGER, "KVCacheManager.fork"),
                in_body(MANAGER, "KVCacheManager.slot_mapping"),
            ),
            ("gather", "sharing"),
            id="two functions",
        ),
        pytest.param((), (), id="nothing"),
        pytest.param(
            (in_body(ALLOCATOR, "BlockAllocator.incref", ""),),
            (),
            id="an edit that changes nothing",
        ),
        pytest.param(
            (Edit("prefix_cache.py", "from collections import OrderedDict\n", ""),),
            ("caching",),
            id="another file",
        ),
        pytest.param(  # the first edit makes the text the second one finds
            (
                Edit(ALLOCATOR, INCREF_DEF, f"{INCREF_DEF}  # shares\n"),
                Edit(ALLOCATOR, "  # shares\n", "\n        pass\n"),
            ),
            ("sharing",),
            id="edits in turn",
        ),
        pytest.param(
            (in_body(ALLOCATOR, "BlockAllocator.incref", "\n    allocate = None\n"),),
            EVERY_PART_OF[ALLOCATOR],
            id="into the class body",
        ),
        pytest.param(
            (line_of(ALLOCATOR, "def incref(", "    def free(self, block_id: int) -> None:"),),
            EVERY_PART_OF[ALLOCATOR],
            id="a def line",
        ),
        pytest.param(
            (line_of(ALLOCATOR, "def incref(", "    def incref(self, block_id: int = 1 // 0):"),),
            EVERY_PART_OF[ALLOCATOR],
            id="a default",
        ),
        pytest.param(
            (Edit(MANAGER, "    @property\n    def free_blocks(", "    def free_blocks("),),
            EVERY_PART_OF[MANAGER],
            id="a decorator",
        ),
        pytest.param(
            (in_body(ALLOCATOR, "BlockAllocator.incref", "        pass)\n"),),
            EVERY_PART_OF[ALLOCATOR],
            id="a syntax error",
        ),
        pytest.param(
            (in_body(ALLOCATOR, "BlockAllocator.incref", "        import os\n"),),
            EVERY_PART_OF[ALLOCATOR],
            id="a break of the file rule",
        ),
    ],
)
def test_a_mutant_reaches_the_parts_that_run_what_it_changes(
    edits: tuple[Edit, ...], parts: tuple[str, ...]
) -> None:
    assert reached(edits) == parts


def test_reaching_imports_no_triton() -> None:
    """Test modules compute a mutant's parts as they are collected (its grading's options), some
    before a later one sets Triton's interpreter on: imported then, Triton would define its own
    kernels compiled, and every kernel the tests interpret would fail."""
    script = (
        "import sys\nfrom tests.end_to_end.reach import reached\n"
        "from tests.end_to_end.test_buggy import MUTANTS\n"
        "for mutant in MUTANTS:\n    reached(mutant.edits)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'triton'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=KIT_ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
