"""What the checks and the grader said, in a report's language, from the records `report.json`
keeps beside their English (`grader/said.py`).

A record names its message by id, the English template, an entry of the `checks` catalog
(`locale/<lang>/LC_MESSAGES/checks.po`, `i18n.catalog`), and gives its parts: a part that is a
record is shown in the language in turn, a list part item by item, joined by the language's
`list_separator`; a string (code, a number, a candidate's text) as written. Where a report has
no record (a candidate's exception text; a report written before the records), or the catalog
no entry, the English is shown.

An entry's context says where it is used: none, a message; "comment", a counterexample's comment;
"assert", the f-string of a counterexample's last `assert`; "simulation", the simulation page.
An id means one message whatever its context; an id holds no `%` (`pybabel compile` reads one as
a Python format and refuses the catalog).
"""

from functools import cache
from string import Formatter

from grader.report.i18n import WRITTEN_IN, catalog, tr
from grader.said import Said, from_record, written

FULL_WIDTH_MARKS = tuple("，。：；（）！？、")  # noqa: RUF001 -- text beside them takes no space


@cache
def entries(lang: str) -> dict[str, str]:
    """`lang`'s `checks` catalog: {English template: its translation}, of every context."""
    return {message.id: message.string for message in catalog(lang, "checks")
            if message.id and message.string}  # fmt: skip


def text_in(lang: str, message: str) -> str:
    """`message`, a `Said` in `lang`; any other text as it is."""
    if lang == WRITTEN_IN or not isinstance(message, Said):
        return message
    translation = entries(lang).get(message.id)
    if translation is None:
        return str(message)
    return filled(
        translation, {name: param_in(lang, value) for name, value in message.params.items()}
    )


def param_in(lang: str, value: "Said | str | tuple") -> str:
    if isinstance(value, tuple):
        return tr(lang, "list_separator").join(text_in(lang, item) for item in value)
    return text_in(lang, value)


def filled(template: str, parts: dict[str, str]) -> str:
    """A translated `template` with its `parts` in place, less a space of the template beside a
    part that ends (or starts) with a full-width mark (`FULL_WIDTH_MARKS`): "{call} 应抛出" of
    a call that ends in a full-width parenthesis takes no space before 应."""
    out = ""
    for literal, name, _, _ in Formatter().parse(template):
        if out.endswith(FULL_WIDTH_MARKS) and literal.startswith(" "):
            literal = literal[1:]
        part = parts[name] if name is not None else ""
        if part.startswith(FULL_WIDTH_MARKS) and literal.endswith(" "):
            literal = literal[:-1]
        out += literal + part
    return out


def field_in(lang: str, data: object, english: object) -> object:
    """A field's value in `lang` from its record `data` (`said.recorded`): a message, a list of
    them, or a script's comments; `english`, the field as written, where `data` records none."""
    if lang == WRITTEN_IN:
        return english
    if isinstance(data, dict) and "lines" in data:
        return script_in(lang, data["lines"], english) if isinstance(english, str) else english
    if isinstance(data, list) and isinstance(english, list) and len(data) == len(english):
        return [text if item is None else field_in(lang, item, text)
                for item, text in zip(data, english, strict=True)]  # fmt: skip
    message = from_record(data)
    return english if message is None else text_in(lang, message)


def script_in(lang: str, comments: object, code: str) -> str:
    """`code`, a script, with the messages its lines end in (`said.Script`) in `lang`; a line
    whose record does not fit it stays as it is."""
    lines = code.split("\n")
    for entry in comments if isinstance(comments, list) else ():
        if not (isinstance(entry, list) and len(entry) == 4):
            continue
        index, before, data, form = entry
        if not (isinstance(index, int) and 0 <= index < len(lines)
                and isinstance(before, str) and lines[index].startswith(before)):  # fmt: skip
            continue
        if form == "fstring" and isinstance(data, dict) and isinstance(data.get("id"), str):
            translation = entries(lang).get(data["id"])
            shown = None if translation is None else written(translation, form)
        else:
            message = from_record(data)
            shown = None if message is None else written(text_in(lang, message), str(form))
        if shown is not None:
            lines[index] = before + shown
    return "\n".join(lines)


def said_in(lang: str, holder: dict, key: str) -> object:
    """`holder[key]` in `lang`: through its record in `holder["said"]` where it has one (a
    report's), itself where it is a message (the grading's own), else as it is ("" if none)."""
    records = holder.get("said")
    data = records.get(key) if isinstance(records, dict) else None
    english = holder.get(key) or ""
    return text_in(lang, english) if data is None else field_in(lang, data, english)


def in_language(report: dict, lang: str) -> dict:
    """A copy of `report` whose grader's words that the pages show as they are, in `lang`: the
    failed checks' messages and counterexamples, the parts' notes, the timings' names, the
    integrity flags and the grader's failures. What `formats` shows it translates itself (a
    skipped check's message, which it reads in English; a provisional note; how the workers
    ran; the engine check's message)."""
    if lang == WRITTEN_IN:
        return report
    return {
        **report,
        "parts": {part_id: part_in(lang, part) for part_id, part in report["parts"].items()},
        "benchmarks": [{**row, "name": said_in(lang, row, "name")} for row in report["benchmarks"]],
        "integrity": [
            {**flag, "message": said_in(lang, flag, "message")} for flag in report["integrity"]
        ],
        "errors": said_in(lang, report, "errors") or [],
    }


def part_in(lang: str, part: dict) -> dict:
    """A part with its note and its failed checks in `lang`."""
    shown = {**part, "checks": [check_in(lang, check) for check in part["checks"]]}
    if part.get("note"):
        shown["note"] = said_in(lang, part, "note")
    return shown


def check_in(lang: str, check: dict) -> dict:
    """A check, failed, with its message and its counterexample's comments in `lang`."""
    if check["status"] not in ("failed", "error"):
        return check
    return {**check, "message": said_in(lang, check, "message"),
            "counterexample": said_in(lang, check, "counterexample")}  # fmt: skip
