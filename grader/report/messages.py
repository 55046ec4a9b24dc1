"""The grader's own words in a report's language, at render time: what the checks and the grader
wrote in English, matched against the English templates of the `checks` catalog
(`locale/<lang>/LC_MESSAGES/checks.po`, `i18n.catalog`).

`report.json` keeps every message as the grader wrote it, in English; the pages, `report.md` and
the summary show it in the report's language: a check's message (`translated_message`), the
comments of its counterexample (`translated_counterexample`), and the other words of the kit a
report holds (`in_language`). A message no template matches is shown as it was written: a
candidate's own exception text, or a message the catalog does not know.

Each entry's id is an English template, `{name}` a part of it; its text, the same message in the
language, with the same parts. A part that is itself a message of the catalog (a call described
in words, a reason, a scheduler step) is translated in turn; one that is code, a number or a
candidate's own text stays as it is (`RAW_FIELDS`). A part named `*_list` holds items joined by
"; ", each translated, joined by the language's `list_separator`. An entry's context says where
it is used: none, a message; "comment", a counterexample's comment; "assert", the f-string message
of a counterexample's last `assert`; "simulation", the kit's simulation page (`simulation.py`).
An id holds no `%`: `pybabel compile` reads one as a Python format and refuses the catalog.
"""

import ast
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from string import Formatter

from grader.report.i18n import WRITTEN_IN, catalog, tr

# Parts of a message shown as written, never matched: a candidate's text, a traceback.
RAW_FIELDS = frozenset({"error", "output", "traceback", "line", "reply"})
LIST_SUFFIX = "_list"  # a part holding items joined by LIST_SEPARATOR, each translated
LIST_SEPARATOR = "; "
COMMENT = "  # "  # between a counterexample line's code and its comment (`transcript.Transcript`)
FULL_WIDTH_MARKS = tuple("，。：；（）！？、")  # noqa: RUF001 -- text beside them takes no space


@dataclass(frozen=True)
class Template:
    """An English template as a pattern, named groups for its parts, and its translation."""

    pattern: re.Pattern[str]
    translation: str
    literal_chars: int  # of the English template's own text: the more, the more specific


def template(english: str, translation: str) -> Template:
    """`english` as a pattern that matches a whole message: its text as it is, each `{part}` any
    text (a part named twice, the same text twice)."""
    pattern, named, literal_chars = "", set(), 0
    for literal, name, _, _ in Formatter().parse(english):
        pattern += re.escape(literal)
        literal_chars += len(literal)
        if name is not None:
            pattern += f"(?P={name})" if name in named else f"(?P<{name}>.*?)"
            named.add(name)
    return Template(re.compile(pattern, re.DOTALL), translation, literal_chars)


@cache
def entries(lang: str, context: str | None) -> dict[str, str]:
    """`lang`'s `checks` catalog in `context`: {English template: its translation}."""
    return {
        message.id: message.string
        for message in catalog(lang, "checks")
        if message.id and message.context == context and message.string
    }


@cache
def templates(lang: str, context: str | None) -> tuple[Template, ...]:
    """The templates of `lang` in `context`, the most specific first: the first that matches a
    message wins. A comment is one of its own forms (`# fails: <message>`), else a message."""
    compiled = (template(english, shown) for english, shown in entries(lang, context).items())
    own = tuple(sorted(compiled, key=lambda each: -each.literal_chars))
    return own + templates(lang, None) if context == "comment" else own


def translated_message(lang: str, text: str) -> str:
    """`text`, a message of the checks or of the grader, in `lang`; as it is where no template of
    the catalog matches it whole (a candidate's exception text stays as written)."""
    return text if lang == WRITTEN_IN else translated(lang, text, None)


def translated_counterexample(lang: str, code: str) -> str:
    """A counterexample with the comments its lines end with, and its last `assert`'s message,
    in `lang`; the code as it is."""
    if lang == WRITTEN_IN:
        return code
    return "\n".join(line_in_language(lang, line) for line in code.split("\n"))


def line_in_language(lang: str, line: str) -> str:
    """One line of a counterexample, its comment (`# fails: ...`, `  # raises ...`) or its
    assert's message in `lang`."""
    if line.startswith("assert "):
        return assert_in_language(lang, line)
    if line.startswith("# "):
        return f"# {translated(lang, line[2:], 'comment')}"
    code, mark, comment = line.partition(COMMENT)
    return f"{code}{mark}{translated(lang, comment, 'comment')}" if mark else line


def assert_in_language(lang: str, line: str) -> str:
    """`assert <test>, <message>` with its message in `lang`: a string through the catalog, an
    f-string of `transcript.ASSERTS` by its translated source; any other line as it is."""
    try:
        statement = ast.parse(line).body[0]
    except SyntaxError:
        return line
    message = statement.msg if isinstance(statement, ast.Assert) else None
    source = ast.get_source_segment(line, message) if message is not None else None
    if not source or not line.endswith(source):
        return line
    fstrings = entries(lang, "assert")
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        shown = repr(translated(lang, message.value, "comment"))
    elif source[:2] in ('f"', "f'") and source[2:-1] in fstrings:
        shown = f"{source[:2]}{fstrings[source[2:-1]]}{source[-1]}"
    else:
        return line
    return f"{line[: len(line) - len(source)]}{shown}"


@lru_cache(maxsize=4096)
def translated(lang: str, text: str, context: str | None) -> str:
    """`text` in `lang` through the first template of `context` that matches it whole, each of its
    parts translated in turn (`part_translated`); `text` itself where none matches."""
    for each in templates(lang, context):
        match = each.pattern.fullmatch(text)
        if match:
            parts = match.groupdict().items()
            return filled(each.translation, {n: part_translated(lang, n, v) for n, v in parts})
    return text


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


def part_translated(lang: str, name: str, value: str) -> str:
    """A matched part of a message: as written if it is raw, else each of its items (a list part)
    or itself translated as a message."""
    if name in RAW_FIELDS:
        return value
    if name.endswith(LIST_SUFFIX):
        items = value.split(LIST_SEPARATOR)
        return tr(lang, "list_separator").join(translated(lang, item, None) for item in items)
    return translated(lang, value, None)


def in_language(report: dict, lang: str) -> dict:
    """A copy of `report` whose grader's words that the pages show as they are, in `lang`: the
    failed checks' messages and counterexamples, the parts' notes, the timings' names, the
    integrity flags and the grader's failures. What `formats` shows it translates itself (a
    skipped check's message, which it reads in English; a provisional note; how the workers
    ran; the engine check's message)."""
    if lang == WRITTEN_IN:
        return report
    shown = dict(report)
    shown["parts"] = {
        part_id: part_in_language(part, lang) for part_id, part in report["parts"].items()
    }
    shown["benchmarks"] = [
        {**row, "name": translated_message(lang, row["name"])} for row in report["benchmarks"]
    ]
    shown["integrity"] = [
        {**flag, "message": translated_message(lang, flag["message"])}
        for flag in report["integrity"]
    ]
    shown["errors"] = [translated_message(lang, error) for error in report["errors"]]
    return shown


def part_in_language(part: dict, lang: str) -> dict:
    """A part with its note and its failed checks in `lang`."""
    shown = {**part, "checks": [check_in_language(check, lang) for check in part["checks"]]}
    if part.get("note"):
        shown["note"] = translated_message(lang, part["note"])
    return shown


def check_in_language(check: dict, lang: str) -> dict:
    """A failed check with its message and its counterexample's comments in `lang`."""
    if check["status"] not in ("failed", "error"):
        return check
    return {
        **check,
        "message": translated_message(lang, check["message"]),
        "counterexample": translated_counterexample(lang, check["counterexample"]),
    }
