"""The kit's simulation as its page (`simulation.html`) shows it, in the report's language.

`report.json["simulation"]` holds `full_kit/simulate.py`'s headline, table and charts (as data) in
English, as the simulation wrote them; `in_language` gives a copy whose every line of the
headline, cell of the table and text of a chart (title, axes, unit, series' names, categories)
is in `lang`, through the `checks` catalog's entries of context "simulation" (`messages.py`).
Text no template matches is shown as it was written.
"""

from functools import partial

from grader.report.i18n import WRITTEN_IN
from grader.report.messages import translated

CHART_TEXTS = ("title", "x_label", "y_label", "unit")  # a chart's own words, beside its series


def in_language(simulation: dict, lang: str) -> dict:
    """A copy of `simulation` (headline, rows, charts) with its words in `lang`."""
    if lang == WRITTEN_IN:
        return simulation
    words = partial(words_in, lang)
    return {
        **simulation,
        "headline": "\n".join(words(line) for line in simulation["headline"].split("\n")),
        "rows": [[words(cell) for cell in row] for row in simulation["rows"]],
        "charts": [chart_in_language(spec, lang) for spec in simulation["charts"]],
    }


def words_in(lang: str, text: str) -> str:
    """One piece of the simulation's text in `lang`; as it is where no template matches."""
    return translated(lang, text, "simulation")


def chart_in_language(spec: dict, lang: str) -> dict:
    """A chart's spec (`svg.draw`'s) with its texts, series' names and categories in `lang`."""
    words = partial(words_in, lang)
    args = spec["args"]
    shown = {key: words(args[key]) for key in CHART_TEXTS if key in args}
    shown["series"] = {words(name): values for name, values in args["series"].items()}
    if "categories" in args:
        shown["categories"] = [words(category) for category in args["categories"]]
    return {**spec, "args": {**args, **shown}}
