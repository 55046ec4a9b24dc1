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
        "x = [-1][0] ** 2",  # -1 ** 2 is -(1 ** 2): the tree would change
        "b = sorted([3])[0].bit_length()",  # 3.bit_length() does not parse
        "c = [1][0]is None",  # 1is None parses only with a warning
        "[1, 2][0] = 5",  # a target, never a value
        "x = " + "+".join(["1"] * 3000),  # too deep to evaluate
        "s = '%0200000000d' % 1",  # a string built by %: not folded
        "y = " + " + ".join(["list(range(99999))"] * 50),  # past the budget of one line
    ],
)
def test_what_is_not_a_shorter_plain_constant_stays_as_written(line: str) -> None:
    assert folded_lines([line]) == [line]


@pytest.mark.parametrize(
    "binding",
    ["sorted = reversed", "from m import sorted", "def sorted(x): ...", "f = lambda sorted: 0"],
)
def test_a_builtin_the_script_binds_is_not_folded_on_any_line(binding: str) -> None:
    lines = [binding, "f(sorted(set(range(3)) - set())[0])"]
    assert folded_lines(lines) == lines


@pytest.mark.parametrize(
    "block",
    [
        ["for sorted in [reversed]:", "    pass"],
        ["try:", "    pass", "except ValueError as sorted:", "    pass"],
        ["def g():", "    global sorted"],
    ],
)
def test_a_builtin_bound_by_a_block_of_lines_is_not_folded(block: list[str]) -> None:
    lines = [*block, "f(sorted([3, 1])[0])"]
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


def test_the_budget_is_the_lines_not_each_expressions() -> None:
    """Ten arguments each within the budget, together ten times over it: the first one that
    fits is folded, no more."""
    [line] = folded_lines(["f(" + ", ".join(["len(list(range(49999)))"] * 10) + ")"])
    assert line.count("len(list(range(49999)))") == 9, line
