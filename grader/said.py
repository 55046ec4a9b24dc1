"""A message the kit writes, in English, that keeps what it was made of.

`said(template, **parts)` is the English text, `template` with its parts in place, as a `str`
(so it goes wherever a message goes: an `AssertionError`, a comparison, an f-string's part) that
also holds its id, the template itself, an entry of the `checks` catalog
(`grader/report/locale/<lang>/LC_MESSAGES/checks.po`), and its parts. A report shows it in any
language from these (`grader/report/messages.py`), never by reading the English back.

A part is a `Said` (a message in turn: translated), a list of them where its name ends in
`_list` (joined by "; ", in another language by its own separator), or anything else, shown as
written in every language: code, a number, a candidate's own text. A template holds no `%`
(`pybabel compile` reads one as a Python format); its parts are plain `{name}`s.

`record(text)` is what `report.json` keeps beside the English: `{"id": ..., "params": {...}}`,
each part a string, a record or a list of them; `from_record` reads one back, and refuses what is
not one (a worker's reply is not trusted): the checks' words cross the wire this way. A `Script`
is code whose lines may end in a message (a counterexample's comments).

`recorded(report)` gives the report with, beside each field that holds a message, its record: a
dict's `said` maps each such field to a record, a list of them (a list field, as deep as it
nests: None for an item that is plain text), or `{"lines": [...]}` for a `Script`; its
`said_keys`, each key that is a message (a chart's series) to its record.
"""

import json
from string import Formatter
from typing import Any

LIST_SUFFIX = "_list"  # a part holding a list of messages
LIST_SEPARATOR = "; "  # between a list part's items, in English
DEPTH = 8  # the most messages a record nests (`from_record`): a worker's reply may nest any deep
SHOWN_CHARS = 100_000  # the longest message a record may make (`from_record`): a part may repeat


class Said(str):
    """English text that is `id` with `params` in place (`said`)."""

    id: str
    params: dict[str, Any]  # by name: a Said, a tuple of parts (a list part) or a str


def said(template: str, /, **parts: object) -> Said:
    """`template` (an id of the `checks` catalog) with `parts` in place, in English."""
    params = {name: part(name, value) for name, value in parts.items()}
    message = Said(template.format_map({name: english(value) for name, value in params.items()}))
    message.id, message.params = template, params
    return message


def part(name: str, value: object) -> "Said | str | tuple":
    """`value` as a part named `name`: a list part a tuple of items, a message itself (an
    exception raised with one, that message), else its text."""
    if name.endswith(LIST_SUFFIX):
        return tuple(part("", item) for item in value)
    if isinstance(value, BaseException) and len(value.args) == 1 and str(value) == value.args[0]:
        value = value.args[0]
    return value if isinstance(value, Said) else str(value)


def english(value: "Said | str | tuple") -> str:
    return LIST_SEPARATOR.join(value) if isinstance(value, tuple) else str.__str__(value)


def record(text: str) -> dict | None:
    """What `report.json` keeps of `text` beside it: its id and parts (`said`), None where it is
    plain text."""
    if not isinstance(text, Said):
        return None
    return {"id": text.id, "params": {name: param(value) for name, value in text.params.items()}}


def param(value: "Said | str | tuple") -> "dict | str | list":
    if isinstance(value, tuple):
        return [param(item) for item in value]
    return record(value) or str.__str__(value)


def from_record(data: object, limit: int = SHOWN_CHARS, depth: int = DEPTH) -> Said | None:
    """The message `data` records (`record`), or None where it records none: not a dict of an id
    and parts, a part of another type, an id whose placeholders are not its parts, messages
    nested deeper than `depth`, English longer than `limit` characters (counted before it is
    made: a record of a few hundred bytes could repeat its parts into gigabytes)."""
    if depth < 0 or not isinstance(data, dict) or set(data) != {"id", "params"}:
        return None
    template, params = data["id"], data["params"]
    if not isinstance(template, str) or not isinstance(params, dict):
        return None
    try:
        parsed = list(Formatter().parse(template))
    except ValueError:
        return None
    fields = [field for field in parsed if field[1] is not None]
    if any(not name.isidentifier() or spec or kind for _, name, spec, kind in fields):
        return None
    if {name for _, name, _, _ in fields} != set(params):
        return None
    parts = {name: read_part(name, value, limit, depth - 1) for name, value in params.items()}
    if any(value is None for value in parts.values()):
        return None
    size = sum(len(literal) for literal, *_ in parsed)
    size += sum(len(english(part(name, parts[name]))) for _, name, _, _ in fields)
    return said(template, **parts) if size <= limit else None


def message_of(error: BaseException) -> str:
    """What `error` says: the message it was raised with, kept whole (a `Said` stays one, and
    so does the message an `EngineError` records)."""
    message = from_record(getattr(error, "said", None))
    if message is not None:
        return message
    return error.args[0] if len(error.args) == 1 and isinstance(error.args[0], str) else str(error)


def read_part(name: str, value: object, limit: int, depth: int) -> "Said | str | list | None":
    if name.endswith(LIST_SUFFIX):
        if not isinstance(value, list):
            return None
        items = [read_part("", item, limit, depth) for item in value]
        return None if any(item is None for item in items) else items
    if isinstance(value, str):
        return value if len(value) <= limit else None
    return from_record(value, limit, depth)


class Script(str):
    """Lines of code, some of which end in a message: `comments`, each `(line, code, message,
    form)`: the line's index, its text before the message, and how the message is written there:
    "comment" as it is, "repr" a string literal (`repr`), "string" one in double quotes,
    "fstring" an f-string (`message` then is the f-string's template, its parts code: no
    `said`)."""

    comments: list[tuple[int, str, str, str]]


def script(lines: list["str | tuple[str, str, str]"]) -> Script:
    """`lines` as one `Script`: a line is code, or (code, message, form) (`Script.comments`); a
    message that is plain text is written into its line as code."""
    texts, comments = [], []
    for index, line in enumerate(lines):
        if isinstance(line, tuple) and (isinstance(line[1], Said) or line[2] == "fstring"):
            code, message, form = line
            comments.append((index, code, message, form))
        texts.append(line[0] + written(line[1], line[2]) if isinstance(line, tuple) else line)
    text = Script("\n".join(texts))
    text.comments = comments
    return text


def written(text: str, form: str) -> str:
    """A message as a line of code writes it (`Script.comments`' forms): a comment on one line,
    whatever line breaks its parts hold (no part of it may start a line of code)."""
    if form == "comment":
        return " ".join(str.__str__(text).splitlines())
    if form == "repr":
        return repr(str.__str__(text))
    if form == "string":
        return json.dumps(str.__str__(text), ensure_ascii=False)
    return f'f"{text}"'


def recorded(value: object) -> object:
    """A copy of `value` (a report, JSON-like) with the records of its messages beside them."""
    if isinstance(value, dict):
        copy = {key: recorded(item) for key, item in value.items()}
        fields = {key: data for key, item in value.items() if (data := field_record(item))}
        keys = {str.__str__(key): record(key) for key in value if isinstance(key, Said)}
        return copy | ({"said": fields} if fields else {}) | ({"said_keys": keys} if keys else {})
    if isinstance(value, list | tuple):
        return [recorded(item) for item in value]
    return value


def field_record(value: object) -> "dict | list | None":
    """The record of a field's value: a message's, a script's comments, a list's items'."""
    if isinstance(value, Script):
        lines = [[index, code, record(message) or {"id": message, "params": {}}, form]
                 for index, code, message, form in value.comments]  # fmt: skip
        return {"lines": lines} if lines else None
    if isinstance(value, list | tuple):
        items = [field_record(item) for item in value]
        return items if any(item is not None for item in items) else None
    return record(value)
