"""The reports' gettext catalogs (`grader/report/locale`, `i18n.py`): each language has every id
with the same placeholders; every id the code and the templates use is in them, and every entry is
used; the compiled catalog says what the `.po` says; an id no catalog has is an error."""

import ast
import re

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po

from grader import KIT_ROOT
from grader.parts import PARTS
from grader.report.i18n import DOMAIN, LANGUAGES, LOCALE, catalog, compiled, has, tr
from tests.grader.report.punctuation import slips

PLACEHOLDER = re.compile(r"%\((\w+)\)s")
KEYWORDS = {"tr": (2,), "counted": (2,), "_": None}  # babel.cfg's header: `pybabel extract -k`
# Ids the code makes at run time, which no extraction sees: a status, a reason's or a kit's or a
# severity's id after its prefix, a `<id>_one` form (`formats.counted`), the engine checks'
# `<check>_heading`, the progress lines' and the diagnosis' keys chosen by case.
MADE_AT_RUN_TIME = re.compile(
    r"passed|failed|error|skipped|hypothesis|traceback|\w+_one"
    r"|(ungraded|profile|severity|seal|kit|compare_kit|compare_env|diagnosis|progress"
    r"|score_out_of|items_flag|integration|prefix_integration)_\w+"
)


def entries(lang: str) -> dict[str, str]:
    """`lang`'s `.po` as {id: text}, without its header."""
    with (LOCALE / lang / "LC_MESSAGES" / f"{DOMAIN}.po").open("rb") as po:
        return {message.id: message.string for message in read_po(po) if message.id}


def used_ids() -> set[str]:
    """The literal ids of `tr(lang, id)`, `counted(lang, id, n)` and the templates' `_(id)`: what
    `pybabel extract -F babel.cfg -k tr:2 -k counted:2` finds, and the calls inside f-strings,
    which Babel does not read on Python 3.11."""
    with (KIT_ROOT / "babel.cfg").open() as config:
        method_map, options_map = parse_mapping_cfg(config)
    found = {
        message
        for _, _, message, *_ in extract_from_dir(KIT_ROOT, method_map, options_map, KEYWORDS)
        if isinstance(message, str)
    }
    for path in (KIT_ROOT / "grader").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("tr", "counted")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
            ):
                found.add(node.args[1].value)
    return found


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_language_has_every_id_with_the_same_placeholders(lang: str) -> None:
    english, translated = entries("en"), entries(lang)
    assert translated.keys() == english.keys()
    for key, text in translated.items():
        assert text, f"{key} is empty in {lang}: gettext would show the id"
        assert set(PLACEHOLDER.findall(text)) == set(PLACEHOLDER.findall(english[key])), key
        assert "%" not in PLACEHOLDER.sub("", text).replace("%%", ""), f"{key}: a bare % in {lang}"


def test_every_id_used_is_in_the_catalogs_and_every_entry_is_used() -> None:
    ids, used = set(entries("en")), used_ids()
    assert used - ids == set()
    unused = {key for key in ids - used if not MADE_AT_RUN_TIME.fullmatch(key)}
    assert unused == set()


def test_the_chinese_catalog_has_one_style_of_punctuation() -> None:
    assert [text for text in entries("zh").values() if slips(text)] == []
    for part in PARTS.values():
        assert all((part.title, part.title_zh, part.ask, part.ask_zh)), part


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_catalog_in_use_says_what_the_po_says(lang: str) -> None:
    """`catalog` reads the `.mo` the set-up compiled, or compiles the `.po` where there is none."""
    mo = LOCALE / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"
    if mo.exists():
        assert mo.read_bytes() == compiled(mo.with_suffix(".po"))
    for key, text in entries(lang).items():
        assert catalog(lang).gettext(key) == text


def test_an_id_in_no_catalog_is_an_error_never_shown_as_itself() -> None:
    assert has("zh", "tally")
    assert not has("zh", "no_such_id")
    assert tr("zh", "tally", passed=2, total=3) != "tally"
    with pytest.raises(KeyError, match="no_such_id"):
        tr("en", "no_such_id")


def test_a_catalog_per_language_its_compiled_form_not_kept_in_git() -> None:
    assert sorted(folder.name for folder in LOCALE.iterdir()) == sorted(LANGUAGES)
    assert "*.mo" in (KIT_ROOT / ".gitignore").read_text().splitlines()
