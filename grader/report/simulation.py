"""The kit's simulation as its page (`simulation.html`) shows it, in the report's language.

`report.json["simulation"]` holds `full_kit/simulate.py`'s headline, table and charts (as data) in
English, each text with its record (`grader/said.py`); `in_language` gives a copy whose headline,
table cells and chart texts (title, axes, unit, series' names, categories) are in `lang`
(`messages.said_in`). Text without a record is shown as it was written.
"""

from grader.report.messages import field_in, said_in

CHART_TEXTS = ("title", "x_label", "y_label", "unit", "categories")  # a chart's own words


def in_language(simulation: dict, lang: str) -> dict:
    """A copy of `simulation` (headline, rows, charts) with its words in `lang`."""
    return {
        **simulation,
        "headline": said_in(lang, simulation, "headline"),
        "rows": said_in(lang, simulation, "rows"),
        "charts": [chart_in_language(spec, lang) for spec in simulation["charts"]],
    }


def chart_in_language(spec: dict, lang: str) -> dict:
    """A chart's spec (`svg.draw`'s) with its texts, series' names and categories in `lang`, and
    without their records (`svg.draw` takes its arguments as they are)."""
    args = spec["args"]
    shown = {key: said_in(lang, args, key) for key in CHART_TEXTS if key in args}
    series = without_records(args["series"])
    keys = args["series"].get("said_keys", {})
    shown["series"] = {str(field_in(lang, keys.get(name), name)): values
                       for name, values in series.items()}  # fmt: skip
    return {**spec, "args": without_records(args) | shown}


def without_records(holder: dict) -> dict:
    """`holder` without the records of its fields and keys (`said.recorded`)."""
    return {key: value for key, value in holder.items() if key not in ("said", "said_keys")}
