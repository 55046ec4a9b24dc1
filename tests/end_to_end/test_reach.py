"""The parts a mutant reaches (`reach.py`): each part's list of the answer key's functions it never
calls holds, proven by grading the part with every one of them raising at its first line; and a
mutant is graded on a part exactly where it edits code that part runs."""

import ast
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.end_to_end.reach import (
    ALLOCATOR,
    MANAGER,
    NEVER_CALLED,
    TRIPWIRE,
    functions,
    reached,
    tripwired,
    with_tripwires,
)
from tests.grading import SOLUTIONS, VERDICTS_ONLY, Edit, Graded, build_submission, concurrently
from tests.grading import grade as grade_cli
from tests.grading import selected_params as selected

# A part whose checks call the tripwired function: it must fail, or the tripwires prove nothing.
CANARY = ("decode", MANAGER, "KVCacheManager.allocate_for_prefill")


@pytest.fixture(scope="module")
def graded(request: pytest.FixtureRequest, tmp_path_factory) -> dict[str, Future[Graded]]:
    root: Path = tmp_path_factory.mktemp("reach")

    def job(name: str, part: str, files: dict[str, str]):
        folder = build_submission(root / name, files=files)
        return lambda: grade_cli(folder, "--parts", part, *VERDICTS_ONLY)

    jobs = {part: job(part, part, tripwired(part)) for part in selected(request, "part")}
    part, file, name = CANARY
    canary = {file: with_tripwires((SOLUTIONS / file).read_text(), [name])}
    return concurrently(jobs | {"canary": job("canary", part, canary)})


@pytest.mark.parametrize("part", sorted(NEVER_CALLED))
def test_a_part_passes_every_check_with_what_it_never_calls_raising(
    part: str, graded: dict[str, Future[Graded]]
) -> None:
    """Every check passes, none skipped, and no part is graded again on the kit's allocator,
    which could stand in for a tripwired allocator."""
    result = graded[part].result()
    result.assert_clean()
    assert result.not_passed(part) == [], result.describe(part)
    assert result.report["rescored"] == {}, result.report["rescored"]


def test_a_tripwired_function_a_part_calls_fails_its_checks(
    graded: dict[str, Future[Graded]],
) -> None:
    part, _, name = CANARY
    result = graded["canary"].result()
    assert result.caught(part), f"{name} raised, yet nothing failed\n{result.describe(part)}"


@pytest.mark.parametrize("part", sorted(NEVER_CALLED))
def test_a_tripwire_is_each_listed_functions_first_statement_and_changes_nothing_else(
    part: str,
) -> None:
    for file, text in tripwired(part).items():
        original = (SOLUTIONS / file).read_text()
        tripped = set()
        for name, node in functions(text).items():
            first = node.body[0]
            if isinstance(first, ast.Raise) and TRIPWIRE in ast.unparse(first):
                tripped.add(name)
        assert tripped == NEVER_CALLED[part] & set(functions(original)), file
        kept = [line for line in text.splitlines() if TRIPWIRE not in line]
        assert kept == original.splitlines(), file


def edit_in(file: str, name: str) -> Edit:
    """An edit (changing nothing) of the body of the answer key's function `name` in `file`."""
    source = (SOLUTIONS / file).read_text()
    node = functions(source)[name]
    body = "".join(source.splitlines(keepends=True)[node.body[0].lineno - 1 : node.end_lineno])
    return Edit(file, body, body)


@pytest.mark.parametrize(
    ("edits", "parts"),
    [
        ([edit_in(ALLOCATOR, "BlockAllocator.incref")], ("sharing",)),
        ([edit_in(ALLOCATOR, "BlockAllocator.allocate")], ("allocator", "decode", "sharing")),
        (
            [edit_in(ALLOCATOR, "BlockAllocator.__init__")],
            ("allocator", "decode", "gather", "sharing"),
        ),
        ([edit_in(MANAGER, "KVCacheManager.get_physical_cache")], ("gather",)),
        ([edit_in(MANAGER, "KVCacheManager.fork")], ("sharing",)),
        (
            [
                edit_in(MANAGER, "KVCacheManager.fork"),
                edit_in(MANAGER, "KVCacheManager.slot_mapping"),
            ],
            ("gather", "sharing"),
        ),
        (
            [Edit(ALLOCATOR, "from operator import index\n", "")],
            ("allocator", "decode", "gather", "sharing"),
        ),
        ([Edit("prefix_cache.py", "from collections import OrderedDict\n", "")], ("caching",)),
    ],
)
def test_a_mutant_reaches_the_parts_that_run_what_it_edits(
    edits: list[Edit], parts: tuple[str, ...]
) -> None:
    assert reached(edits) == parts
