"""`report.html`: the grade as one self-contained page, for someone who has never seen the kit.

No network: the style is inline and there is no script. Every string taken from the report goes
through `html.escape`, since messages carry the candidate's exception text and file names. The
value formatters at the top are shared with the Markdown report.
"""

from html import escape

STYLE = """
:root{--ok:#1a7f37;--bad:#cf222e;--part:#bf8700;--mute:#59636e;--line:#d1d9e0;--soft:#f6f8fa}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;
 max-width:60rem;margin:2rem auto;padding:0 1rem}
h1{font-size:1.5rem;margin:0}
h2{font-size:1.2rem;margin:2.2rem 0 .8rem;padding-bottom:.3rem;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:0 0 .4rem}
.total{font-size:3.2rem;font-weight:700;line-height:1.1;margin:.6rem 0 .2rem}
.total small{font-size:1.3rem;font-weight:400;color:var(--mute)}
.muted{color:var(--mute)}
.errors{border:2px solid var(--bad);background:#ffebe9;border-radius:6px;padding:.2rem 1rem;
 margin:1.5rem 0}
.errors h2{color:var(--bad);border:0;margin:.6rem 0 0}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;vertical-align:top;padding:.35rem .5rem;border-bottom:1px solid var(--line)}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.bar{width:10rem;height:.75rem;margin:.35rem 0;background:var(--soft);
 border:1px solid var(--line);border-radius:4px;overflow:hidden}
.bar span{display:block;height:100%;background:var(--part)}
.bar.full span{background:var(--ok)}
.check{border:1px solid var(--line);border-left:4px solid var(--bad);border-radius:6px;
 padding:.6rem .9rem;margin:.8rem 0}
.check.skipped{border-left-color:var(--mute)}
.tag{font-size:.72rem;font-weight:600;text-transform:uppercase;letter-spacing:.03em;color:#fff;
 background:var(--bad);border-radius:4px;padding:.1rem .4rem;margin-right:.3rem}
.skipped .tag{background:var(--mute)}
.message{white-space:pre-wrap;margin:.3rem 0}
.bad{color:var(--bad)}
pre,code{font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--soft);border-radius:6px;padding:.6rem .8rem;overflow-x:auto;margin:.3rem 0}
summary{cursor:pointer;color:var(--mute)}
ul.passed{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.2rem 1.2rem}
ul.passed li::before{content:"\\2713  ";color:var(--ok)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{color:var(--mute)}
dd{margin:0}
@media print{
 body{max-width:none;margin:0;font-size:10.5pt}
 pre{white-space:pre-wrap;overflow-wrap:anywhere}
 .check,tr,.errors{break-inside:avoid}
 details::details-content{content-visibility:visible;display:contents}
 .bar,.bar span,.tag,.errors{print-color-adjust:exact;-webkit-print-color-adjust:exact}
}
"""

INTRO = (
    "Each part of the exercise is worth a fixed number of points; its score is that weight times "
    "the share of its checks' points that passed. A failed check shows the calls that break the "
    "submission, as Python code that replays them."
)


# -- values, as both human reports write them -------------------------------------------------


def points(value: float) -> str:
    """A score without trailing zeros: 15, 12.5, 2.33."""
    return f"{value:g}"


def duration(seconds: float) -> str:
    """A time in the unit that suits it, three significant digits: 412 µs, 1.25 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def part_score(part: dict) -> str:
    """A part's score over its maximum; a dash for a part with a note, which was not graded."""
    return "-" if "note" in part else f"{points(part['score'])} / {points(part['max_score'])}"


def tally(part: dict) -> str:
    """How many of a part's checks passed (and why the score is provisional), or its note."""
    if "note" in part:
        return part["note"]
    checks = part["checks"]
    count = sum(check["status"] == "passed" for check in checks)
    passed = f"{count} of {len(checks)} checks passed"
    return f"{passed}; {part['provisional']}" if "provisional" in part else passed


def verdict(benchmark: dict) -> str:
    """Whether a timing passed, against its limit on the candidate/reference ratio."""
    limit = f"{benchmark['limit']:g}x"
    return f"ok (limit {limit})" if benchmark["passed"] else f"too slow (limit {limit})"


def origin(flag: dict) -> str:
    """Where an integrity flag comes from: the source scan (file and line) or a worker (part)."""
    place = flag.get("file", "") + (f":{flag['line']}" if "line" in flag else "")
    return ", ".join(item for item in (flag["source"], flag.get("part", ""), place) if item)


# -- the page ---------------------------------------------------------------------------------


def render_html(report: dict) -> str:
    """The whole page for `report` (the dict of `report.json`), as one string."""
    name = escape(report["submission"]["name"])
    total = f"{points(report['score'])} / {points(report['max_score'])}"
    body = "\n".join(
        [
            header(report),
            errors(report["errors"]),
            parts_table(report["parts"]),
            *(part_section(part_id, part) for part_id, part in report["parts"].items()),
            benchmarks(report["benchmarks"]),
            integrity(report["integrity"]),
            ignored(report["ignored_files"]),
            footer(report),
        ]
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>Grade report: {name}, {escape(total)}</title>\n<style>{STYLE}</style>\n"
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def header(report: dict) -> str:
    """The submission's name, the total score in big type, and when and how it was graded."""
    env = report["environment"]
    score, max_score = report["score"], report["max_score"]
    share = f" ({score / max_score:.0%})" if max_score else ""
    ran = (
        f"Graded {report['started_at']} in {report['seconds']:g} s, profile {env['profile']}, "
        f"seed {shown(env['seed'])}, on {env['device']}."
    )
    return (
        f'<header>\n<p class="muted">PagedAttention interview kit: grade report</p>\n'
        f"<h1>{escape(report['submission']['name'])}</h1>\n"
        f'<p class="total">{escape(points(score))} <small>/ {escape(points(max_score))} points'
        f"{escape(share)}</small></p>\n"
        f'<p class="muted">{escape(ran)}</p>\n<p>{escape(INTRO)}</p>\n</header>'
    )


def errors(messages: list[str]) -> str:
    """The grader's own failures, in a red box: the score below may be incomplete."""
    if not messages:
        return ""
    items = "\n".join(f"<pre>{escape(message)}</pre>" for message in messages)
    return (
        '<section class="errors">\n<h2>The grader failed</h2>\n'
        "<p>The score may be missing points for reasons that are not the submission's fault.</p>\n"
        f"{items}\n</section>"
    )


def parts_table(parts: dict[str, dict]) -> str:
    """One row per part: its title, its score as a number and a bar, and its checks passed."""
    rows = "\n".join(part_row(part_id, part) for part_id, part in parts.items())
    return (
        "<section>\n<h2>Parts</h2>\n<table>\n"
        '<tr><th>Part</th><th class="num">Score</th><th></th><th>Checks</th></tr>\n'
        f"{rows}\n</table>\n</section>"
    )


def part_row(part_id: str, part: dict) -> str:
    """A part's row; a part with a note (one that was not graded) shows the note instead."""
    title = f'<td><a href="#part-{escape(part_id)}">{escape(part["title"])}</a></td>'
    if "note" in part:
        return f'<tr>{title}<td colspan="3" class="muted">{escape(part["note"])}</td></tr>'
    return (
        f'<tr>{title}<td class="num">{escape(part_score(part))}</td><td>{bar(part)}</td>'
        f"<td>{escape(tally(part))}</td></tr>"
    )


def bar(part: dict) -> str:
    """The part's score over its maximum, as a CSS bar: green when full."""
    share = part["score"] / part["max_score"] if part["max_score"] else 0.0
    full = " full" if share >= 1 else ""
    return f'<div class="bar{full}"><span style="width:{share:.1%}"></span></div>'


def part_section(part_id: str, part: dict) -> str:
    """A part's checks: the ones that did not pass in full, then the passed ones by name."""
    anchor = f'<h2 id="part-{escape(part_id)}">{escape(part["title"])}'
    if "note" in part:
        return f'<section>\n{anchor}</h2>\n<p class="muted">{escape(part["note"])}</p>\n</section>'
    heading = f'{anchor} <span class="muted">{escape(part_score(part))} points</span></h2>'
    shown = [check_card(check) for check in part["checks"] if check["status"] != "passed"]
    passed = [check["name"] for check in part["checks"] if check["status"] == "passed"]
    if passed:
        items = "".join(f"<li>{escape(name)}</li>" for name in passed)
        shown.append(f'<p>Passed:</p>\n<ul class="passed">{items}</ul>')
    return "\n".join(["<section>", heading, *shown, "</section>"])


def check_card(check: dict) -> str:
    """A check that failed, raised, or was skipped: its message and everything to reproduce it."""
    status = check["status"]
    score = f"{points(check['points'])} / {points(check['max_points'])} points"
    seconds = f"{check['seconds']:.2f} s"
    lines = [
        f'<article class="check {escape(status)}">',
        f'<h3><span class="tag">{escape(status)}</span>{escape(check["name"])} '
        f'<span class="muted">{escape(score)}, {escape(seconds)}</span></h3>',
        f'<p class="message">{escape(check["message"])}</p>',
    ]
    if check["counterexample"]:
        lines.append("<p>Counterexample, as runnable Python:</p>")
        lines.append(f"<pre><code>{escape(check['counterexample'])}</code></pre>")
    for label, key in (("Hypothesis notes", "hypothesis"), ("Traceback", "traceback")):
        if check[key]:
            lines.append(f"<details><summary>{label}</summary><pre>{escape(check[key])}</pre>")
            lines.append("</details>")
    lines.append("</article>")
    return "\n".join(lines)


def benchmarks(rows: list[dict]) -> str:
    """The timings against the reference solution, with their ratio and verdict."""
    intro = (
        "<p>Each timing is run against the kit's reference solution on the same input; the ratio "
        "is candidate time over reference time.</p>"
    )
    if not rows:
        return "<section>\n<h2>Timings</h2>\n<p>No timings in this run.</p>\n</section>"
    head = (
        '<tr><th>Benchmark</th><th>Part</th><th class="num">Candidate</th>'
        '<th class="num">Reference</th><th class="num">Ratio</th><th>Verdict</th></tr>'
    )
    body = "\n".join(benchmark_row(row) for row in rows)
    return f"<section>\n<h2>Timings</h2>\n{intro}\n<table>\n{head}\n{body}\n</table>\n</section>"


def benchmark_row(row: dict) -> str:
    numbers = (
        duration(row["candidate_seconds"]),
        duration(row["reference_seconds"]),
        f"{row['ratio']:.2f}x",
    )
    cells = "".join(f'<td class="num">{escape(number)}</td>' for number in numbers)
    judged = escape(verdict(row)) if row["passed"] else f'<b class="bad">{escape(verdict(row))}</b>'
    return (
        f"<tr><td>{escape(row['name'])}</td><td>{escape(row['part'])}</td>{cells}"
        f"<td>{judged}</td></tr>"
    )


def integrity(flags: list[dict]) -> str:
    """What the source scan and the workers noticed, for a person to look at."""
    if not flags:
        items = "<p>None.</p>"
    else:
        rows = "".join(
            f"<li><code>{escape(origin(flag))}</code>: {escape(flag['message'])}</li>"
            for flag in flags
        )
        items = f"<ul>{rows}</ul>"
    return (
        '<section>\n<h2>Integrity flags</h2>\n<p class="muted">What the grader\'s source scan and '
        f"its sandboxed workers noticed, for a person to look at.</p>\n{items}\n</section>"
    )


def ignored(names: list[str]) -> str:
    """Files in the submission that the grader did not read."""
    items = "".join(f"<li><code>{escape(name)}</code></li>" for name in names)
    shown = f"<ul>{items}</ul>" if names else "<p>None.</p>"
    return (
        '<section>\n<h2>Ignored files</h2>\n<p class="muted">Files in the submission that are not '
        f"among the files the exercise asks for; the grader did not read them.</p>\n{shown}\n"
        "</section>"
    )


def footer(report: dict) -> str:
    """The environment the grade ran in and the hashes of the files that were graded."""
    env = "".join(
        f"<dt>{escape(key)}</dt><dd>{escape(shown(value))}</dd>"
        for key, value in report["environment"].items()
    )
    submission = report["submission"]
    files = "".join(
        f"<tr><td><code>{escape(name)}</code></td><td><code>{escape(digest)}</code></td></tr>"
        for name, digest in submission["files"].items()
    )
    return (
        "<footer>\n<h2>Environment</h2>\n"
        f"<dl>{env}</dl>\n<h2>Submission</h2>\n"
        f"<dl><dt>name</dt><dd>{escape(submission['name'])}</dd>"
        f"<dt>path</dt><dd><code>{escape(submission['path'])}</code></dd></dl>\n"
        f"<table>\n<tr><th>File</th><th>sha256</th></tr>\n{files}\n</table>\n</footer>"
    )


def shown(value: object) -> str:
    """An environment value as text: lists joined, a missing value as 'none'."""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return "none" if value is None else str(value)
