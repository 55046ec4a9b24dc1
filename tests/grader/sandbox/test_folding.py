"""A counterexample's constant sub-expressions written as their values (`folding.py`), and only
where the line then runs as before."""

import pytest

from grader.sandbox.folding import folded_lines


@pytest.mark.parametrize(
    ("line", "folded"),
    [
        ("allocator.free([sorted(set(range(1)) - set())[0]])", "allocator.free([0])"),
        ("f(sorted(set(range(10000)) - set())[7])  # -> 3", "f(7)  # -> 3"),
        (
            "assert raises(ValueError, lambda: a.incref(sorted(set(range(3)) - set())[1]))  # ",
            "assert raises(ValueError, lambda: a.incref(1))  # ",
        ),
        ("x = (len([1, 2]) + 1, t)", "x = (3, t)"),
        ("y = [sorted((3, 1, 2))[-1], -(2 - 5)]", "y = [3, 3]"),
        ("x = sorted({2, 1} | {3})", "x = [1, 2, 3]"),
    ],
)
def test_a_constant_sub_expression_is_written_as_its_value(line: str, folded: str) -> None:
    assert folded_lines([line]) == [folded]
    assert eval_both(line) == eval_both(folded)


@pytest.mark.parametrize(
    "line",
    [
        "x = sorted(set(range(8)) - {ids[0]})[2]",  # a name: the candidate's ids
        "y = [0] * 4",  # written longer as its value
        "z = set()",  # no literal for it
        "w = {2, 1} | {3}",  # a set: its order is not a literal's
        "q = [0][5]",  # raises: the line must still raise
        "r = sum(range(10 ** 30))",  # no power, no huge sizes
        "s = list(range(200000))[3]",  # past the evaluator's size bound
        'm = f"{sorted([2, 1])[0]}"',  # inside an f-string
        "assert False, ",  # not a statement of its own
        "t = 1.5 + 1.5",  # a float
        "u = 7 // 0",
    ],
)
def test_what_is_not_a_shorter_plain_constant_stays_as_written(line: str) -> None:
    assert folded_lines([line]) == [line]


def test_a_builtin_the_script_assigns_is_not_folded_on_any_line() -> None:
    lines = ["sorted = reversed", "f(sorted(set(range(3)) - set())[0])"]
    assert folded_lines(lines) == lines


def eval_both(line: str) -> object:
    """What `line` computes, its names stood in for: the value bound, or the call's argument."""
    seen: list[object] = []
    names = {
        "allocator": type("A", (), {"free": staticmethod(seen.append)}),
        "a": type("A", (), {"incref": staticmethod(seen.append)}),
        "raises": lambda kind, call: call() or True,
        "f": seen.append,
        "t": "t",
        "ValueError": ValueError,
    }
    exec(line, names)
    return seen or {key: value for key, value in names.items() if key in "xy"}
