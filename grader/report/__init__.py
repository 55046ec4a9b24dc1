"""The grade's outputs, a module per job:

- `model.py`: `bounded`, the report cleaned and cut as every output holds it;
- `writers.py`: `write_all`, the five files of one grade (JSON, Markdown, HTML, Gradescope, JUnit);
- `render.py`: how a page is drawn: the jinja2 templates in `templates/` (`base.html` holds the
  one head and policy, `style.css` the one stylesheet), autoescaped for HTML;
- `formats.py`: values and labels as every output writes them; `markdown.py`: text made inert
  in Markdown; `charts.py` and `svg.py`: the charts; `i18n.py`: the kit's words in two languages;
- `diagnosis.py` (what is most wrong, in a sentence each) and `debrief.py` (what to ask the
  candidate, the full kit's texts): the answer a report opens with;
- `summary.py` (the terminal's), `compare.py` (two reports);
- a drive's (grade-all's): `leaderboard.py` (a row per submission), `items.py` (a row per check:
  the item analysis), `standing.py` (each report's percentile in the drive), `drive_files.py`
  (the drive's files, each written whole);
- `batching.py`: serving modelled by counting tokens, and static batching, the baseline the
  report plots a scheduler against (the full kit's simulator adds the other schemes).
"""
