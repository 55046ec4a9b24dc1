"""The candidate-facing text of the reports and of the summary, in English and in Chinese.

The kit's words live in gettext catalogs, one per language and domain, under
`locale/<lang>/LC_MESSAGES/`: `<domain>.po`, kept in git, compiled to `<domain>.mo` at set-up
(`pybabel compile`, the Makefile). Two domains:

- `messages`, the words of the pages, the summary and the terminal, by id: an entry's id names a
  sentence (`"tally"`, `"colon"`), its text fills in `%(name)s` placeholders. Python asks for one
  with `tr(lang, id, **values)`, a template with `_(id, **values)` (jinja2's i18n extension,
  `render.py`). Every language has every id, with the same placeholders.
- `checks`, what the checks and the grader say (`grader/said.py`), which `report.json` keeps in
  English with each message's id and parts: each entry's id is an English template (`{name}`
  placeholders), its text the same message in the language (`messages.py`). English, the
  language they are written in, has no catalog of it.

The kit's tests check both (tests/grader/report/test_catalogs.py); an id that is in no catalog is
an error, never shown as itself.
"""

from functools import cache
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from grader import ANSWER_KEY_NAME
from grader.parts import PARTS
from grader.ungraded import REASONS, reason_of

LANGUAGES = ("en", "zh")
WRITTEN_IN = "en"  # the language of what the checks and the grader write (the `checks` domain)
LOCALE = Path(__file__).parent / "locale"


@cache
def catalog(lang: str, domain: str = "messages") -> Catalog:
    """`lang`'s catalog of `domain`: the `.mo` the set-up compiled, or the `.po` where there is no
    `.mo` as new (a Ray node's copy of the kit has none: Ray leaves out what .gitignore names)."""
    folder = LOCALE / lang / "LC_MESSAGES"
    po, mo = folder / f"{domain}.po", folder / f"{domain}.mo"
    if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
        with mo.open("rb") as compiled:
            return read_mo(compiled)
    with po.open("rb") as source:
        return read_po(source)


def text(lang: str, key: str) -> str:
    """The text of the entry `key` of `lang`'s `messages` catalog; KeyError where it has none."""
    message = catalog(lang).get(key)
    if message is None or not message.string:
        raise KeyError(f"{key!r} is in no entry of {lang}'s messages.po ({LOCALE})")
    return message.string


def tr(lang: str, key: str, **values: object) -> str:
    """The entry `key` of `lang`'s `messages` catalog, with `values` filled in."""
    return text(lang, key) % values


def has(lang: str, key: str) -> bool:
    """Whether `lang`'s `messages` catalog has the entry `key` (an id made at run time may not)."""
    return catalog(lang).get(key) is not None


def ungraded_id(item: dict) -> str | None:
    """The id of an `ungraded` item's reason (`grader/ungraded.py`): its `id`, or, in a report
    written before the ids, the id whose English is its `reason`; None for a reason the kit does
    not know."""
    reason_id, reason = item.get("id"), item.get("reason")
    if isinstance(reason_id, str) and reason_id in REASONS:
        return reason_id
    known = {english: key for key, (_, english) in REASONS.items()}
    return known.get(reason) if isinstance(reason, str) else None


def ungraded_reason(lang: str, message: str) -> str:
    """Why a check skipped with `message` is not graded here: the kit's words for the reasons it
    knows ("graded by the hiring team's kit", "needs a CUDA device"), else the message itself."""
    reason_id, _ = reason_of(message)
    return tr(lang, f"ungraded_{reason_id}") if reason_id else message


def more_points(lang: str, points: str, item: dict) -> str:
    """`points` (already formatted) not graded here for the reason of `item` (an `ungraded`
    item), as a phrase: "5 more graded by the hiring team's kit", "9 more not graded here: needs a
    CUDA device"; a reason the kit does not know, in its own words."""
    reason_id = ungraded_id(item)
    if reason_id == "full_kit":
        return tr(lang, "more_full_kit", points=points)
    reason = tr(lang, f"ungraded_{reason_id}") if reason_id else str(item.get("reason", ""))
    return tr(lang, "more_elsewhere", points=points, reason=reason)


def language(report: dict) -> str:
    """The report's language: its `language` field when the kit knows it, else English."""
    lang = report.get("language", "en")
    return lang if lang in LANGUAGES else "en"


def profile_name(lang: str, profile: str) -> str:
    """A grading profile's name (`--profile`) in `lang`; one the kit does not know, as it is."""
    key = f"profile_{profile}"
    return tr(lang, key) if has(lang, key) else profile


def part_title(lang: str, part_id: str, part: dict) -> str:
    """A part's title: the report's own in English, the kit's translation in Chinese."""
    if lang == "en" or part_id not in PARTS:
        return part["title"]
    return PARTS[part_id].titled(lang)


def part_asks(lang: str, part_id: str) -> str:
    """What a part asks, in one line; empty for a part the kit does not know."""
    return PARTS[part_id].asks(lang) if part_id in PARTS else ""


def implementation(lang: str, name: str) -> str:
    """A known implementation's name in `lang`: the kit's answer key by its catalog entry, a public
    one (nano-vllm's block manager, say) as it is named."""
    return tr(lang, "answer_key") if name == ANSWER_KEY_NAME else name
