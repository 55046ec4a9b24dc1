"""The report page's charts, as `Markup` the templates insert as it is: the one place where
kit-made markup is marked safe.

`svg.py` draws them and escapes every piece of text it is given (a benchmark's name, a series'
name, a title from `report.json`), so no string from a report reaches the page unescaped.
"""

import unicodedata

from markupsafe import Markup

from grader.report import svg
from grader.report.formats import scheduling_runs
from grader.report.i18n import part_title, tr


def timing_charts(report: dict, lang: str) -> list[Markup]:
    """Per part with timings, a bar chart of each candidate/reference ratio beside its limit."""
    rows = report["benchmarks"]
    charts = []
    for part_id in dict.fromkeys(row["part"] for row in rows):
        part = report["parts"].get(part_id, {"title": part_id})
        title = part_title(lang, part_id, part)
        charts.append(timing_chart(title, [r for r in rows if r["part"] == part_id], lang))
    return charts


# Closing punctuation, Chinese (fullwidth) and ASCII: a line never starts with one (`wrap`).
CLOSING = frozenset("\uff09)\uff0c,\u3002.\uff1b;\uff1a:\u3001\u300d\u300f")
LABEL_LINES = 5  # under a timing chart's axis: a benchmark's name, its pool and its state


def timing_chart(title: str, rows: list[dict], lang: str) -> Markup:
    """One part's timings as bars: the candidate/reference ratio and its limit, side by side."""
    width = max(8, int((svg.WIDTH - svg.LEFT - svg.RIGHT) / len(rows) / 6.5))
    fields = [row["name"].split(", ") for row in rows]
    shared = shared_fields(fields) if len(rows) > 1 else 0
    if shared:  # "paged_attention_decode, float16, ...": the title says what all of them share
        title = f"{title}: {', '.join(fields[0][:shared])}"
    names = [", ".join(name[shared:]) for name in fields]
    series = {
        tr(lang, "ratio_series"): [row["ratio"] for row in rows],
        tr(lang, "limit_series"): [row["limit"] for row in rows],
    }
    labels = [chart_label(name, width) for name in names]
    return Markup(svg.bar_chart(title, labels, series, tr(lang, "ratio_axis")))


def chart_label(name: str, width: int) -> str:
    """A benchmark's name wrapped to `width` columns (`columns`: a Chinese character takes two),
    on at most `LABEL_LINES` lines, the last cut short with "…" where the name needs more."""
    wrapped = wrap(name, width) or [""]
    if len(wrapped) > LABEL_LINES:
        last = wrap(" ".join(wrapped[LABEL_LINES - 1 :]), width - 1)[0]
        wrapped = [*wrapped[: LABEL_LINES - 1], last + "…"]
    return "\n".join(wrapped)


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` columns, broken at spaces and beside a wide character
    (Chinese needs no space to break), never before closing punctuation (which may then run a
    column past); a word wider than a line is cut where the line ends."""
    lines, line = [], ""
    for unit in units(text):
        if unit == " ":
            line += " " if line else ""
            continue
        if line and columns(line + unit) > width and unit not in CLOSING:
            lines.append(line.rstrip())
            line = ""
        while columns(unit) > width:
            cut = max(1, width)
            lines.append(unit[:cut])
            unit = unit[cut:]
        line += unit
    return [*lines, line.rstrip()] if line.strip() else lines


def units(text: str) -> list[str]:
    """`text`'s words, each wide character alone, and a " " for each run of spaces."""
    found, word = [], ""
    for char in text:
        if char.isspace() or columns(char) > 1:
            found += [word] if word else []
            word = ""
            found += [" " if char.isspace() else char]
        else:
            word += char
    return found + ([word] if word else [])


def columns(text: str) -> int:
    """How many columns `text` takes: two for a wide (East Asian) character, one for another."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def shared_fields(fields: list[list[str]]) -> int:
    """How many leading fields every name has in common, leaving each at least one of its own."""
    count = 0
    for column in zip(*(name[:-1] for name in fields), strict=False):
        if len(set(column)) > 1:
            break
        count += 1
    return count


def scheduling_chart(section: dict, lang: str) -> Markup:
    """Tokens per step of the candidate's scheduler against static batching, on one trace."""
    series = {
        name: [(step, tokens) for step, tokens in enumerate(counts, 1)]
        for name, counts in scheduling_runs(section, lang).items()
    }
    chart = svg.line_chart(
        tr(lang, "scheduling_chart"), tr(lang, "step"), tr(lang, "tokens_per_step"), series
    )
    return Markup(chart)


def simulation_charts(figures: dict) -> list[Markup]:
    """The kit's simulation's charts, drawn from the data `report.json` holds (`svg.draw`)."""
    return [Markup(svg.draw(spec)) for spec in figures["charts"]]
