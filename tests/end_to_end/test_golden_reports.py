"""The grader's verdicts do not drift: the answer key and three mutants, graded at seed 7 on the
quick profile, give the reports saved in `golden/` beside it, timings and machine facts aside;
and every check id they give may be weighed in a rubric.

A refactoring of the grader changes no verdict, no score and no message; when a change means to,
regenerate the saved reports and review their diff:

    .venv/bin/python -m tests.end_to_end.test_golden_reports   # rewrites its golden/*.json
"""

import json
import sys
import tempfile
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from grader.parts import PARTS
from grader.report.formats import code_anchor
from grader.report.render import report_html, report_markdown
from grader.scoring.rubric import load_rubric
from tests.grading import SOLUTIONS, Edit, Graded, concurrently, grade_shared, submission_texts

GOLDEN = Path(__file__).resolve().parent / "golden"
SEED = ("--seed", "7", "--profile", "quick")
CASES: dict[str, tuple[tuple[Edit, ...], str]] = {
    "answer_key": ((), "allocator,decode,gather,scheduler,sharing,caching"),
    # Part 1 broken, yet decode passes every check on it, and sharing fails only its own rule
    # that incref refuses an id out of range (the same check wraps -1): neither is graded again.
    "negative_id_wraps": (
        (
            Edit(
                "block_allocator.py",
                "if not 0 <= block_id < self.num_blocks:",
                "if block_id >= self.num_blocks:",
            ),
        ),
        "allocator,decode,sharing",
    ),
    "tutorial_decode_rule": (
        (
            Edit(
                "kv_cache_manager.py",
                "if req.seq_len % self.block_size == 0:",
                "if (req.seq_len + 1) % self.block_size == 1:",
            ),
        ),
        "decode,gather",
    ),
    "fork_without_incref": (
        (
            Edit(
                "kv_cache_manager.py",
                "        for block_id in parent.block_table:\n"
                "            self.allocator.incref(block_id)\n",
                "",
            ),
        ),
        "scheduler,sharing",
    ),
}
# What another machine or version gives differently, where the report keeps it: the versions and
# the machine's facts in `environment`, how the workers ran, where the submission lay, and the
# kit's version and seal (any edit of the kit changes them).
MACHINE_FACTS = (
    *("python", "torch", "triton", "hypothesis", "pytest"),
    *("platform", "cpu_count", "device"),
)
RUN_FACTS = ("isolation", "provenance")


def stable(report: dict[str, Any]) -> dict[str, Any]:
    """`report` without what another run or machine may change: times, measured timing figures,
    versions and machine facts; of the submission's files, their names (the answer key's text
    may change, its verdicts may not), and of where a failure was raised in them, the file and
    function, and the checks raised in each file. A check's Hypothesis notes (its `hypothesis`)
    stay."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: strip(item)
                for key, item in value.items()
                if not key.endswith(("seconds", "started_at", "ratio"))
            }
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    kept = strip({key: value for key, value in report.items() if key not in RUN_FACTS})
    environment = kept["environment"]
    kept["environment"] = {key: environment[key] for key in environment if key not in MACHINE_FACTS}
    del kept["submission"]["path"]
    kept["submission"]["files"] = sorted(kept["submission"]["files"])
    for part in kept["parts"].values():
        for check in part["checks"]:
            where = check["raised_at"]
            check["raised_at"] = {key: where[key] for key in ("file", "function") if key in where}
    kept["code"] = [
        {"file": file["file"], "checks": [ids for _, ids in file["marks"]]} for file in kept["code"]
    ]
    return kept


def grade_case(name: str, shared: Path) -> Graded:
    """The case `name` graded once per `shared` folder (test_determinism.py reads the answer
    key's grading)."""
    edits, parts = CASES[name]
    return grade_shared(shared, "submission", ("--parts", parts, *SEED), edits=edits)


@pytest.fixture(scope="module")
def graded(shared_gradings: Path) -> dict[str, Future[Graded]]:
    return concurrently({
        name: lambda name=name: grade_case(name, shared_gradings) for name in CASES
    })  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_report_matches_the_saved_one(name: str, graded: dict[str, Future[Graded]]) -> None:
    saved = json.loads((GOLDEN / f"{name}.json").read_text())
    assert stable(graded[name].result().report) == saved


def test_a_part_with_nothing_to_gain_is_not_graded_on_the_kits_allocator(
    graded: dict[str, Future[Graded]],
) -> None:
    """The candidate's allocator fails part 1, but decode loses no point on it, and sharing only
    on incref, part 6's own (its reference counts live in the allocator: the kit's would give
    them): the kit's allocator could not rightly raise their scores, so they are graded once."""
    result = graded["negative_id_wraps"].result()
    assert result.score("allocator") < result.max_score("allocator"), result.describe("allocator")
    assert result.score("decode") == result.max_score("decode"), result.describe("decode")
    assert result.not_passed("sharing") == ["sharing/bad_reference_calls_are_refused"], (
        result.describe("sharing")
    )
    assert result.report["rescored"] == {}, result.report["rescored"]
    assert "again, with the kit's" not in result.stderr, result.stderr


def test_a_failure_raised_in_the_candidates_file_shows_that_line_in_every_report(
    graded: dict[str, Future[Graded]],
) -> None:
    """The mutant's allocator indexes its counts with an id out of range: the random check's
    failure names the line of its file that raised, and each report shows it."""
    report = graded["negative_id_wraps"].result().report
    raised = {check["id"]: check["raised_at"] for part in report["parts"].values()
              for check in part["checks"] if check["raised_at"]}  # fmt: skip
    assert list(raised) == ["allocator/random_allocate_and_free"], raised
    where = raised["allocator/random_allocate_and_free"]
    source = submission_texts(SOLUTIONS, None, CASES["negative_id_wraps"][0])[where["file"]]
    assert (where["file"], where["function"]) == ("block_allocator.py", "free")
    assert source.splitlines()[where["line"] - 1].strip() == where["code"]
    assert "_ref_counts[block_id]" in where["code"]
    [file] = report["code"]
    assert file["marks"] == [[where["line"], ["allocator/random_allocate_and_free"]]]
    page, markdown = report_html(report, "en"), report_markdown(report, "en")
    assert f'id="{code_anchor(where["file"], where["line"])}"' in page
    assert f"> {where['line']} | {source.splitlines()[where['line'] - 1]}" in markdown
    assert f"Raised in your code: `block_allocator.py`, line {where['line']}, in `free`" in markdown


def test_every_check_id_of_a_report_may_be_weighed_in_a_rubric(tmp_path: Path) -> None:
    report = json.loads((GOLDEN / "answer_key.json").read_text())
    ids = [check["id"] for part in report["parts"].values() for check in part["checks"]]
    weights = "".join(f"{part.id} = {part.weight}\n" for part in PARTS.values())
    points = "".join(f'"{check_id}" = 1\n' for check_id in ids)
    rubric = tmp_path / "rubric.toml"
    rubric.write_text(f"[weights]\n{weights}[points]\n{points}")
    assert set(load_rubric(rubric).points) == set(ids)


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as root:
        for name, future in concurrently({
            name: lambda name=name: grade_case(name, Path(root)) for name in CASES
        }).items():  # fmt: skip
            report = stable(future.result().report)
            (GOLDEN / f"{name}.json").write_text(
                json.dumps(report, indent=1, sort_keys=True) + "\n"
            )
            print(f"wrote {GOLDEN / name}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
