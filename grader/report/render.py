"""How a page is drawn: a jinja2 `Environment` over `templates/` per language, whose `_(id)` is
an entry of that language's catalog (`i18n.py`); the report's pages.

Every page (`report.html`, `simulation.html`, `leaderboard.html`, `compare.html`, `pair.html`)
extends `base.html`: one head with the Content-Security-Policy, one stylesheet (`style.css`), no
script, no external URL. The `.html` templates autoescape every string, and every value a
catalog entry is filled in with; the entry's own text is the kit's, trusted as markup (so no
entry a template uses holds `<`, `>` or `&`: test_catalogs.py); the charts (`charts.py`) are the
only other markup they are given.
`report.md` has no autoescape: its template passes every string from the report through the
filters of `markdown.py`. An undefined name, or an id in no catalog, is an error, never an empty
string.
"""

from functools import cache, partial
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from grader.report import charts, formats, markdown, simulation
from grader.report.debrief import debrief
from grader.report.diagnosis import diagnosis
from grader.report.i18n import LANGUAGES, implementation, language, part_asks, part_title, text
from grader.report.messages import in_language

TEMPLATES = Path(__file__).parent / "templates"
SIMULATION_PAGE = "simulation.html"  # the kit's simulation, beside report.html, which links to it

GLOBALS = dict(
    implementation=implementation,
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
    score_line=formats.score_line,
    standing_line=formats.standing_line,
    skipped_label=formats.skipped_label,
    tally=formats.tally,
    provisional_note=formats.provisional_note,
    provisional_reason=formats.provisional_reason,
    verdict=formats.verdict,
    status_word=formats.status_word,
    origin=formats.origin,
    check_anchor=formats.check_anchor,
    id_anchor=formats.id_anchor,
    code_anchor=formats.code_anchor,
    code_view=formats.code_view,
    raised_in_file=formats.raised_in_file,
    marked_excerpt=formats.marked_excerpt,
    failed_checks=formats.failed_checks,
    severity_word=formats.severity_word,
    shown=formats.shown,
    environment_value=formats.environment_value,
    graded_from=formats.graded_from,
    run_in=formats.run_in,
    code_span=markdown.code_span,
    how_it_ran=formats.how_it_ran,
    syntax_line=formats.syntax_line,
    code_excerpt=formats.code_excerpt,
    syntax_blame=formats.syntax_blame,
    syntax_failures=formats.syntax_failures,
    syntax_in_part=formats.syntax_in_part,
    syntax_part_line=formats.syntax_part_line,
    engine_message=formats.engine_message,
    engine_figures=formats.engine_figures,
    engine_checks=tuple(formats.ENGINE_CHECKS),
    simulation_page=SIMULATION_PAGE,
    scheduling_intro=formats.scheduling_intro,
    scheduling_runs=formats.scheduling_runs,
    steps_taken=formats.steps_taken,
    timing_charts=charts.timing_charts,
    scheduling_chart=charts.scheduling_chart,
    simulation_charts=charts.simulation_charts,
    text_bar=markdown.text_bar,
)
FILTERS = dict(plain=markdown.plain, code_span=markdown.code_span, fence=markdown.fence)


@cache
def environment(lang: str) -> Environment:
    """The templates' `Environment` in `lang`: `_(id, **values)` is an entry of `lang`'s catalog
    (jinja2's i18n extension, new style: the values are escaped in an `.html` template)."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"], default_for_string=False, default=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        extensions=["jinja2.ext.do", "jinja2.ext.i18n"],
    )
    env.install_gettext_callables(
        gettext=partial(text, lang),
        ngettext=lambda one, many, count: text(lang, one if count == 1 else many),
        newstyle=True,
    )
    env.globals.update(GLOBALS)
    env.filters.update(FILTERS)
    return env


def compile_templates() -> None:
    """Every template compiled in every language, here and now: a process that forks gradings
    does this once, before it forks, so that no grading compiles its pages again."""
    for lang in LANGUAGES:
        env = environment(lang)
        for name in env.list_templates():
            env.get_template(name)


def render(template: str, lang: str, **context: object) -> str:
    """The template `template` (a name in `templates/`) in `lang`, filled in with `context`."""
    return environment(lang).get_template(template).render(lang=lang, **context)


def report_html(report: dict, lang: str | None = None) -> str:
    """`report.html`: the whole page for `report` (the dict of `report.json`, `bounded`) in
    `lang`, the grader's words too (`messages.in_language`); by default in the report's own
    language (`i18n.language`), the one it was graded in."""
    lang = lang or language(report)
    unsafe = formats.safety_failures(report)  # read in English, as written
    return render("report.html", report=in_language(report, lang), lang=lang, unsafe=unsafe,
                  diagnosis=diagnosis(report, lang), debrief=debrief(report, lang))  # fmt: skip


def report_markdown(report: dict, lang: str | None = None) -> str:
    """`report.md`: the page's content as Markdown, in the same order and language."""
    lang = lang or language(report)
    unsafe = formats.safety_failures(report)
    return render("report.md", report=in_language(report, lang), lang=lang, unsafe=unsafe,
                  diagnosis=diagnosis(report, lang), debrief=debrief(report, lang))  # fmt: skip


def simulation_html(report: dict, lang: str | None = None) -> str:
    """`simulation.html`: the kit's simulation, the same in every report that holds it, in
    `lang`, by default the report's language (`simulation.in_language`; `report.json` keeps it
    in English)."""
    lang = lang or language(report)
    shown = simulation.in_language(report["simulation"], lang)
    return render(SIMULATION_PAGE, simulation=shown, lang=lang)
