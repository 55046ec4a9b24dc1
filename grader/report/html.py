"""`report.html`: the grade as one self-contained page, for someone who has never seen the kit.

No network and no script: the style is inline, the charts are inline SVG (`svg.py`), and a
Content-Security-Policy forbids anything else, so even a string that escaped escaping could
neither run nor fetch. Every string taken from the report goes through `html.escape`, since
messages carry the candidate's exception text and file names. Information never rests on colour
or on a background alone: each bar carries its number, each status its word, and the page prints
(bars are drawn with borders, which print whatever the browser's background setting).

The kit's own words come from `i18n.py`, in the report's `language`; what the checks say stays
as they wrote it. The value formatters at the top are shared with the Markdown report and the
summary. Sections that other parts of the kit may add (`integration`, `sections.scheduling`, a
part's `note`) are shown when present and left out when absent.
"""

import math
import textwrap
from html import escape

from grader.report import svg
from grader.report.i18n import language, more_points, part_asks, part_title, tr, ungraded_reason

CSP = "default-src 'none'; style-src 'unsafe-inline'"

STYLE = """
:root{--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--part:#bf8700;--mute:#59636e;--line:#d1d9e0;
 --soft:#f6f8fa}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans CJK SC","PingFang SC",
 "Microsoft YaHei",sans-serif;color:#1f2328;max-width:60rem;margin:2rem auto;padding:0 1rem}
h1{font-size:1.5rem;margin:0}
h2{font-size:1.2rem;margin:2.2rem 0 .8rem;padding-bottom:.3rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:0 0 .4rem}
.total{font-size:3.2rem;font-weight:700;line-height:1.1;margin:.6rem 0 .2rem}
.total small{font-size:1.3rem;font-weight:400;color:var(--mute)}
.muted{color:var(--mute)}
.asks{color:var(--mute);font-size:.9rem;margin:.1rem 0}
.box{border:2px solid var(--bad);border-radius:6px;padding:.2rem 1rem;margin:1.5rem 0}
.box h2{border:0;margin:.6rem 0 0}
.errors h2{color:var(--bad)}
.flags{border-color:var(--warn)}
.flags h2{color:var(--warn)}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.35rem .5rem;border-bottom:1px solid var(--line)}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.nowrap{white-space:nowrap}
.meter{display:flex;align-items:center;gap:.5rem;white-space:nowrap}
.bar{display:inline-block;width:10rem;border:1px solid var(--mute);border-radius:3px;
 padding:1px;vertical-align:middle}
.bar span{display:block;height:0;border-top:.7rem solid var(--part);min-width:1px}
.bar.full span{border-top-color:var(--ok)}
.bar.none span{border-top:0;height:.7rem}
.bar.big{width:20rem}
.bar.big span{border-top-width:1rem}
.check{border:1px solid var(--line);border-left:4px solid var(--bad);border-radius:6px;
 padding:.6rem .9rem;margin:.8rem 0}
.tag{font-size:.72rem;font-weight:600;text-transform:uppercase;letter-spacing:.03em;color:#fff;
 background:var(--bad);border:1px solid var(--bad);border-radius:4px;padding:.05rem .4rem;
 margin-right:.4rem}
.tag.passed{background:var(--ok);border-color:var(--ok)}
.tag.skipped,.tag.provisional{background:var(--mute);border-color:var(--mute)}
.message{white-space:pre-wrap;margin:.3rem 0}
.note{margin:.3rem 0}
.ungraded{color:var(--mute);font-style:italic;margin:.2rem 0}
.bad{color:var(--bad)}
pre,code{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--soft);border:1px solid var(--line);border-radius:6px;padding:.6rem .8rem;
 overflow-x:auto;margin:.3rem 0}
summary{cursor:pointer;color:var(--mute)}
ul.passed{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.2rem 1.2rem}
ul.passed li::before{content:"\\2713  ";color:var(--ok)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{color:var(--mute)}
dd{margin:0;overflow-wrap:anywhere}
figure{margin:1rem 0}
svg{max-width:100%;height:auto}
@media print{
 body{max-width:none;margin:0;font-size:10pt}
 h2{break-after:avoid}
 pre{white-space:pre-wrap;overflow-wrap:anywhere}
 .check,tr,.box,figure{break-inside:avoid}
 details::details-content{content-visibility:visible;display:contents}
 .tag{color:#1f2328;background:none}
 .bar,.bar span{print-color-adjust:exact;-webkit-print-color-adjust:exact}
}
"""

# -- values, as every human-facing output writes them -----------------------------------------


def points(value: float) -> str:
    """A score without trailing zeros: 15, 12.5, 2.33."""
    return f"{value:g}"


def duration(seconds: float) -> str:
    """A time in the unit that suits it, three significant digits: 412 µs, 1.25 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def share(score: float, max_score: float) -> float:
    """The share of the maximum that was scored, 0 when there was nothing to score."""
    return score / max_score if max_score else 0.0


def graded(part: dict) -> bool:
    """Whether a part was graded at all: a part without checks only carries its note."""
    return bool(part["checks"])


def part_score(part: dict) -> str:
    """A part's score over its maximum; a dash for a part that was not graded."""
    return f"{points(part['score'])} / {points(part['max_score'])}" if graded(part) else "-"


def ungraded_notes(part: dict, lang: str = "en", shown=points) -> list[str]:
    """A part's points not graded here, one phrase per reason ("5 more graded by the hiring
    team's kit"), each figure written by `shown`; none for a report without the field."""
    items = part.get("ungraded") or []
    return [more_points(lang, shown(i["points"]), i["reason"]) for i in items if i["points"]]


def total_ungraded(report: dict) -> dict:
    """The report's points not graded here, by reason over all its parts, as a part's
    `ungraded` field (`ungraded_notes` reads it)."""
    by_reason: dict[str, float] = {}
    for part in report["parts"].values():
        for item in part.get("ungraded") or []:
            by_reason[item["reason"]] = by_reason.get(item["reason"], 0.0) + item["points"]
    return {"ungraded": [{"reason": r, "points": round(p, 2)} for r, p in by_reason.items()]}


def skipped_label(check: dict, lang: str = "en") -> str:
    """What a skipped check's line says after its name: its points, why they are not graded here,
    and its message where that says more: "(2.05 points, graded by the hiring team's kit): runs
    only in the full kit: ...", "(9 points, needs a CUDA device)"."""
    message = check["message"]
    reason = ungraded_reason(lang, message)
    label = f"({tr(lang, 'skipped_check', points=points(check['max_points']), reason=reason)})"
    return label if message in (reason, ungraded_reason("en", message)) else f"{label}: {message}"


def tally(part: dict, lang: str = "en") -> str:
    """How many of a part's checks passed; the note (or "not graded") for an ungraded part."""
    checks = part["checks"]
    if not checks:
        return part.get("note") or tr(lang, "not_graded")
    count = sum(check["status"] == "passed" for check in checks)
    return tr(lang, "tally", passed=count, total=len(checks))


def verdict(benchmark: dict, lang: str = "en") -> str:
    """Whether a timing passed, against its limit on the candidate/reference ratio."""
    return tr(lang, "ok" if benchmark["passed"] else "too_slow", limit=f"{benchmark['limit']:g}x")


def origin(flag: dict) -> str:
    """Where an integrity flag comes from: the source scan (file and line) or a worker (part)."""
    place = flag.get("file", "") + (f":{flag['line']}" if "line" in flag else "")
    return ", ".join(item for item in (flag["source"], flag.get("part", ""), place) if item)


def check_anchor(part_id: str, check: dict) -> str:
    """The id of a check's card on the page, for links and for the summary."""
    return f"check-{part_id}-{check['name']}"


def shown(value: object) -> str:
    """An environment value as text: lists joined, a missing value as 'none'."""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return "none" if value is None else str(value)


# -- the page ---------------------------------------------------------------------------------


def render_html(report: dict) -> str:
    """The whole page for `report` (the dict of `report.json`), as one string."""
    lang = language(report)
    name = escape(report["submission"]["name"])
    total = f"{points(report['score'])} / {points(report['max_score'])}"
    body = "\n".join(
        section
        for section in [
            header(report, lang),
            errors(report["errors"], lang),
            integrity(report["integrity"], lang),
            parts_table(report["parts"], report, lang),
            *(part_section(part_id, part, lang) for part_id, part in report["parts"].items()),
            benchmarks(report["benchmarks"], report["parts"], lang),
            scheduling(report.get("sections", {}).get("scheduling"), lang),
            simulation(report.get("simulation"), lang),
            integration(report.get("integration"), lang),
            ignored(report["ignored_files"], lang),
            footer(report, lang),
        ]
        if section
    )
    return (
        f'<!doctype html>\n<html lang="{"zh-CN" if lang == "zh" else "en"}">\n<head>\n'
        f'<meta charset="utf-8">\n<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(tr(lang, 'title'))}: {name}, {escape(total)}</title>\n"
        f"<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def header(report: dict, lang: str) -> str:
    """The submission's name, the total score in big type with its bar, when and how it ran."""
    score, max_score = report["score"], report["max_score"]
    return (
        f'<header>\n<p class="muted">{escape(tr(lang, "kicker"))}</p>\n'
        f"<h1>{escape(report['submission']['name'])}</h1>\n"
        f'<p class="total" id="total">{escape(points(score))} <small>/ '
        f"{escape(points(max_score))} {escape(tr(lang, 'points'))}</small></p>\n"
        f"{meter(score, max_score, big=True)}\n"
        f"{ungraded_line(total_ungraded(report), lang)}"
        f'<p class="muted">{escape(how_it_ran(report, lang))}</p>\n'
        f"<p>{escape(tr(lang, 'intro'))}</p>\n</header>"
    )


def how_it_ran(report: dict, lang: str) -> str:
    """When the grade ran, for how long, with which profile and seed, on which device."""
    env = report["environment"]
    ran = tr(
        lang,
        "graded",
        started_at=report["started_at"],
        seconds=f"{report['seconds']:g}",
        profile=env["profile"],
        seed=shown(env["seed"]),
        device=env["device"],
    )
    isolation = report.get("isolation")
    return f"{ran} {isolation['description']}." if isolation else ran


def meter(score: float, max_score: float, big: bool = False) -> str:
    """A score as a bar (green when full) followed by its percentage, which carries the number."""
    fraction = share(score, max_score)
    kind = " full" if fraction >= 1 else " none" if fraction <= 0 else ""
    size = " big" if big else ""
    return (
        f'<div class="meter"><span class="bar{kind}{size}"><span style="width:{fraction:.1%}">'
        f"</span></span><span>{fraction:.0%}</span></div>"
    )


def ungraded_line(part: dict, lang: str) -> str:
    """A paragraph of the points not graded here (`ungraded_notes`); nothing when there are none."""
    notes = ungraded_notes(part, lang)
    return f'<p class="ungraded">{escape("; ".join(notes))}</p>\n' if notes else ""


def errors(messages: list[str], lang: str) -> str:
    """The grader's own failures, in a red box: the score below may be incomplete."""
    if not messages:
        return ""
    items = "\n".join(f"<pre>{escape(message)}</pre>" for message in messages)
    return (
        f'<section class="box errors">\n<h2>{escape(tr(lang, "errors_heading"))}</h2>\n'
        f"<p>{escape(tr(lang, 'errors_intro'))}</p>\n{items}\n</section>"
    )


def integrity(flags: list[dict], lang: str) -> str:
    """What the source scan and the workers noticed: a box near the top when there is any."""
    heading = escape(tr(lang, "integrity_heading"))
    intro = f'<p class="muted">{escape(tr(lang, "integrity_intro"))}</p>'
    if not flags:
        none = escape(tr(lang, "none"))
        return f'<section id="integrity">\n<h2>{heading}</h2>\n<p>{none}</p>\n</section>'
    rows = "".join(
        f"<li><code>{escape(origin(flag))}</code>: {escape(flag['message'])}</li>" for flag in flags
    )
    return (
        f'<section class="box flags" id="integrity">\n<h2>{heading} ({len(flags)})</h2>\n'
        f"{intro}\n<ul>{rows}</ul>\n</section>"
    )


def parts_table(parts: dict[str, dict], report: dict, lang: str) -> str:
    """One row per part (its title, what it asks, its score as a number and a bar, its checks),
    then the total."""
    rows = "\n".join(part_row(part_id, part, lang) for part_id, part in parts.items())
    total = (
        f'<tr class="total-row"><th>{escape(tr(lang, "total"))}</th>'
        f'<th class="num">{escape(points(report["score"]))} / '
        f"{escape(points(report['max_score']))}</th>"
        f"<td>{meter(report['score'], report['max_score'])}</td>"
        f"<td>{ungraded_line(total_ungraded(report), lang)}</td></tr>"
    )
    head = (
        f"<tr><th>{escape(tr(lang, 'part'))}</th>"
        f'<th class="num">{escape(tr(lang, "score"))}</th><th></th>'
        f"<th>{escape(tr(lang, 'checks'))}</th></tr>"
    )
    return (
        f'<section id="parts">\n<h2>{escape(tr(lang, "parts_heading"))}</h2>\n<table>\n'
        f"{head}\n{rows}\n{total}\n</table>\n</section>"
    )


def part_row(part_id: str, part: dict, lang: str) -> str:
    """A part's row; a part that was not graded shows its note in place of the score."""
    title = (
        f'<td><a href="#part-{escape(part_id)}">{escape(part_title(lang, part_id, part))}</a>'
        f'<div class="asks">{escape(part_asks(lang, part_id))}</div></td>'
    )
    if not graded(part):
        note = escape(tally(part, lang))
        return f'<tr class="part-row">{title}<td colspan="3" class="muted">{note}</td></tr>'
    notes = "".join(
        f'<div class="ungraded">{escape(note)}</div>' for note in ungraded_notes(part, lang)
    ) + "".join(
        f'<div class="muted">{escape(note)}</div>'
        for note in (part.get("note"), part.get("provisional"))
        if note
    )
    return (
        f'<tr class="part-row">{title}<td class="num">{escape(part_score(part))}</td>'
        f"<td>{meter(part['score'], part['max_score'])}</td>"
        f"<td>{escape(tally(part, lang))}{notes}</td></tr>"
    )


def part_section(part_id: str, part: dict, lang: str) -> str:
    """A part: what it asks, its notes, the checks that did not pass in full, then the passed
    and skipped ones by name."""
    title = escape(part_title(lang, part_id, part))
    lines = [f'<section id="part-{escape(part_id)}">']
    if graded(part):
        score = f"{part_score(part)} {tr(lang, 'points')}"
        lines.append(f'<h2>{title} <span class="muted">{escape(score)}</span></h2>')
    else:
        lines.append(f"<h2>{title}</h2>")
    lines.append(f'<p class="asks">{escape(part_asks(lang, part_id))}</p>')
    if ungraded_notes(part, lang):
        lines.append(ungraded_line(part, lang).rstrip())
    note = part.get("note") if graded(part) else tally(part, lang)
    if note:
        lines.append(f'<p class="note muted">{escape(note)}</p>')
    if part.get("provisional"):
        lines.append(
            f'<p class="note"><span class="tag provisional">{escape(tr(lang, "provisional"))}'
            f"</span>{escape(part['provisional'])}</p>"
        )
    checks = part["checks"]
    lines += [check_card(part_id, c, lang) for c in checks if c["status"] in ("failed", "error")]
    skipped = [c for c in checks if c["status"] == "skipped"]
    if skipped:
        items = "".join(
            f"<li><code>{escape(c['name'])}</code> {escape(skipped_label(c, lang))}</li>"
            for c in skipped
        )
        lines.append(f'<p>{escape(tr(lang, "skipped_list"))}</p>\n<ul class="skipped">{items}</ul>')
    passed = [c["name"] for c in checks if c["status"] == "passed"]
    if passed:
        items = "".join(f"<li>{escape(name)}</li>" for name in passed)
        lines.append(f'<p>{escape(tr(lang, "passed_list"))}</p>\n<ul class="passed">{items}</ul>')
    lines.append("</section>")
    return "\n".join(lines)


def check_card(part_id: str, check: dict, lang: str) -> str:
    """A check that failed or raised: its message and everything to reproduce it."""
    status = check["status"]
    score = f"{points(check['points'])} / {points(check['max_points'])} {tr(lang, 'points')}"
    lines = [
        f'<article class="check {escape(status)}" id="{escape(check_anchor(part_id, check))}">',
        f'<h3><span class="tag">{escape(tr(lang, status))}</span>{escape(check["name"])} '
        f'<span class="muted">{escape(score)}, {check["seconds"]:.2f} s</span></h3>',
        f'<p class="message">{escape(check["message"])}</p>',
    ]
    if check["counterexample"]:
        lines.append(f"<p>{escape(tr(lang, 'counterexample'))}</p>")
        lines.append(
            f'<pre class="counterexample"><code>{escape(check["counterexample"])}</code></pre>'
        )
    for key in ("hypothesis", "traceback"):
        if check[key]:
            lines.append(
                f"<details><summary>{escape(tr(lang, key))}</summary>"
                f"<pre>{escape(check[key])}</pre></details>"
            )
    lines.append("</article>")
    return "\n".join(lines)


def benchmarks(rows: list[dict], parts: dict[str, dict], lang: str) -> str:
    """The timings against the reference: per part, a chart of each ratio beside its limit,
    then every figure in a table."""
    heading = f"<h2>{escape(tr(lang, 'timings_heading'))}</h2>"
    if not rows:
        none = escape(tr(lang, "no_timings"))
        return f'<section id="timings">\n{heading}\n<p>{none}</p>\n</section>'
    charts = []
    for part_id in dict.fromkeys(row["part"] for row in rows):
        part = parts.get(part_id, {"title": part_id})
        charts.append(
            timing_chart(
                part_title(lang, part_id, part), [r for r in rows if r["part"] == part_id], lang
            )
        )
    head = "".join(f"<th>{escape(tr(lang, key))}</th>" for key in ("benchmark", "part")) + "".join(
        f'<th class="num">{escape(tr(lang, key))}</th>'
        for key in ("candidate", "reference", "ratio")
    )
    head += f"<th>{escape(tr(lang, 'verdict'))}</th>"
    body = "\n".join(benchmark_row(row, lang) for row in rows)
    return (
        f'<section id="timings">\n{heading}\n<p>{escape(tr(lang, "timings_intro"))}</p>\n'
        f"{''.join(charts)}\n<table>\n<tr>{head}</tr>\n{body}\n</table>\n</section>"
    )


def timing_chart(title: str, rows: list[dict], lang: str) -> str:
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
    chart = svg.bar_chart(title, labels, series, tr(lang, "ratio_axis"))
    return f'<figure class="chart timing-chart">{chart}</figure>'


def chart_label(name: str, width: int, lines: int = 2) -> str:
    """A benchmark's name wrapped to `width` characters, on at most `lines` lines (the chart
    has room for two under its axis)."""
    wrapped = textwrap.wrap(name, width) or [""]
    if len(wrapped) > lines:
        rest = " ".join(wrapped[lines - 1 :])
        wrapped = [*wrapped[: lines - 1], rest[: width - 1] + "…"]
    return "\n".join(wrapped)


def shared_fields(fields: list[list[str]]) -> int:
    """How many leading fields every name has in common, leaving each at least one of its own."""
    count = 0
    for column in zip(*(name[:-1] for name in fields), strict=False):
        if len(set(column)) > 1:
            break
        count += 1
    return count


def benchmark_row(row: dict, lang: str) -> str:
    numbers = (
        duration(row["candidate_seconds"]),
        duration(row["reference_seconds"]),
        f"{row['ratio']:.2f}x",
    )
    cells = "".join(f'<td class="num">{escape(number)}</td>' for number in numbers)
    judged = escape(verdict(row, lang))
    judged = judged if row["passed"] else f'<b class="bad">{judged}</b>'
    return (
        f"<tr><td>{escape(row['name'])}</td><td>{escape(row['part'])}</td>{cells}"
        f'<td class="nowrap">{judged}</td></tr>'
    )


def scheduling(section: dict | None, lang: str) -> str:
    """Tokens per step of the candidate's scheduler against static batching, on one trace."""
    if not section:
        return ""
    runs = scheduling_runs(section, lang)
    chart = svg.line_chart(
        tr(lang, "scheduling_chart"),
        tr(lang, "step"),
        tr(lang, "tokens_per_step"),
        {
            name: [(step, tokens) for step, tokens in enumerate(counts, 1)]
            for name, counts in runs.items()
        },
    )
    intro = scheduling_intro(section, lang)
    figures = "".join(
        f"<li>{escape(steps_taken(name, counts, lang))}</li>" for name, counts in runs.items()
    )
    if section.get("drained") is False:
        figures += f'<li class="bad">{escape(tr(lang, "not_drained"))}</li>'
    return (
        f'<section id="scheduling">\n<h2>{escape(tr(lang, "scheduling_heading"))}</h2>\n'
        f"<p>{escape(intro)}</p>\n"
        f'<figure class="chart scheduling-chart">{chart}</figure>\n<ul>{figures}</ul>\n</section>'
    )


def scheduling_intro(section: dict, lang: str) -> str:
    """What the scheduling comparison ran: the trace's size, the pool and the seats."""
    return tr(
        lang,
        "scheduling_intro",
        requests=len(section.get("trace", [])),
        num_blocks=section.get("num_blocks", "?"),
        block_size=section.get("block_size", "?"),
        max_num_seqs=section.get("max_num_seqs", "?"),
    )


def scheduling_runs(section: dict, lang: str) -> dict[str, list[int]]:
    """Tokens per step of each run the section holds: the candidate's, then static batching's."""
    runs = {
        tr(lang, "your_scheduler"): section.get("tokens_per_step"),
        tr(lang, "static_batching"): section.get("static_tokens_per_step"),
    }
    return {name: counts for name, counts in runs.items() if counts}


def steps_taken(name: str, counts: list[int], lang: str) -> str:
    """How long a run took and how busy it kept the batch."""
    mean = sum(counts) / len(counts) if counts else math.nan
    return tr(
        lang, "steps_taken", name=name, steps=len(counts), tokens=sum(counts), mean=f"{mean:.2f}"
    )


def simulation(figures: dict | None, lang: str) -> str:
    """The kit's own simulation (`make simulate`): why paging and continuous batching win."""
    if not figures:
        return ""
    header, *rows = figures["rows"]
    head = "".join(f"<th>{escape(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    charts = "".join(
        f'<figure class="chart">{svg.draw(spec)}</figure>' for spec in figures["charts"]
    )
    return (
        f'<section id="simulation">\n<h2>{escape(tr(lang, "simulation_heading"))}</h2>\n'
        f'<p class="muted">{escape(tr(lang, "simulation_intro"))}</p>\n'
        f"<p>{escape(figures['headline'])}</p>\n"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>\n{charts}\n</section>"
    )


def integration(check: dict | None, lang: str) -> str:
    """The end-to-end engine check: its status, what it said, and its figures. Not scored."""
    if not check:
        return ""
    status = check.get("status", "skipped")
    figures = "".join(
        f"<dt>{escape(str(key))}</dt><dd>{escape(shown(value))}</dd>"
        for key, value in check.get("figures", {}).items()
    )
    tag = escape(tr(lang, status) if status in ("passed", "failed", "skipped") else status)
    return (
        f'<section id="integration">\n<h2>{escape(tr(lang, "integration_heading"))}</h2>\n'
        f'<p class="muted">{escape(tr(lang, "integration_intro"))}</p>\n'
        f'<p class="message"><span class="tag {escape(status)}">{tag}</span>'
        f"{escape(check.get('message', ''))}</p>\n"
        f"{f'<dl>{figures}</dl>' if figures else ''}\n</section>"
    )


def ignored(names: list[str], lang: str) -> str:
    """Files in the submission that the grader did not read."""
    if not names:
        return ""
    items = "".join(f"<li><code>{escape(name)}</code></li>" for name in names)
    return (
        f'<section id="ignored">\n<h2>{escape(tr(lang, "ignored_heading"))}</h2>\n'
        f'<p class="muted">{escape(tr(lang, "ignored_intro"))}</p>\n<ul>{items}</ul>\n</section>'
    )


def footer(report: dict, lang: str) -> str:
    """The environment the grade ran in and the hashes of the files that were graded."""
    env = "".join(
        f"<tr><th>{escape(key)}</th><td>{escape(shown(value))}</td></tr>"
        for key, value in report["environment"].items()
    )
    submission = report["submission"]
    files = "".join(
        f"<tr><td><code>{escape(name)}</code></td><td><code>{escape(digest)}</code></td></tr>"
        for name, digest in submission["files"].items()
    )
    return (
        f'<footer id="environment">\n<h2>{escape(tr(lang, "environment_heading"))}</h2>\n'
        f"<table>\n{env}\n</table>\n<h2>{escape(tr(lang, 'submission_heading'))}</h2>\n"
        f"<dl><dt>name</dt><dd>{escape(submission['name'])}</dd>"
        f"<dt>path</dt><dd><code>{escape(submission['path'])}</code></dd></dl>\n"
        f"<table>\n<tr><th>{escape(tr(lang, 'file'))}</th><th>sha256</th></tr>\n{files}\n"
        "</table>\n</footer>"
    )
