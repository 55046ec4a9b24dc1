"""The reports' gettext catalogs (`grader/report/locale`, `i18n.py`): in `messages`, each language
has every id with the same placeholders, every id the code and the templates use is in them, and
every entry is used; in `checks`, every id the grader says (`said`, the engine's `stop`) is in
every language's, with its parts, and every entry is used; the Chinese has one style of
punctuation; the compiled catalogs say what the `.po` files say; an id no catalog has is an
error."""

import ast
import re
from pathlib import Path
from string import Formatter

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from grader import KIT_ROOT
from grader.parts import PARTS
from grader.report import i18n
from grader.report.i18n import LANGUAGES, LOCALE, WRITTEN_IN, catalog, has, tr
from grader.sandbox.transcript import ASSERTS
from tests.grader.report.punctuation import slips

PLACEHOLDER = re.compile(r"%\((\w+)\)s")
KEYWORDS = {"tr": (2,), "counted": (2,), "_": None}  # babel.cfg's header: `pybabel extract -k`
SAID = {"said": None, "stop": None}  # `pybabel extract -k said -k stop`: the checks' ids
WORKER = KIT_ROOT / "grader" / "sandbox" / "worker.py"  # says its event by a record of its own
# Ids the code makes at run time, which no extraction sees: a status, a reason's or a kit's or a
# severity's id after its prefix, a `<id>_one` form (`formats.counted`), the engine checks'
# `<check>_heading`, the progress lines' and the diagnosis' keys chosen by case.
MADE_AT_RUN_TIME = re.compile(
    r"passed|failed|error|skipped|hypothesis|traceback|\w+_one"
    r"|(ungraded|profile|severity|seal|kit|compare_kit|compare_env|diagnosis|progress"
    r"|score_out_of|items_flag|integration|prefix_integration)_\w+"
)


def po(lang: str, domain: str = "messages") -> Path:
    return LOCALE / lang / "LC_MESSAGES" / f"{domain}.po"


def entries(lang: str) -> dict[str, str]:
    """`lang`'s `messages.po` as {id: text}, without its header."""
    with po(lang).open("rb") as source:
        return {message.id: message.string for message in read_po(source) if message.id}


def extracted(templates_only: bool = False, keywords: dict = KEYWORDS) -> set[str]:
    """The literal ids `pybabel extract -F babel.cfg -k tr:2 -k counted:2` finds: of `tr(lang,
    id)` and `counted(lang, id, n)` in the grader's Python, of `_(id)` in the templates (with
    `SAID`, the `checks` ids of `said(id)` and `stop(id)`)."""
    with (KIT_ROOT / "babel.cfg").open() as config:
        method_map, options_map = parse_mapping_cfg(config)
    if templates_only:
        method_map = [(pattern, method) for pattern, method in method_map if method != "python"]
    return {
        message
        for _, _, message, *_ in extract_from_dir(KIT_ROOT, method_map, options_map, keywords)
        if isinstance(message, str)
    }


def used_ids() -> set[str]:
    """The literal ids `extracted`, and those of the calls inside f-strings, which Babel does not
    read on Python 3.11."""
    found = extracted()
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


def fields(template: str) -> list[str]:
    return sorted(name for _, name, _, _ in Formatter().parse(template) if name is not None)


def said_ids() -> set[str]:
    """The `checks` ids the grader says: those `pybabel extract -k said -k stop` finds, the
    f-strings of a counterexample's last assert (`transcript.ASSERTS`) and the worker's event."""
    found = extracted(keywords=SAID)
    found |= {message for _, message in ASSERTS.values()}
    found |= {
        node.value
        for node in ast.walk(ast.parse(WORKER.read_text()))
        if isinstance(node, ast.Constant) and str(node.value).startswith("tried to import {")
    }
    return found


def checks_entries(lang: str) -> dict[tuple[str | None, str], str]:
    """`lang`'s `checks.po` as {(context, English id): text}."""
    with po(lang, "checks").open("rb") as source:
        return {(m.context, m.id): m.string for m in read_po(source) if m.id}


@pytest.mark.both_kits  # only the full kit's simulation says its words
@pytest.mark.parametrize("lang", sorted(set(LANGUAGES) - {WRITTEN_IN}))
def test_every_id_the_grader_says_is_in_the_checks_catalog_and_every_entry_is_used(lang) -> None:
    """`checks.po`: written in English, so English has none; every other language has every id
    the grader says, each entry with its English id's parts, none empty, and none unused (the
    first line of a message of several is a counterexample's `# fails:` line, `plugin.first_line`).
    An id means one message in every context (`messages.entries` reads them as one)."""
    assert not po(WRITTEN_IN, "checks").exists()
    translated, said = checks_entries(lang), said_ids()
    ids = {english for _, english in translated}
    assert len(ids) == len(translated)  # no id in two contexts
    first_lines = {message.split("\n")[0] for message in said}  # of a `# fails:` line
    if not (KIT_ROOT / "full_kit").is_dir():  # the candidate kit: no simulation says its words
        ids -= {english for context, english in translated if context == "simulation"}
    assert said - ids == set()
    assert ids - said - first_lines == set()
    for (_, english), text in translated.items():
        assert text, english
        assert fields(text) == fields(english), english
        assert "".join(literal for literal, *_ in Formatter().parse(english)), english


def test_the_kits_chinese_words_have_one_style_of_punctuation() -> None:
    """`messages.po`'s; `checks.po` holds code among its words (`(num_blocks, block_size)`), and
    its punctuation is checked where it is shown, in the golden reports' Chinese pages."""
    assert [text for text in entries("zh").values() if slips(text)] == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_entry_a_template_uses_holds_markup(lang: str) -> None:
    """An `.html` template takes an entry's text as markup (jinja2's i18n, new style): one with
    `<`, `>` or `&` would reach the page unescaped."""
    texts = entries(lang)
    assert [key for key in extracted(templates_only=True) if set(texts[key]) & set("<>&")] == []


def test_every_part_has_its_title_and_ask_in_both_languages() -> None:
    for part in PARTS.values():
        assert all((part.title, part.title_zh, part.ask, part.ask_zh)), part


@pytest.mark.parametrize(
    "path",
    sorted(LOCALE.glob("*/LC_MESSAGES/*.po")),
    ids=lambda path: str(path.relative_to(LOCALE)),
)
def test_the_catalog_in_use_says_what_the_po_says(path: Path) -> None:
    """`catalog` reads the `.mo` the set-up compiled, or the `.po` where there is none; neither
    holds a fuzzy entry (which `pybabel compile` would leave out)."""
    with path.open("rb") as source:
        written = read_po(source)
    assert [message.id for message in written if message.fuzzy and message.id] == []
    said = {(m.id, m.context): m.string for m in written if m.id}
    lang, domain = path.parts[-3], path.stem
    in_use = catalog(lang, domain)
    assert {(m.id, m.context): m.string for m in in_use if m.id} == said
    mo = path.with_suffix(".mo")
    if mo.exists():
        with mo.open("rb") as compiled:
            assert {(m.id, m.context): m.string for m in read_mo(compiled) if m.id} == said


def test_a_catalog_not_compiled_is_read_from_its_po(tmp_path: Path, monkeypatch) -> None:
    """As on a Ray node, whose copy of the kit leaves out the `.mo` files that git ignores."""
    folder = tmp_path / "zh" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    (folder / "messages.po").write_bytes(po("zh").read_bytes())
    monkeypatch.setattr(i18n, "LOCALE", tmp_path)
    uncompiled = i18n.catalog.__wrapped__("zh")
    assert uncompiled.get("tally").string == entries("zh")["tally"]


def test_an_id_in_no_catalog_is_an_error_never_shown_as_itself() -> None:
    assert has("zh", "tally")
    assert not has("zh", "no_such_id")
    assert tr("zh", "tally", passed=2, total=3) != "tally"
    with pytest.raises(KeyError, match="no_such_id"):
        tr("en", "no_such_id")


def test_a_catalog_per_language_its_compiled_form_not_kept_in_git() -> None:
    assert sorted(folder.name for folder in LOCALE.iterdir()) == sorted(LANGUAGES)
    assert all(po(lang).exists() for lang in LANGUAGES)
    assert "*.mo" in (KIT_ROOT / ".gitignore").read_text().splitlines()
