"""The grade's outputs, a module per job:

- `model.py`: `bounded`, the report cleaned and cut as every output holds it;
- `writers.py`: `write_all`, the five files of one grade (JSON, Markdown, HTML, Gradescope, JUnit);
- `render.py`: how a page is drawn: the jinja2 templates in `templates/` (`base.html` holds the
  one head and policy, `style.css` the one stylesheet), autoescaped for HTML;
- `formats.py`: values and labels as every output writes them; `markdown.py`: text made inert
  in Markdown; `charts.py` and `svg.py`: the charts; `i18n.py`: the kit's words in two languages;
- `summary.py` (the terminal's), `compare.py` (two reports), `leaderboard.py` (grade-all's);
- `batching.py`: serving modelled by counting tokens, and static batching, the baseline the
  report plots a scheduler against (the full kit's simulator adds the other schemes).
"""
