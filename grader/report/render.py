"""How a page is drawn: one jinja2 `Environment` over `templates/`; the report's two pages.

Every page (`report.html`, `leaderboard.html`, `compare.html`, `pair.html`) extends `base.html`: one
head with the Content-Security-Policy, one stylesheet (`style.css`), no script, no external URL. The
`.html` templates autoescape every string; the charts (`charts.py`) are the only markup they are
given. `report.md` has no autoescape: its template passes every string from the report through the
filters of `markdown.py`. An undefined name is an error, never an empty string.
"""

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from grader.report import charts, formats, markdown
from grader.report.i18n import language, part_asks, part_title, tr

TEMPLATES = Path(__file__).parent / "templates"

ENV = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html"], default_for_string=False, default=False),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    extensions=["jinja2.ext.do"],
)
ENV.globals.update(
    tr=tr,
    part_title=part_title,
    part_asks=part_asks,
    points=formats.points,
    duration=formats.duration,
    ratio=formats.ratio,
    percent=formats.percent,
    share=formats.share,
    graded=formats.graded,
    part_score=formats.part_score,
    ungraded_notes=formats.ungraded_notes,
    total_ungraded=formats.total_ungraded,
    skipped_label=formats.skipped_label,
    tally=formats.tally,
    verdict=formats.verdict,
    status_word=formats.status_word,
    origin=formats.origin,
    check_anchor=formats.check_anchor,
    shown=formats.shown,
    how_it_ran=formats.how_it_ran,
    scheduling_intro=formats.scheduling_intro,
    scheduling_runs=formats.scheduling_runs,
    steps_taken=formats.steps_taken,
    timing_charts=charts.timing_charts,
    scheduling_chart=charts.scheduling_chart,
    simulation_charts=charts.simulation_charts,
    text_bar=markdown.text_bar,
)
ENV.filters.update(plain=markdown.plain, code_span=markdown.code_span, fence=markdown.fence)


def render(template: str, **context: object) -> str:
    """The template `template` (a name in `templates/`) filled in with `context`."""
    return ENV.get_template(template).render(**context)


def report_html(report: dict) -> str:
    """`report.html`: the whole page for `report` (the dict of `report.json`, `bounded`)."""
    return render("report.html", report=report, lang=language(report))


def report_markdown(report: dict) -> str:
    """`report.md`: the page's content as Markdown, in the same order."""
    return render("report.md", report=report, lang=language(report))
