"""Values and labels as every human-facing output writes them: the pages and `report.md` (as
template globals, `render.py`), the summary, `compare` and the leaderboard.

Each function returns plain text, never markup: escaping is the caller's (the templates escape
it, the terminal cleans it). The kit's own words come from `i18n.py`, in `lang`.
"""

import math

from grader.report.i18n import more_points, tr, ungraded_reason


def points(value: float) -> str:
    """A score without trailing zeros: 15, 12.5, 2.33."""
    return f"{value:g}"


def duration(seconds: float) -> str:
    """A time in the unit that suits it, three significant digits: 412 µs, 1.25 s."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def ratio(value: float) -> str:
    """A candidate/reference time ratio: 4.20x."""
    return f"{value:.2f}x"


def share(score: float, max_score: float) -> float:
    """The share of the maximum that was scored, 0 when there was nothing to score."""
    return score / max_score if max_score else 0.0


def percent(fraction: float, digits: int = 0) -> str:
    """A share as a percentage: 76%, 76.2%."""
    return f"{fraction:.{digits}%}"


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


def status_word(status: str, lang: str) -> str:
    """The engine check's status in `lang`; a status the kit does not know, as it is."""
    return tr(lang, status) if status in ("passed", "failed", "skipped") else status


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
