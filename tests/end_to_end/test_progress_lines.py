"""The progress lines of a real grading, as CI and grade-all's logs see them (stderr not a
terminal): the stubs' checks all fail, and the part's line says so."""

from pathlib import Path

from tests.grading import EXERCISES, grade


def test_grading_the_stubs_says_that_no_allocator_check_passed(tmp_path: Path) -> None:
    graded = grade(EXERCISES, "--parts", "allocator", out=tmp_path / "report")
    count = len(graded.part("allocator")["checks"])
    final = f"  allocator  {count:>2} checks: 0 passed, {count} failed  "
    assert [line for line in graded.stderr.splitlines() if line.startswith(final)], graded
    assert "\r" not in graded.stderr, graded  # never rewritten in place
