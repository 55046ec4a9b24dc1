"""Values and labels as every human-facing output writes them: the pages and `report.md` (as
template globals, `render.py`), the summary, `compare` and the leaderboard.

Each function returns plain text, never markup: escaping is the caller's (the templates escape
it, the terminal cleans it). The kit's own words come from `i18n.py`, in `lang`.
"""

import functools
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import PurePath

from grader.intake import ARCHIVES
from grader.parts import PARTS
from grader.provenance import DRIVE_FIELD, field, seal_state
from grader.report.i18n import (
    has,
    more_points,
    profile_name,
    tr,
    ungraded_id,
    ungraded_reason,
)
from grader.report.messages import said_in
from grader.severity import SEVERITIES
from grader.ungraded import NOT_TIMED, OTHER_PART, SETTLED

KITS = ("full", "candidate")  # `environment.kit`: which kit made the report
# How the message of a check that ran none of the candidate's code starts: it could not start (a
# stub, a missing file), or the file could not be imported.
NOT_IMPLEMENTED, NOT_SUBMITTED, IMPORT_FAILED = (
    "not implemented:",
    "not submitted:",
    "import failed:",
)
NOT_STARTED = (NOT_IMPLEMENTED, NOT_SUBMITTED)
NOT_RUN = (*NOT_STARTED, IMPORT_FAILED)
# The engine check's figures report.md lists under its one line, where the check has them: those
# its message does not already give (requests, tokens, steps). The page has them all.
ENGINE_FIGURES = ("tokens_per_step", "mismatches", "peak_kv_bytes", "contiguous_kv_bytes", "device")
# The end-to-end checks, by report key, each with those figures: the engine check, and the
# prefix-caching one (part 7; its message gives the prompt tokens computed and served).
ENGINE_CHECKS = {
    "integration": ENGINE_FIGURES,
    "prefix_integration": ("positions_checked", "mismatches", "pool_blocks", "block_size"),
}
KIT_PYTHON = ".venv/bin/python"  # in the kit's folder: where its Makefile installs the kit


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


def graded_parts(report: dict) -> dict[str, dict]:
    """The parts of `report` that were graded (a part not graded lists no checks), by id."""
    return {part_id: part for part_id, part in report["parts"].items() if part.get("checks")}


def part_score(part: dict) -> str:
    """A part's score over its maximum; a dash for a part that was not graded."""
    return f"{points(part['score'])} / {points(part['max_score'])}" if graded(part) else "-"


def ungraded_notes(part: dict, lang: str = "en", shown=points) -> list[str]:
    """A part's points not graded here, one phrase per reason ("5 more graded by the hiring
    team's kit"), each figure written by `shown`; none for a report without the field."""
    items = part.get("ungraded") or []
    return [more_points(lang, shown(i["points"]), i) for i in items if i["points"]]


def total_ungraded(report: dict) -> dict:
    """The report's points not graded here, by reason over all its parts, as a part's
    `ungraded` field (`ungraded_notes` reads it)."""
    by_reason: dict[tuple[str | None, str], float] = {}
    for part in report["parts"].values():
        for item in part.get("ungraded") or []:
            reason = (ungraded_id(item), item["reason"])
            by_reason[reason] = by_reason.get(reason, 0.0) + item["points"]
    return {
        "ungraded": [
            {"id": reason_id, "reason": reason, "points": round(total, 2)}
            for (reason_id, reason), total in by_reason.items()
        ]
    }


def score_line(report: dict, lang: str) -> str:
    """The total as graded here and, where some points could not be, out of how many the kit
    that can run every check grades it: "90.23 of 90.23 points graded here; out of 100 with a
    CUDA device"; then the points of checks left to another part's rule ("3.64 points not
    graded: ..."), and of timings left to a check of the code's results, which no kit grades.
    Empty where every point was graded here."""
    ungraded = [item for item in total_ungraded(report)["ungraded"] if item["points"]]
    pending = [item for item in ungraded if ungraded_id(item) not in SETTLED]
    lines = []
    if pending:
        kinds = sorted({item["id"] or "elsewhere" for item in pending})
        kind = "elsewhere" if "elsewhere" in kinds else "_".join(kinds)  # cuda, full_kit, or both
        total = round(report["max_score"] + sum(item["points"] for item in pending), 2)
        lines.append(
            tr(
                lang,
                f"score_out_of_{kind}",
                score=points(report["score"]),
                max_score=points(report["max_score"]),
                total=points(total),
            )
        )
    left = {reason: sum(item["points"] for item in ungraded if ungraded_id(item) == reason)
            for reason in SETTLED}  # fmt: skip
    if left[OTHER_PART]:
        lines.append(tr(lang, "score_other_part", points=points(round(left[OTHER_PART], 2))))
    if left[NOT_TIMED]:
        lines.append(tr(lang, "score_not_timed", points=points(round(left[NOT_TIMED], 2))))
    return tr(lang, "list_separator").join(lines)


def standing_line(report: dict, lang: str) -> str:
    """Where the submission stands in its drive (`grader/drive/standing.py`), as one line in
    `lang`; empty for a report graded alone, or one whose standing is not as the drive writes it
    (the field is outside the seal: numbers and the kit's part ids only)."""
    ranks = field(report, DRIVE_FIELD).get("standing")
    try:
        total, by_part = ranks["total"], ranks["parts"]
        if (
            not isinstance(total["submissions"], int)
            or not by_part
            or not set(by_part) <= set(PARTS)
        ):
            return ""
        parts = [part_standing(part_id, rank, lang) for part_id, rank in by_part.items()]
        separator = tr(lang, "list_separator")
        if "full_marks" in total:
            full = f"{total['full_marks']:d}"
            return tr(lang, "standing_full", submissions=total["submissions"], full_marks=full,
                      parts=separator.join(parts))  # fmt: skip
        return tr(
            lang,
            "standing",
            submissions=total["submissions"],
            percentile=f"{float(total['percentile']):g}",
            median=points(float(total["median"])),
            parts=separator.join(parts),
        )
    except (TypeError, KeyError, ValueError):
        return ""


def part_standing(part_id: str, rank: dict, lang: str) -> str:
    """A part's standing in `lang`: "allocator 18.8 (median 15)"; where the submission has full
    marks on it, how many have them of those graded in it: "allocator full marks (6 of 8)"
    (TypeError, KeyError or ValueError where `rank` is not as the drive writes it: its counts
    whole numbers)."""
    if "full_marks" in rank:
        return tr(lang, "standing_part_full", part=part_id, full_marks=f"{rank['full_marks']:d}",
                  submissions=f"{rank['submissions']:d}")  # fmt: skip
    return tr(lang, "standing_part", part=part_id, percentile=f"{float(rank['percentile']):g}",
              median=points(float(rank["median"])))  # fmt: skip


def counted(lang: str, key: str, number: float, **values: object) -> str:
    """The string `key` said of `number` things, with `values` filled in: its `<key>_one` form
    when `number` is 1 and the catalog has one (English agrees in number, Chinese does not)."""
    one = f"{key}_one"
    return tr(lang, one if number == 1 and has(lang, one) else key, **values)


def skipped_label(check: dict, lang: str = "en") -> str:
    """What a skipped check's line says after its name (and the `gap`): its points, why they are
    not graded here, and its message where that says more: "(2.05 points, graded by the hiring
    team's kit): runs only in the full kit: ...", "(9 points, needs a CUDA device)"."""
    message, worth = check["message"], check["max_points"]
    reason = ungraded_reason(lang, message)
    said = counted(lang, "skipped_check", worth, points=points(worth), reason=reason)
    label = f"{tr(lang, 'open').lstrip()}{said}{tr(lang, 'close')}"
    if message in (reason, ungraded_reason("en", message)):
        return label
    return f"{label}{tr(lang, 'colon')}{said_in(lang, check, 'message')}"


def tally(part: dict, lang: str = "en") -> str:
    """How many of the checks that ran passed, then how many were skipped: "6 of 6 checks
    passed, 2 skipped" (why they were, and their points, is `ungraded_notes`'); the note (or
    "not graded") for an ungraded part."""
    checks = part["checks"]
    if not checks:
        return said_in(lang, part, "note") or tr(lang, "not_graded")
    ran = [check for check in checks if check["status"] != "skipped"]
    passed = sum(check["status"] == "passed" for check in ran)
    text = counted(lang, "tally", len(ran), passed=passed, total=len(ran))
    skipped = len(checks) - len(ran)
    return tr(lang, "tally_skipped", tally=text, count=skipped) if skipped else text


def provisional_note(part: dict, lang: str = "en") -> str:
    """Why a part's score is provisional, after the word itself: "provisional: checks skipped
    (needs a CUDA device)"."""
    return tr(lang, "provisional_reason", reason=provisional_reason(part, lang))


def provisional_reason(part: dict, lang: str = "en") -> str:
    """Why a part's score is provisional, in `lang`: "checks skipped (needs a CUDA device)"."""
    return said_in(lang, part, "provisional")


def verdict(benchmark: dict, lang: str = "en") -> str:
    """Whether a timing passed, against its limit on the candidate/reference ratio."""
    limit = f"{benchmark['limit']:g}x"
    return tr(lang, "ok", limit=limit) if benchmark["passed"] else tr(lang, "too_slow", limit=limit)


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


def id_anchor(check_id: str) -> str:
    """`check_anchor` of the check whose id is `check_id` ("<part>/<name>")."""
    part_id, _, name = check_id.partition("/")
    return check_anchor(part_id, {"name": name})


def code_anchor(file: str, line: int) -> str:
    """The id of a line of the candidate's file in the report's view of it (`report.code`):
    readable, and unique to the file's name (`a.b.py` and `a-b.py` read alike)."""
    key = hashlib.sha256(file.encode()).hexdigest()[:8]
    return f"code-{re.sub(r'[^A-Za-z0-9_-]', '-', file)}-{key}-{int(line)}"


def code_view(file: dict) -> list[tuple[int | None, str, list[str]]]:
    """The lines a view of a file of `report.code` shows: `(number, text, check ids that raised
    there)`, a gap between its excerpts as `(None, "...", [])`."""
    marks = {line: ids for line, ids in file["marks"]}
    view: list[tuple[int | None, str, list[str]]] = []
    for first, text in file["excerpts"]:
        if view and view[-1][0] is not None and first > view[-1][0] + 1:
            view.append((None, "...", []))
        view += [(first + index, line, marks.get(first + index, []))
                 for index, line in enumerate(text.split("\n"))]  # fmt: skip
    return view


def raised_in_file(file: dict, lang: str, shown: Callable[[str], str] = str) -> str:
    """A file of `report.code` and the lines failed checks raised at in it, its name as `shown`
    (in Markdown: as code): "block_allocator.py: raised at lines 42, 92"."""
    lines = tr(lang, "number_separator").join(str(int(line)) for line, _ in file["marks"])
    return counted(lang, "code_file", len(file["marks"]), file=shown(file["file"]), lines=lines)


def marked_excerpt(file: dict, context: int = 2) -> str:
    """The lines of a file of `report.code` that a failed check raised at, each with `context`
    lines around it, numbered, the raising ones marked `>`, a gap shown as `...`:

      41 |         if n == 3:
    > 42 |             helper(n)
    """
    view = {number: (text, checks) for number, text, checks in code_view(file) if number}
    marked = [line for line, _ in file["marks"]]
    shown = sorted({n for mark in marked for n in range(mark - context, mark + context + 1)
                    if n in view})  # fmt: skip
    width = len(str(shown[-1])) if shown else 1
    out = []
    for index, number in enumerate(shown):
        if index and number - shown[index - 1] > 1:
            out.append("...")
        text, checks = view[number]
        out.append(f"{'>' if checks else ' '} {number:>{width}} | {text}")
    return "\n".join(out)


def shown(value: object) -> str:
    """An environment value as text: lists joined, a missing value as 'none'."""
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return "none" if value is None else str(value)


def environment_value(key: str, value: object, lang: str) -> str:
    """A value of the report's `environment` as text in `lang`: which kit, the profile's name and
    a missing value (no seed) translated; the rest as `shown`."""
    if key == "kit" and value in KITS:
        return tr(lang, f"compare_kit_{value}")
    if key == "profile" and isinstance(value, str):
        return profile_name(lang, value)
    return tr(lang, "no_seed") if value is None else shown(value)


def graded_from(report: dict, lang: str, shown: Callable[[str], str] = str) -> str:
    """Which input the report came from: its path, and the folder inside it that held the
    submission files where that was not its top; each as `shown` (in Markdown: as code)."""
    submission = report["submission"]
    path, folder = shown(submission["path"]), submission.get("folder")
    if folder:
        return tr(lang, "graded_from_folder", path=path, folder=shown(f"{folder}/"))
    return tr(lang, "graded_from", path=path)


def run_in(report: dict, lang: str, shown: Callable[[str], str] = str) -> str:
    """Where a counterexample runs, and with what: the kit's Python, in the folder that holds
    the graded files (the script makes it their package, whatever its name); for an archive,
    that folder once it is unpacked. Paths as `shown` (in Markdown: as code)."""
    submission = report["submission"]
    path, folder = submission["path"], submission.get("folder") or ""
    python = shown(KIT_PYTHON)
    if not path.endswith(ARCHIVES):
        return tr(lang, "run_in", folder=shown(str(PurePath(path, folder))), python=python)
    if not folder:
        return tr(lang, "run_in_archive_top", path=shown(path), python=python)
    return tr(lang, "run_in_archive", path=shown(path), folder=shown(f"{folder}/"), python=python)


def how_it_ran(report: dict, lang: str) -> str:
    """When the grade ran, for how long, with which profile and seed, on which device."""
    env = report["environment"]
    ran = tr(
        lang,
        "graded",
        started_at=report["started_at"],
        seconds=f"{report['seconds']:g}",
        profile=profile_name(lang, env["profile"]),
        seed=tr(lang, "no_seed") if env["seed"] is None else env["seed"],
        device=env["device"],
    )
    sentences = [ran]
    kit = env.get("kit")
    if kit in KITS:  # older reports do not say
        sentences.append(tr(lang, f"kit_{kit}"))
    if state := seal_state(report):
        sentences.append(tr(lang, f"seal_{state}", key_id=report["provenance"].get("key")))
    if isolation := report.get("isolation"):
        notes = (said_in(lang, isolation, key) for key in ("description", "accounting"))
        sentences += [tr(lang, "isolation_note", description=note) for note in notes if note]
    return functools.reduce(lambda before, after: tr(lang, "gap", before=before, after=after),
                            sentences)  # fmt: skip


def kit_label(report: dict, lang: str = "en") -> str:
    """Which kit made a report, for `compare`, in `lang`: "the full kit", "the candidate kit", or
    that the report does not say (one from before the field)."""
    kit = report.get("environment", {}).get("kit")
    return tr(lang, f"compare_kit_{kit}" if kit in KITS else "compare_kit_unrecorded")


def syntax_failures(report: dict) -> dict[str, dict]:
    """Each check that failed because a file does not compile, by id, and that file's syntax
    error (an item of `report["syntax_errors"]`)."""
    return {
        check_id: error
        for error in report.get("syntax_errors", [])
        for check_id in error.get("checks", [])
    }


def failed_checks(part: dict, explained: dict[str, dict]) -> list[dict]:
    """The part's checks that failed, or that the grader could not run, most serious first
    (`SEVERITIES`; in their own order within a severity), less those in `explained` (a file that
    does not compile failed them: `syntax_failures`). A report written before severities lists
    them in their order."""
    failed = [
        check
        for check in part["checks"]
        if check["status"] in ("failed", "error") and check["id"] not in explained
    ]
    return sorted(failed, key=severity_rank)


def severity_rank(check: dict) -> int:
    """Where a check's severity comes in `SEVERITIES`; after them all where it has none."""
    severity = check.get("severity")
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def safety_failures(report: dict) -> list[str]:
    """The ids of the checks of severity "safety" that `report` (in English, as written) fails
    having run the candidate's code, in the parts' order: what the reports show first. A check
    whose code could not start or be imported, or that a file which does not compile failed
    (`syntax_failures`), shows no corruption, and is not one."""
    explained = syntax_failures(report)
    return [
        check["id"]
        for part in report["parts"].values()
        for check in part["checks"]
        if check.get("severity") == "safety" and ran_and_failed(check, explained)
    ]


def ran_and_failed(check: dict, explained: dict[str, dict]) -> bool:
    """Whether `check` failed having run the candidate's code: not before (`never_ran`), not
    because a file does not compile (its id in `explained`: `syntax_failures`), and with an id (a
    broken report's check says nothing)."""
    return (
        check.get("status") == "failed"
        and bool(check.get("id"))
        and not never_ran(check)
        and check["id"] not in explained
    )


def never_ran(check: dict) -> bool:
    """Whether a check failed before the candidate's code ran: a stub, a missing file, an import."""
    return message_of(check).startswith(NOT_RUN)


def message_of(check: dict) -> str:
    """A check's message; "" where a report (an older one, a broken one) has none."""
    message = check.get("message")
    return message if isinstance(message, str) else ""


def severity_word(lang: str, severity: str) -> str:
    """A check's severity in `lang`; one the kit does not know, as it is."""
    key = f"severity_{severity}"
    return tr(lang, key) if has(lang, key) else severity


def syntax_line(error: dict, lang: str, shown: Callable[[str], str] = str) -> str:
    """A syntax error in one line: "kv_cache_manager.py does not compile, line 63: expected ':'",
    Python's message as `shown` (in Markdown: as code; it may quote the file, a coding cookie)."""
    return tr(
        lang,
        "syntax_error",
        file=error["file"],
        line=error["line"],
        message=shown(error["message"]),
    )


def code_excerpt(error: dict) -> str:
    """The line a syntax error is on, numbered, with a caret under where Python stopped:

    63 |     def allocate(self) -> None
       |                               ^
    """
    number = str(error["line"])
    lines = [f"{number} | {error['code']}"]
    if error.get("column"):
        lead = "".join(
            char if char == "\t" else " " for char in error["code"][: error["column"] - 1]
        )
        lines.append(f"{' ' * len(number)} | {lead}^")
    return "\n".join(lines)


def syntax_blame(error: dict, lang: str) -> str:
    """What failed on a syntax error: how many checks, by part, and the engine check: "22 checks
    failed on it: decode (8), gather (8), sharing (6).". Empty when nothing did."""
    checks = error.get("checks", [])
    by_part = Counter(check_id.partition("/")[0] for check_id in checks)
    opened, closed = tr(lang, "open"), tr(lang, "close")
    parts = tr(lang, "comma").join(
        f"{part}{opened}{count}{closed}" for part, count in by_part.items()
    )
    said = []
    if checks:
        said.append(counted(lang, "syntax_blamed", len(checks), count=len(checks), parts=parts))
    if error.get("engine_check"):
        said.append(tr(lang, "syntax_engine"))
    return " ".join(said)


def syntax_in_part(part: dict, report: dict) -> list[tuple[dict, list[str]]]:
    """The syntax errors a part's checks failed on, each with the names of those checks."""
    blamed = syntax_failures(report)
    by_file: dict[str, tuple[dict, list[str]]] = {}
    for check in part["checks"]:
        error = blamed.get(check["id"])
        if error is not None:
            by_file.setdefault(error["file"], (error, []))[1].append(check["name"])
    return list(by_file.values())


def syntax_part_line(error: dict, count: int, lang: str) -> str:
    """A part's line for its `count` checks that failed on `error`: "8 checks failed because
    kv_cache_manager.py does not compile (line 63; shown at the top):"."""
    return counted(lang, "syntax_part", count, count=count, file=error["file"], line=error["line"])


def engine_message(report: dict, lang: str, key: str = "integration") -> str:
    """What the end-to-end check `report[key]` says: its message, or, when the engine check
    failed because a file does not compile, that file and line (the report shows the error once,
    at the top)."""
    errors = report.get("syntax_errors", []) if key == "integration" else []
    error = next((e for e in errors if e.get("engine_check")), None)
    if error is not None:
        return tr(lang, "syntax_see", file=error["file"], line=error["line"])
    return said_in(lang, report[key], "message")


def engine_figures(integration: dict, key: str = "integration") -> dict:
    """The figures of the end-to-end check `key` a short list shows (`ENGINE_CHECKS`), where it
    has them."""
    figures = integration.get("figures") or {}
    return {name: figures[name] for name in ENGINE_CHECKS[key] if name in figures}


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
