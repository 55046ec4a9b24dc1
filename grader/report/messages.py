"""The grader's own words in a report's language, at render time: what the checks and the grader
wrote in English, matched against the templates of `messages_zh.py`.

`report.json` keeps every message as the grader wrote it, in English; the pages, `report.md` and
the summary show it in the report's language: a check's message (`translated_message`), the
comments of its counterexample (`translated_counterexample`), and the other words of the kit a
report holds (`in_language`). A message no template matches is shown as it was written: a
candidate's own exception text, or a message the catalog does not know.
"""

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from string import Formatter

from grader.report.messages_zh import (
    ASSERT_FSTRINGS,
    COMMENTS,
    FULL_WIDTH_MARKS,
    MESSAGES,
    ZH_LIST_SEPARATOR,
)

# Parts of a message shown as written, never matched: a candidate's text, a traceback.
RAW_FIELDS = frozenset({"error", "output", "traceback", "line", "reply"})
LIST_SUFFIX = "_list"  # a part holding items joined by LIST_SEPARATOR, each translated
LIST_SEPARATOR = "; "
COMMENT = "  # "  # between a counterexample line's code and its comment (`transcript.Transcript`)


@dataclass(frozen=True)
class Template:
    """An English template as a pattern, named groups for its parts, and its Chinese text."""

    pattern: re.Pattern[str]
    chinese: str
    literal_chars: int  # of the English template's own text: the more, the more specific


def template(english: str, chinese: str) -> Template:
    """`english` as a pattern that matches a whole message: its text as it is, each `{part}` any
    text (a part named twice, the same text twice)."""
    pattern, named, literal_chars = "", set(), 0
    for text, name, _, _ in Formatter().parse(english):
        pattern += re.escape(text)
        literal_chars += len(text)
        if name is not None:
            pattern += f"(?P={name})" if name in named else f"(?P<{name}>.*?)"
            named.add(name)
    return Template(re.compile(pattern, re.DOTALL), chinese, literal_chars)


def catalog(templates: dict[str, str]) -> tuple[Template, ...]:
    """`templates` compiled, the most specific first: the first that matches a message wins."""
    compiled = (template(english, chinese) for english, chinese in templates.items())
    return tuple(sorted(compiled, key=lambda each: -each.literal_chars))


MESSAGE_TEMPLATES = catalog(MESSAGES)
# A comment is one of its own forms (`# fails: <message>`), else a message (a scheduler step).
COMMENT_TEMPLATES = catalog(COMMENTS) + MESSAGE_TEMPLATES


def translated_message(lang: str, text: str) -> str:
    """`text`, a message of the checks or of the grader, in `lang`; as it is where no template of
    the catalog matches it whole (a candidate's exception text stays as written)."""
    return chinese(text, MESSAGE_TEMPLATES) if lang == "zh" else text


def translated_counterexample(lang: str, code: str) -> str:
    """A counterexample with the comments its lines end with, and its last `assert`'s message,
    in `lang`; the code as it is."""
    if lang != "zh":
        return code
    return "\n".join(line_in_chinese(line) for line in code.split("\n"))


def line_in_chinese(line: str) -> str:
    """One line of a counterexample, its comment (`# fails: ...`, `  # raises ...`) or its
    assert's message in Chinese."""
    if line.startswith("assert "):
        return assert_in_chinese(line)
    if line.startswith("# "):
        return f"# {chinese(line[2:], COMMENT_TEMPLATES)}"
    code, mark, comment = line.partition(COMMENT)
    return f"{code}{mark}{chinese(comment, COMMENT_TEMPLATES)}" if mark else line


def assert_in_chinese(line: str) -> str:
    """`assert <test>, <message>` with its message in Chinese: a string through the catalog, an
    f-string of `transcript.ASSERTS` by its Chinese source; any other line as it is."""
    try:
        statement = ast.parse(line).body[0]
    except SyntaxError:
        return line
    message = statement.msg if isinstance(statement, ast.Assert) else None
    source = ast.get_source_segment(line, message) if message is not None else None
    if not source or not line.endswith(source):
        return line
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        shown = repr(chinese(message.value, COMMENT_TEMPLATES))
    elif source[:2] in ('f"', "f'") and source[2:-1] in ASSERT_FSTRINGS:
        shown = f"{source[:2]}{ASSERT_FSTRINGS[source[2:-1]]}{source[-1]}"
    else:
        return line
    return f"{line[: len(line) - len(source)]}{shown}"


@lru_cache(maxsize=4096)
def chinese(text: str, templates: tuple[Template, ...]) -> str:
    """`text` in Chinese through the first of `templates` that matches it whole, each of its
    parts translated in turn (`part_in_chinese`); `text` itself where none matches."""
    for each in templates:
        match = each.pattern.fullmatch(text)
        if match:
            parts = match.groupdict().items()
            return filled(each.chinese, {name: part_in_chinese(name, v) for name, v in parts})
    return text


def filled(template: str, parts: dict[str, str]) -> str:
    """A Chinese `template` with its `parts` in place, less a space of the template beside a
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


def part_in_chinese(name: str, value: str) -> str:
    """A matched part of a message: as written if it is raw, else each of its items (a list part)
    or itself translated as a message."""
    if name in RAW_FIELDS:
        return value
    if name.endswith(LIST_SUFFIX):
        items = value.split(LIST_SEPARATOR)
        return ZH_LIST_SEPARATOR.join(chinese(item, MESSAGE_TEMPLATES) for item in items)
    return chinese(value, MESSAGE_TEMPLATES)


def in_language(report: dict, lang: str) -> dict:
    """A copy of `report` whose grader's words that the pages show as they are, in `lang`: the
    failed checks' messages and counterexamples, the parts' notes, the timings' names, the
    integrity flags and the grader's failures. What `formats` shows it translates itself (a
    skipped check's message, which it reads in English; a provisional note; how the workers
    ran; the engine check's message)."""
    if lang != "zh":
        return report
    translated = dict(report)
    translated["parts"] = {
        part_id: part_in_language(part, lang) for part_id, part in report["parts"].items()
    }
    translated["benchmarks"] = [
        {**row, "name": translated_message(lang, row["name"])} for row in report["benchmarks"]
    ]
    translated["integrity"] = [
        {**flag, "message": translated_message(lang, flag["message"])}
        for flag in report["integrity"]
    ]
    translated["errors"] = [translated_message(lang, error) for error in report["errors"]]
    return translated


def part_in_language(part: dict, lang: str) -> dict:
    """A part with its note and its failed checks in `lang`."""
    translated = {**part, "checks": [check_in_language(check, lang) for check in part["checks"]]}
    if part.get("note"):
        translated["note"] = translated_message(lang, part["note"])
    return translated


def check_in_language(check: dict, lang: str) -> dict:
    """A failed check with its message and its counterexample's comments in `lang`."""
    if check["status"] not in ("failed", "error"):
        return check
    return {
        **check,
        "message": translated_message(lang, check["message"]),
        "counterexample": translated_counterexample(lang, check["counterexample"]),
    }
