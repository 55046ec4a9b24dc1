"""A timing chart's labels (`charts.chart_label`): a benchmark's name wrapped to the room under
its bar group, Chinese as wide as it is drawn, and the legend moved down to leave them room."""

import re

import pytest

from grader.report import svg
from grader.report.charts import CLOSING, LABEL_LINES, chart_label, columns

# A benchmark's name, and its pool's state, which the label must keep.
NAMES = [
    (
        "allocate/free cost growth from 1,000 to 200,000 blocks (nearly full; ratio: the "
        "candidate's growth over the reference's)",
        "nearly full",
    ),
    (
        "allocate/free 的开销从 1,000 个块到 200,000 个块的增长"
        "（几乎满；比值：提交的增长除以参考实现的）",  # noqa: RUF001
        "几乎满",
    ),
    ("前缀缓存的 prompt，1,000 个块的池（每个块都已缓存）", "每个块都已缓存"),  # noqa: RUF001
    ("get_physical_cache, 27,193 tokens in 4 sequences", "27,193 tokens"),
]


@pytest.mark.parametrize(("name", "state"), NAMES)
def test_a_label_fits_its_columns_and_keeps_the_state_of_the_pool(name: str, state: str) -> None:
    lines = chart_label(name, 24).split("\n")
    assert len(lines) <= LABEL_LINES
    for line in lines:  # closing punctuation may run past, never start a line
        assert columns(line) <= 24 + (2 if line[-1] in CLOSING else 0), line
        assert line[0] not in CLOSING, line
    joined = " ".join(lines)
    assert state in joined or state in "".join(lines), lines


def test_a_name_longer_than_the_label_ends_in_an_ellipsis() -> None:
    lines = chart_label("word " * 60, 24).split("\n")
    assert len(lines) == LABEL_LINES
    assert lines[-1].endswith("…")


def test_the_legend_moves_down_under_labels_of_more_than_two_lines() -> None:
    def height(label: str) -> float:
        chart = svg.bar_chart("t", [label], {"s": [1.0]}, "x")
        return float(re.search(r'viewBox="0 0 \d+ (\d+)"', chart)[1])

    assert height("a\nb\nc\nd\ne") == height("a\nb") + 3 * svg.LABEL_LINE
    assert height("a") == height("a\nb")
