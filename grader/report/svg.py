"""Small self-contained SVG charts for the reports: a line chart and a grouped bar chart.

Each function returns one `<svg>` element as a string, ready to inline in HTML or to save as a
`.svg` file: a fixed viewBox (it scales to its container and prints sharp), black text in the
generic sans-serif font, no script, no external font or style sheet, and every piece of text
escaped with `html.escape` (characters XML cannot hold replaced). Series are told apart by
colour (a palette safe for colour-blind readers) and, for lines, by dash pattern too, so a
black-and-white print stays readable.
"""

import html
import math
import re

WIDTH = 720
PLOT_HEIGHT = 300  # the plot area; the legend adds one line per series below it
LEFT, RIGHT, TOP = 72, 24, 44
LEGEND_LINE = 18
LABEL_LINE = 13  # between the lines of a category's label
# Okabe-Ito colours and dash patterns, cycled per series.
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000")
DASHES = ("", "8 4", "2 3", "10 3 2 3")
NOT_XML = re.compile(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def line_chart(
    title: str, x_label: str, y_label: str, series: dict[str, list[tuple[float, float]]]
) -> str:
    """Each series as a polyline through its `(x, y)` points, on axes that hold every point.

    The x axis spans the points; the y axis starts at 0 (or below, for negative values) and
    ends at a round value. A series with one point is drawn as a dot; a chart without points
    shows empty axes and says so.
    """
    points = [point for values in series.values() for point in values]
    x_low = min((x for x, _ in points), default=0)
    x_high = max((x for x, _ in points), default=1)
    if not x_high > x_low:
        x_high = x_low + max(1.0, abs(x_low))
    x_ticks = [tick for tick in ticks(x_low, x_high) if x_low <= tick <= x_high]
    y_ticks = ticks(min([0, *(y for _, y in points)]), max((y for _, y in points), default=1))
    frame = Frame(x_low, x_high, y_ticks[0], y_ticks[-1])
    parts = [frame.y_axis(y_ticks, y_label), frame.x_axis(x_ticks, x_label)]
    for index, values in enumerate(series.values()):
        colour, dash = COLOURS[index % len(COLOURS)], DASHES[index % len(DASHES)]
        coords = [(frame.x(x), frame.y(y)) for x, y in values]
        if len(coords) == 1:
            parts.append(
                f'<circle cx="{coords[0][0]:.1f}" cy="{coords[0][1]:.1f}" r="3" fill="{colour}"/>'
            )
        elif coords:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            parts.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" '
                f'stroke-width="2"{dashed}/>'
            )
    if not points:
        parts.append(frame.note("no data"))
    legend = [(name, colour_of(i), DASHES[i % len(DASHES)]) for i, name in enumerate(series)]
    return svg(title, parts, legend, line_legend=True)


def missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def draw(spec: dict) -> str:
    """A chart from plain data, as a report stores it: `{"kind": "line" | "bar", "args": the
    chart function's keyword arguments}` (series points may be lists)."""
    return {"line": line_chart, "bar": bar_chart}[spec["kind"]](**spec["args"])


def bar_chart(
    title: str, categories: list[str], series: dict[str, list[float | None]], unit: str
) -> str:
    """One group of bars per category, one bar per series, each labelled with its value.

    `series[name][i]` is the value for `categories[i]`; None or NaN draws no bar (a series
    that has no figure for that category). A newline in a category starts another label line;
    the legend moves down to leave room for them all.
    `unit` labels the y axis, which starts at 0.
    """
    for name, values in series.items():
        if len(values) != len(categories):
            raise ValueError(
                f"series {name!r} has {len(values)} values for {len(categories)} categories: "
                "give one value per category (None for none)"
            )
    values = [v for vs in series.values() for v in vs if not missing(v)]
    y_ticks = ticks(min([0, *values]), max(values, default=1))
    frame = Frame(0, max(len(categories), 1), y_ticks[0], y_ticks[-1])
    parts = [frame.y_axis(y_ticks, unit), frame.x_axis([], "")]
    group = frame.width / max(len(categories), 1)
    bar = group * 0.9 / max(len(series), 1)
    for c, category in enumerate(categories):
        lines = category.split("\n")
        spans = "".join(
            f'<tspan x="{frame.x(c + 0.5):.1f}" dy="{0 if i == 0 else LABEL_LINE}">'
            f"{escape(line)}</tspan>"
            for i, line in enumerate(lines)
        )
        parts.append(f'<text y="{frame.bottom + 16:.1f}" text-anchor="middle">{spans}</text>')
        for s, values_of in enumerate(series.values()):
            value = values_of[c]
            if missing(value):
                continue
            left = frame.x(c) + group * 0.05 + s * bar
            top, base = sorted((frame.y(value), frame.y(0)))
            parts.append(
                f'<rect x="{left:.1f}" y="{top:.1f}" width="{bar:.1f}" '
                f'height="{base - top:.1f}" fill="{colour_of(s)}"/>'
            )
            if bar >= 20:
                parts.append(
                    f'<text x="{left + bar / 2:.1f}" y="{top - 4:.1f}" '
                    f'text-anchor="middle" font-size="9">{escape(number(value))}</text>'
                )
    if not categories:
        parts.append(frame.note("no data"))
    legend = [(name, colour_of(i), "") for i, name in enumerate(series)]
    label_lines = max((category.count("\n") + 1 for category in categories), default=1)
    return svg(title, parts, legend, line_legend=False, below=LABEL_LINE * max(0, label_lines - 2))


class Frame:
    """The plot area and the map from data coordinates to SVG coordinates."""

    def __init__(self, x_low: float, x_high: float, y_low: float, y_high: float) -> None:
        self.x_low, self.x_high, self.y_low, self.y_high = x_low, x_high, y_low, y_high
        self.width = WIDTH - LEFT - RIGHT
        self.bottom = TOP + PLOT_HEIGHT

    def x(self, value: float) -> float:
        return LEFT + (value - self.x_low) / (self.x_high - self.x_low) * self.width

    def y(self, value: float) -> float:
        return self.bottom - (value - self.y_low) / (self.y_high - self.y_low) * PLOT_HEIGHT

    def y_axis(self, y_ticks: list[float], label: str) -> str:
        """Horizontal grid lines at the ticks, their values, and the axis label, turned."""
        parts = []
        for tick in y_ticks:
            y = self.y(tick)
            parts.append(
                f'<line x1="{LEFT}" x2="{LEFT + self.width}" y1="{y:.1f}" y2="{y:.1f}" '
                'stroke="#d0d0d0"/>'
            )
            parts.append(
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{escape(number(tick))}</text>"
            )
        middle = TOP + PLOT_HEIGHT / 2
        parts.append(
            f'<text transform="translate(16 {middle:.1f}) rotate(-90)" '
            f'text-anchor="middle">{escape(label)}</text>'
        )
        return "\n".join(parts)

    def x_axis(self, x_ticks: list[float], label: str) -> str:
        """The axis line, tick marks with their values, and the label under them."""
        parts = [
            f'<line x1="{LEFT}" x2="{LEFT + self.width}" y1="{self.bottom}" '
            f'y2="{self.bottom}" stroke="#000"/>'
        ]
        for tick in x_ticks:
            x = self.x(tick)
            parts.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.bottom}" '
                f'y2="{self.bottom + 5}" stroke="#000"/>'
            )
            parts.append(
                f'<text x="{x:.1f}" y="{self.bottom + 18}" text-anchor="middle">'
                f"{escape(number(tick))}</text>"
            )
        if label:
            parts.append(
                f'<text x="{LEFT + self.width / 2:.1f}" y="{self.bottom + 38}" '
                f'text-anchor="middle">{escape(label)}</text>'
            )
        return "\n".join(parts)

    def note(self, text: str) -> str:
        """A line of text in the middle of the plot area."""
        return (
            f'<text x="{LEFT + self.width / 2:.1f}" y="{TOP + PLOT_HEIGHT / 2:.1f}" '
            f'text-anchor="middle">{escape(text)}</text>'
        )


def svg(
    title: str,
    parts: list[str],
    legend: list[tuple[str, str, str]],
    line_legend: bool,
    below: int = 0,
) -> str:
    """The `<svg>` element: title on top, the plot, then one legend line per series, `below`
    more pixels down (for category labels of more than two lines)."""
    top = TOP + PLOT_HEIGHT + 52 + below
    height = top + LEGEND_LINE * len(legend)
    items = []
    for i, (name, colour, dash) in enumerate(legend):
        y = top + LEGEND_LINE * i
        if line_legend:
            dashed = f' stroke-dasharray="{dash}"' if dash else ""
            items.append(
                f'<line x1="{LEFT}" x2="{LEFT + 28}" y1="{y - 4}" y2="{y - 4}" '
                f'stroke="{colour}" stroke-width="2"{dashed}/>'
            )
        else:
            items.append(
                f'<rect x="{LEFT + 8}" y="{y - 10}" width="12" height="12" fill="{colour}"/>'
            )
        items.append(f'<text x="{LEFT + 36}" y="{y}">{escape(name)}</text>')
    body = "\n".join([*parts, *items])
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" font-family="sans-serif" font-size="12" '
        f'fill="#000">\n<title>{escape(title)}</title>\n'
        f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>\n'
        f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">'
        f"{escape(title)}</text>\n{body}\n</svg>\n"
    )


def colour_of(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Evenly spaced round values (steps of 1, 2, 2.5 or 5 times a power of ten) from at or
    below `low` to at or above `high`, at most `count + 1` intervals: the finest such step."""
    if not (high - low) / count > 0:
        high = low + max(1.0, abs(low))
    magnitude = 10 ** math.floor(math.log10((high - low) / count))
    for step in (m * magnitude for m in (1, 2, 2.5, 5, 10, 20)):
        first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        if tick(first, step) > low:
            first -= 1
        if tick(last, step) < high:
            last += 1
        if last - first <= count + 1:
            break
    return [tick(i, step) for i in range(first, last + 1)]


def tick(i: int, step: float) -> float:
    """`i * step` without the float noise of the product (0.30000000000000004 is 0.3)."""
    return float(f"{i * step:.12g}")


def escape(text: str) -> str:
    """`text` safe inside XML: markup escaped, and characters XML cannot hold (controls, lone
    surrogates) replaced by U+FFFD."""
    return html.escape(NOT_XML.sub("\ufffd", text))


def number(value: float) -> str:
    """A tick or bar value, short: 40,000, 2.5, 0.125, 96.3."""
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:.3g}"
