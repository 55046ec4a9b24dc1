"""Reports that say what matters once: a syntax error once, first, as the reason the checks that
import its file failed (never as an integrity flag); every part not implemented yet named, skipped
checks or not; counts of the checks that ran; the simulation on a page of its own; the engine
check in one line; "provisional" once; plural agreement; and which kit made the report."""

import re
from pathlib import Path

from grader import grade, scan
from grader.report.formats import tally
from grader.report.summary import summary_lines
from grader.report.writers import write_all
from tests.grader.report.test_writers import (
    check,
    failing_report,
    full_marks_report,
    new_sections_report,
    part,
    report,
    written,
)

BROKEN_FILE = "kv_cache_manager.py"
BROKEN_SOURCE = b"class KVCacheManager:\n    def free(self, req) -> None\n        pass\n"
IMPORT_FAILED = (
    f"import failed: {BROKEN_FILE} could not be imported: SyntaxError: expected ':' "
    f"({BROKEN_FILE}, line 2)"
)
CODE = "    def free(self, req) -> None"


def broken_report() -> dict:
    """A grading of a submission whose kv_cache_manager.py does not compile: part 2's checks
    and part 6's manager checks failed on its import, as did the engine check; part 1 passed,
    and part 6 has a failure of its own."""
    decode = [check("decode", name, "failed", 0, 5, message=IMPORT_FAILED) for name in "abc"]
    sharing = [
        check("sharing", "fork", "failed", 0, 5, message=IMPORT_FAILED),
        check("sharing", "refcounts", "failed", 0, 5, message="ref_count(3) is 2, not 1"),
    ]
    made = report(
        {
            "allocator": part("Part 1", [check("allocator", "a", "passed", 15, 15)], 15),
            "decode": part("Part 2", decode, 15),
            "sharing": part("Part 6", sharing, 10),
        },
        integration={"status": "failed", "message": IMPORT_FAILED, "figures": {}},
    )
    errors = scan.syntax_errors({BROKEN_FILE: BROKEN_SOURCE, "block_allocator.py": b"x = 1\n"})
    made["syntax_errors"] = grade.with_failures(errors, made)
    made["integrity"] = scan.scan_files({BROKEN_FILE: BROKEN_SOURCE})
    return made


def test_a_syntax_error_is_said_once_first_in_the_summary(tmp_path: Path) -> None:
    lines = summary_lines(broken_report(), tmp_path)
    text = "\n".join(lines)
    first = lines.index("What to look at first:")
    assert lines[first + 1 : first + 5] == [
        f"  {BROKEN_FILE} does not compile, line 2: expected ':'",
        f"      2 | {CODE}",
        f"        | {' ' * len(CODE)}^",
        "      4 checks failed on it: decode (3), sharing (1). The end-to-end engine check failed "
        "on it too.",
    ]
    assert text.count("expected ':'") == 1
    # The first other failure is the one to look at next; the engine check points up.
    assert lines[first + 5] == "  Part 6: the check refcounts failed:"
    assert "not pass in this part" not in text
    assert (
        f"End-to-end engine check (not scored): failed. {BROKEN_FILE} does not compile (line 2; "
        "shown at the top)." in lines[-3]
    )
    assert "integrity flag" not in text


def test_a_syntax_error_is_said_once_in_the_page_and_the_markdown(tmp_path: Path) -> None:
    files = written(broken_report(), tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    assert html.count("expected &#39;:&#39;") == 1
    assert markdown.count("expected ':'") == 1
    assert f"2 | {CODE}" in markdown
    assert f"2 | {CODE}".replace(">", "&gt;") in html
    assert html.index('id="syntax-errors"') < html.index('id="integrity"')
    assert markdown.index("## Syntax errors") < markdown.index("## Parts")
    for text in (html, markdown):
        assert "4 checks failed on it: decode (3), sharing (1)." in text
        assert f"3 checks failed because {BROKEN_FILE} does not compile (line 2; shown at" in text
        assert f"1 check failed because {BROKEN_FILE} does not compile (line 2; shown at" in text
        assert "SyntaxError" not in text  # no check's own message repeats it
    # Only part 6's own failure gets a card; the integrity section has nothing to say.
    assert re.findall(r'<article class="check failed" id="([^"]+)"', html) == [
        "check-sharing-refcounts"
    ]
    assert "<h2>Integrity flags</h2>\n<p>None.</p>" in html
    assert html.count(f"{BROKEN_FILE} does not compile (line 2; shown at the top).") == 1


def test_every_part_not_implemented_yet_is_named_whatever_was_skipped(tmp_path: Path) -> None:
    """The kit's stubs, graded without CUDA in the candidate kit: the kernel's CUDA checks and
    the timings are skipped, and still every part is not implemented yet."""
    stub = "not implemented: it raises NotImplementedError"
    parts = {
        part_id: part(
            part_id,
            [
                check(part_id, "rule", "failed", 0, 5, message=stub),
                check(part_id, "timed", "skipped", 0, 2, message=skip),
            ],
            5,
        )
        for part_id, skip in [
            (
                "allocator",
                "runs only in the full kit: the answer key it is compared with is absent",
            ),
            ("kernel", "needs a CUDA device"),
        ]
    }
    lines = summary_lines(report(parts), tmp_path)
    first = lines.index("What to look at first:")
    assert (
        lines[first + 1] == "  Not implemented yet (a stub or a missing file): allocator, kernel."
    )
    assert not any("the check" in line for line in lines)


def test_a_tally_counts_the_checks_that_ran_and_says_how_many_were_skipped() -> None:
    checks = [check("allocator", name, "passed", 1, 1) for name in "abcdef"]
    checks += [
        check("allocator", name, "skipped", 0, 1, message="needs a CUDA device") for name in "gh"
    ]
    assert tally(part("Part 1", checks, 6)) == "6 of 6 checks passed, 2 skipped"
    assert tally(part("Part 1", checks[:1], 1)) == "1 of 1 check passed"
    assert tally(part("Part 1", checks[:1], 1), "zh") == "1 项检查通过了 1 项"


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    made = failing_report()
    made["parts"]["allocator"]["checks"][3]["max_points"] = 1
    markdown = written(made, tmp_path)["report.md"]
    assert "- `timed_against_reference` (1 point, graded by the hiring team's kit)" in markdown
    made["parts"]["allocator"]["checks"][1]["message"] = "\n".join(["step()"] * 7)
    lines = summary_lines(made, tmp_path)
    assert "      ... 1 more line in the report" in lines
    assert "  (1 more check did not pass in this part; it is in the report.)" in lines
    assert "  1 integrity flag for a reviewer: see the report." in lines


SIMULATION = {
    "headline": "Continuous batching wins <b>3.1x</b>",
    "rows": [["scheme", "steps"], ["static", "18,818"], ["paged: block 16", "6,083"]],
    "charts": [],
}


def test_the_simulation_has_a_page_of_its_own_that_the_reports_link_to(tmp_path: Path) -> None:
    files = written({**full_marks_report(), "simulation": SIMULATION}, tmp_path)
    page = (tmp_path / "simulation.html").read_text(encoding="utf-8")
    assert "Continuous batching wins &lt;b&gt;3.1x&lt;/b&gt;" in page
    assert "<td>paged: block 16</td><td>6,083</td>" in page
    assert '<a href="report.html">' in page
    for text in (files["report.html"], files["report.md"]):
        assert "Continuous batching wins" not in text
        assert "6,083" not in text
    assert (
        '<a href="simulation.html">Why paging and continuous batching win</a>'
        in (files["report.html"])
    )
    assert "[Why paging and continuous batching win](simulation.html)" in files["report.md"]


def test_a_report_without_the_simulation_has_no_page_nor_link(tmp_path: Path) -> None:
    write_all({**full_marks_report(), "simulation": SIMULATION}, tmp_path)
    files = written(full_marks_report(), tmp_path)  # graded again into the same folder
    assert not (tmp_path / "simulation.html").exists()
    assert "simulation.html" not in files["report.html"] + files["report.md"]


def test_the_engine_check_is_one_line_with_its_figures_folded_away(tmp_path: Path) -> None:
    made = new_sections_report()
    made["integration"]["figures"] = {"requests": 8, "tokens_per_step": 2.88, "min_margin": 0.01}
    files = written(made, tmp_path)
    html, markdown = files["report.html"], files["report.md"]
    section = html.split('<section id="integration">')[1].split("</section>")[0]
    line, details = section.split("<details>")
    assert '<span class="tag failed">failed</span>tokens differ at step 9' in line
    assert "<dd>" not in line
    assert "<dt><code>min_margin</code></dt><dd>0.01</dd>" in details
    engine = markdown.split("## End-to-end engine check (not scored)\n\n")[1].split("\n## ")[0]
    assert engine.startswith("**failed**: `tokens differ at step 9")  # it may quote the candidate
    assert engine.splitlines()[2:] == ["- `tokens_per_step`: `2.88`"]


def test_how_the_report_was_made_says_which_kit_made_it(tmp_path: Path) -> None:
    made = failing_report()
    made["environment"]["kit"] = "candidate"
    files = written(made, tmp_path)
    said = "Made by the candidate kit, which has no answer key"
    assert said in files["report.html"].split('<section id="method">')[1].split("</section>")[0]
    assert said in files["report.md"].split("## How this report was made")[1].split("## ")[0]
    made["environment"]["kit"] = "full"
    assert "Made by the hiring team&#39;s full kit." in written(made, tmp_path)["report.html"]
    older = written(failing_report(), tmp_path)  # a report from before the field
    assert "Made by" not in older["report.html"] + older["report.md"]
