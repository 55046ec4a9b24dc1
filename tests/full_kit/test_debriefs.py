"""The interviewer's debrief (`full_kit/debriefs.toml`): every check has its severity and a
question with what a good answer mentions, every part a question on depth, every cause the
question of a check of its part, in each language,
the Chinese with no English word left and one style of punctuation; the candidate kit carries
none of it."""

from pathlib import PurePath

from full_kit.bundle import FULL_KIT_FOLDERS
from grader import KIT_ROOT
from grader.checks.support import rules
from grader.parts import PARTS
from grader.report.debrief import DEBRIEFS, debriefs
from grader.report.i18n import LANGUAGES
from grader.scoring.plugin import CHECKS_DIR, check_names
from grader.severity import SEVERITIES
from tests.grader.report.english import english_words
from tests.grader.report.punctuation import slips
from tests.grader.test_severity import severities

FIELDS = {"ask", "answer"}
SEVERITY_MARKS = [[severity] for severity in SEVERITIES]  # exactly one marker, a known one


def all_checks() -> set[str]:
    return {
        f"{part.id}/{name}" for part in PARTS.values() for module in part.checks
        for name in check_names(module)
    }  # fmt: skip


def test_every_check_and_part_has_a_debrief_in_each_language_and_no_other_is_kept() -> None:
    texts = debriefs()
    assert set(texts) == {"checks", "parts", "causes"}
    assert set(texts["checks"]) == all_checks()
    assert set(texts["parts"]) == set(PARTS)
    for kind in (texts["checks"], texts["parts"]):
        for key, text in kind.items():
            assert set(text) == set(LANGUAGES), key
            for lang in LANGUAGES:
                assert set(text[lang]) == FIELDS, (key, lang)
                assert all(text[lang][field].strip() for field in FIELDS), (key, lang)


def test_every_cause_is_asked_with_a_question_of_its_own_part() -> None:
    causes = debriefs()["causes"]
    assert set(causes) == set(rules.HARMS)
    elsewhere = {rule: check for rule, check in causes.items()
                 if check.partition("/")[0] != rules.owner(rule)}  # fmt: skip
    assert not elsewhere
    assert set(causes.values()) <= all_checks()


def test_every_check_has_its_severity() -> None:
    marked = {
        f"{part.id}/{name.removeprefix('check_')}": kinds
        for part in PARTS.values() for module in part.checks
        for name, kinds in severities(CHECKS_DIR / f"{module}.py").items()
    }  # fmt: skip
    assert set(marked) == all_checks()
    assert not {check: kinds for check, kinds in marked.items() if kinds not in SEVERITY_MARKS}


def test_the_chinese_has_no_english_word_and_one_style_of_punctuation() -> None:
    texts = [
        (key, text["zh"][field])
        for kind in (debriefs()["checks"], debriefs()["parts"])
        for key, text in kind.items()
        for field in FIELDS
    ]
    assert not {key: words for key, said in texts if (words := english_words(said))}
    assert not {key: slips(said) for key, said in texts if slips(said)}


def test_the_candidate_kit_carries_no_debrief() -> None:
    folder = PurePath(DEBRIEFS.relative_to(KIT_ROOT)).parts[0] + "/"
    assert folder in FULL_KIT_FOLDERS
