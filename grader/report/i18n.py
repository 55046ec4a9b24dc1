"""The candidate-facing text of the reports and of the summary, in English and in Chinese.

The kit's words live in gettext catalogs, one per language: `locale/<lang>/LC_MESSAGES/messages.po`,
kept in git and compiled to `messages.mo` at set-up (`pybabel compile`, the Makefile). Each entry's
id names a sentence (`"tally"`, `"colon"`); its text fills in `%(name)s` placeholders. Python asks
for one with `tr(lang, id, **values)`, a template with `_(id, **values)` (jinja2's i18n extension,
`render.py`). Both catalogs hold the same ids with the same placeholders, and every id the code
and the templates use is in both (tests/grader/report/test_catalogs.py); an id that is in neither
is an error, never shown as itself. What a check says (its message, its counterexample's comments)
and the grader's notes are written in English, into `report.json`, and shown in Chinese through
the catalog of `messages.py`.
"""

import gettext
import io
from functools import cache
from pathlib import Path

from grader.parts import PARTS
from grader.ungraded import REASONS, reason_of

LANGUAGES = ("en", "zh")
LOCALE = Path(__file__).parent / "locale"
DOMAIN = "messages"


class UnknownId(gettext.NullTranslations):
    """Every catalog's fallback: an id that no catalog has raises KeyError."""

    def gettext(self, message: str) -> str:
        raise KeyError(f"{message!r} is in no catalog of {LOCALE}")

    def ngettext(self, msgid1: str, msgid2: str, n: int) -> str:
        raise KeyError(f"{msgid1!r} is in no catalog of {LOCALE}")


@cache
def catalog(lang: str) -> gettext.GNUTranslations:
    """`lang`'s catalog: its `messages.mo`, or, where the set-up has not compiled it or its `.po`
    changed since, the `.po` compiled in memory (a Ray node's copy of the kit has no `.mo`: Ray
    leaves out what .gitignore names)."""
    folder = LOCALE / lang / "LC_MESSAGES"
    po, mo = folder / f"{DOMAIN}.po", folder / f"{DOMAIN}.mo"
    fresh = mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime
    translations = gettext.GNUTranslations(io.BytesIO(mo.read_bytes() if fresh else compiled(po)))
    translations.add_fallback(UnknownId())
    return translations


def compiled(po: Path) -> bytes:
    """The `.mo` that `pybabel compile` makes of `po`."""
    from babel.messages.mofile import write_mo  # only where the set-up has not compiled it
    from babel.messages.pofile import read_po

    with po.open("rb") as source:
        messages = read_po(source)
    out = io.BytesIO()
    write_mo(out, messages)
    return out.getvalue()


def tr(lang: str, key: str, **values: object) -> str:
    """The entry `key` of `lang`'s catalog, with `values` filled in."""
    return catalog(lang).gettext(key) % values


def has(lang: str, key: str) -> bool:
    """Whether `lang`'s catalog has the entry `key` (an id made at run time may not)."""
    try:
        catalog(lang).gettext(key)
    except KeyError:
        return False
    return True


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
