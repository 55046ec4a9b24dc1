"""Where a failure was raised in the candidate's code (`raised.py`): the deepest frame of its
worker's traceback in one of the submission's files, kept only where that file ran as written and
holds the line, which the report then reads from the file itself."""

from types import SimpleNamespace

import pytest

from grader.sandbox.proxy import RemoteError
from grader.scoring.plugin import GradingPlugin
from grader.scoring.raised import code_marks, raised_at

FILES = ("block_allocator.py", "kv_cache_manager.py")
TRACEBACK = """\
Traceback (most recent call last):
  File "/sandbox/kit/workloads.py", line 26, in allocate_free_rounds
    ids = allocator.allocate(size)
  File "/sandbox/package/submission/kv_cache_manager.py", line 12, in grow
    self.allocator.allocate(n)
  File "/sandbox/package/submission/block_allocator.py", line 42, in allocate
    helper(n)
  File "/sandbox/package/submission/block_allocator.py", line 92, in helper
    return [0][n]
  File "/sandbox/kit/stand_ins/kit_allocator.py", line 7, in ids
    raise IndexError("list index out of range")
IndexError: list index out of range
"""


def remote(traceback: str = TRACEBACK) -> RemoteError:
    return RemoteError("IndexError", "list index out of range", traceback)


def test_the_deepest_frame_in_a_submission_file_is_where_it_raised() -> None:
    assert raised_at(remote(), FILES) == {"file": "block_allocator.py", "line": 92}


def test_a_file_not_among_those_its_workers_ran_as_the_candidates_is_passed_over() -> None:
    assert raised_at(remote(), ["kv_cache_manager.py"]) == {
        "file": "kv_cache_manager.py",
        "line": 12,
    }
    assert raised_at(remote(), []) == {}


def test_a_stand_in_in_place_of_a_candidates_file_is_not_among_its_own_files() -> None:
    """Part 5's workers get stand-ins for the manager and the allocator: a frame in either is
    the kit's code, under the candidate's file name."""
    files = {"scheduler.py": b"s", "kv_cache_manager.py": b"m", "block_allocator.py": b"a"}
    plugin = SimpleNamespace(
        files=files, files_for=lambda part: files | {"kv_cache_manager.py": b"stand-in"}
    )
    assert GradingPlugin.own_files(plugin, "scheduler") == ["scheduler.py", "block_allocator.py"]


def test_a_checks_own_failure_raised_while_handling_the_candidates_exception_points_at_it() -> None:
    with pytest.raises(AssertionError) as failure:
        must_succeed()
    assert raised_at(failure.value, FILES)["line"] == 92


def must_succeed() -> None:
    """What `expect.succeeds` does with the candidate's exception."""
    try:
        raise remote()
    except RemoteError:
        raise AssertionError("allocate(3) must succeed, but raised IndexError") from None


def test_the_exception_raised_is_the_last_of_a_chain_not_one_it_was_handling() -> None:
    handled = TRACEBACK.replace("line 92, in helper", "line 3, in lookup")
    chained = (
        f"{handled}\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/sandbox/package/submission/block_allocator.py", line 14, in allocate\n'
        "    raise ValueError(n)\nValueError: 3\n"
    )
    assert raised_at(remote(chained), FILES) == {"file": "block_allocator.py", "line": 14}
    last_in_the_kit = chained.replace(
        '/package/submission/block_allocator.py", line 14', '/kit/x.py", line 14'
    )
    assert raised_at(remote(last_in_the_kit), FILES) == {}


def test_a_failure_without_the_candidates_exception_or_its_frames_names_no_line() -> None:
    assert raised_at(AssertionError("expected 2, got 3"), FILES) == {}
    assert raised_at(remote("IndexError: list index out of range"), FILES) == {}
    elsewhere = TRACEBACK.replace("/package/submission/", "/package/other/")
    assert raised_at(remote(elsewhere), FILES) == {}
    cut = f"{TRACEBACK}... [2000 more characters cut]"  # its last frames may be gone
    assert raised_at(remote(cut), FILES) == {}
    reference = remote()
    reference.candidates = False  # raised in the answer key's worker
    assert raised_at(reference, FILES) == {}


def rows(*places: tuple[str, int], status: str = "failed") -> list[dict]:
    return [
        {
            "id": f"allocator/check_{index}",
            "status": status,
            "raised_at": {"file": file, "line": line, "function": "f"},
        }
        for index, (file, line) in enumerate(places)
    ]


def test_a_kept_line_is_read_from_the_graded_file_and_marked_with_its_checks() -> None:
    files = {"block_allocator.py": b"def f(n):\n    return [0][n]\n", "other.py": b"x = 1\n"}
    checks = rows(("block_allocator.py", 2), ("block_allocator.py", 2), ("block_allocator.py", 1))
    assert code_marks(checks, files, files) == [
        {
            "file": "block_allocator.py",
            "excerpts": [[1, "def f(n):\n    return [0][n]"]],
            "marks": [[1, ["allocator/check_2"]], [2, ["allocator/check_0", "allocator/check_1"]]],
        }
    ]
    assert checks[0]["raised_at"] == {
        "file": "block_allocator.py",
        "line": 2,
        "function": "f",  # read from the file, not the worker's
        "code": "return [0][n]",
    }
    assert checks[2]["raised_at"]["function"] == "<module>"  # a def line runs around its body


def test_lines_are_counted_as_python_counts_them_and_a_long_one_is_marked_cut() -> None:
    source = b"x = '\x0c'\r\ny = 1\x0c\rclass A:\n    def f(self):\n        return " + b"1" * 400
    files = {"block_allocator.py": source + b"\n"}
    checks = rows(("block_allocator.py", 2), ("block_allocator.py", 5))
    [file] = code_marks(checks, files, files)
    assert [check["raised_at"]["function"] for check in checks] == ["<module>", "f"]
    assert checks[0]["raised_at"]["code"] == "y = 1"
    assert checks[1]["raised_at"]["code"].endswith("1…")
    lines = file["excerpts"][0][1].split("\n")
    assert len(lines) == 5
    assert lines[4].endswith("…")  # fmt: skip


def test_a_line_the_file_lacks_a_file_not_run_as_written_or_a_skipped_check_names_nothing() -> None:
    files = {"block_allocator.py": b"x = 1\n", "kv_cache_manager.py": b"import sys\n"}
    ran = files | {"kv_cache_manager.py": b"raise ImportError('not run')\n"}
    checks = rows(("block_allocator.py", 2), ("kv_cache_manager.py", 1), ("missing.py", 1))
    checks += rows(("block_allocator.py", 1), status="skipped")  # left to another part
    assert code_marks(checks, files, ran) == []
    assert [check["raised_at"] for check in checks] == [{}, {}, {}, {}]


def test_a_long_file_is_shown_around_its_marks_only() -> None:
    source = "".join(f"line_{number} = {number}\n" for number in range(1, 5001)).encode()
    files = {"block_allocator.py": source}
    checks = rows(("block_allocator.py", 100), ("block_allocator.py", 4990))
    [file] = code_marks(checks, files, files)
    runs = [(first, text.count("\n") + 1) for first, text in file["excerpts"]]
    assert runs == [(80, 41), (4970, 31)]
    assert file["excerpts"][0][1].splitlines()[20] == "line_100 = 100"
