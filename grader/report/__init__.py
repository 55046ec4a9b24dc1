"""The grade's outputs, a module per job:

- `model.py`: `bounded`, the report cleaned and cut as every output holds it;
- `writers.py`: `write_all`, the five files of one grade (JSON, Markdown, HTML, Gradescope, JUnit);
- `render.py`: how a page is drawn: the jinja2 templates in `templates/` (`base.html` holds the
  one head and policy, `style.css` the one stylesheet), autoescaped for HTML;
- `formats.py`: values and labels as every output writes them; `markdown.py`: text made inert
  in Markdown; `charts.py` and `svg.py`: the charts; `i18n.py`: the kit's words in two languages
  (gettext catalogs, `locale/`); `messages.py`: what the checks said (by id), in the report's
  language;
- `diagnosis.py` (what is most wrong, in a sentence each) and `debrief.py` (what to ask the
  candidate, the full kit's texts): the answer a report opens with;
- `summary.py` (the terminal's), `compare.py` (two reports);
- a drive's pages (`grader/drive/` writes them): `leaderboard.py` (a row per submission),
  `items.py` (a row per check: the item analysis; `attempts.py`, which parts a submission
  attempted), `reviews.py` (the reviewer's notes file).

It draws what the grading recorded and imports nothing of where candidate code runs
(`grader/sandbox/`) or of how it is scored (`grader/scoring/`: the static-batching baseline the
report plots a scheduler against is computed there, in `batching.py`).
"""
