"""The seal (`provenance.sealed`, `provenance.problems`) and its key (`seal_key.py`): a report
holds only when sealed by the key it is checked with and unchanged since; a forger who can write
the report folder, and re-seal it with everything in it, gets nothing kept or merged; the key is
made once, private, by however many gradings start at once."""

import json
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader import provenance, seal_key
from grader.report.writers import write_all
from tests.grader.report.test_writers import full_marks_report

KEY = b"0123456789abcdef0123456789abcdef"
OTHER_KEY = b"fedcba9876543210fedcba9876543210"


def written(tmp_path: Path, key: bytes | None, kit: str = "full", isolated: bool = True) -> dict:
    """A full-marks report of `kit`, its workers `isolated` or not, as `write_all` writes it with
    `key`, read back from its report.json."""
    report = full_marks_report()
    files = report["submission"]["files"]
    report["environment"]["kit"] = kit
    report["isolation"] = {"isolated": isolated, "description": "isolated" if isolated else "not"}
    report["provenance"] = {"kit": "v1", "rubric": "r1", "files": provenance.files_checksum(files)}
    write_all(report, tmp_path / "report", key)
    return json.loads((tmp_path / "report" / "report.json").read_text())


def test_a_report_sealed_with_the_key_holds_and_names_the_key(tmp_path: Path) -> None:
    report = written(tmp_path, KEY)
    assert provenance.problems(report, KEY) == []
    assert report["provenance"]["key"] == seal_key.key_id(KEY)
    assert KEY.decode() not in json.dumps(report)
    assert provenance.seal_state(report) == "sealed"


def forged(report: dict) -> list[dict]:
    """`report` raised to full marks on a check and re-sealed with all the report folder holds:
    its JSON, its key's id, sha256 (the old seal's way), and an HMAC under a key of the forger's."""
    check = report["parts"]["allocator"]["checks"][0]
    check["status"], check["points"] = "passed", check["max_points"]
    report["score"] += 1
    attempts = [provenance.sealed(report, OTHER_KEY)]
    attempts[0]["provenance"]["key"] = report["provenance"]["key"]
    unsealed = {**report, "provenance": {**report["provenance"], "seal": None}}
    sha = provenance.digest(provenance.canonical(unsealed))
    attempts.append({**report, "provenance": {**report["provenance"], "seal": sha}})
    return attempts


def test_a_report_changed_and_resealed_without_the_key_does_not_hold(tmp_path: Path) -> None:
    for attempt in forged(written(tmp_path, KEY)):
        assert provenance.problems(attempt, KEY) == [
            "it was changed after grading (its seal does not match)"
        ]


def test_a_report_sealed_with_another_key_says_which_and_what_to_do(tmp_path: Path) -> None:
    (problem,) = provenance.problems(written(tmp_path, OTHER_KEY), KEY)
    assert problem.startswith(f"it was sealed with another key (id {seal_key.key_id(OTHER_KEY)}")
    assert "give --seal-key FILE" in problem
    (problem,) = provenance.problems(written(tmp_path, KEY), None)
    assert problem.startswith("no seal key here to check its seal: give --seal-key FILE")


@pytest.mark.parametrize(
    ("kit", "isolated", "state", "said"),
    [
        ("candidate", True, "candidate", "Self-graded, unsealed"),
        ("full", False, "unisolated", "Unsealed: its workers were not isolated"),
        ("full", True, "no_key", "Unsealed: written without a seal key"),
    ],
)
def test_an_unsealed_report_says_why_and_never_holds(
    tmp_path: Path, kit: str, isolated: bool, state: str, said: str
) -> None:
    report = written(tmp_path, None, kit, isolated)
    assert report["provenance"]["seal"] is report["provenance"]["key"] is None
    assert provenance.seal_state(report) == state
    (problem,) = provenance.problems(report, KEY)
    assert problem == f"it is {provenance.UNSEALED[state]} (grade it with the hiring team's kit)"
    for page in ("report.md", "report.html"):
        assert said in (tmp_path / "report" / page).read_text()


def test_a_report_from_before_the_keyed_seal_never_holds(tmp_path: Path) -> None:
    report = written(tmp_path, KEY)
    del report["provenance"]["key"]
    assert provenance.seal_state(report) is None
    assert provenance.problems(report, KEY) == [
        "it has no keyed seal (a kit older than the seal key): grade it again"
    ]


def test_the_key_is_made_once_private_and_shared_by_gradings_starting_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config" / "paged-attention-kit" / "seal.key"
    with ThreadPoolExecutor(16) as pool:
        keys = set(pool.map(lambda _: seal_key.made_key(path), range(64)))
    assert len(keys) == 1
    assert len(keys.pop()) == 2 * seal_key.KEY_BYTES  # hex
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [entry.name for entry in path.parent.iterdir()] == ["seal.key"]  # no file left over


def test_the_default_key_lives_in_the_users_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert seal_key.default_key_file() == tmp_path / "paged-attention-kit" / "seal.key"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative")  # the XDG specification ignores it
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert seal_key.default_key_file() == tmp_path / "home" / ".config/paged-attention-kit/seal.key"


def test_a_key_file_that_cannot_serve_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(seal_key.SealKeyError, match=r"openssl rand -hex 32 > FILE"):
        seal_key.read_key(tmp_path / "missing.key")
    (tmp_path / "short.key").write_text("  secret \n")
    with pytest.raises(seal_key.SealKeyError, match=r"6 characters, too short for a key"):
        seal_key.read_key(tmp_path / "short.key")
    (tmp_path / "team.key").write_bytes(KEY + b"\n")
    assert seal_key.read_key(tmp_path / "team.key") == KEY


def test_only_an_isolated_grading_by_the_full_kit_holds_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "team.key").write_bytes(KEY)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(seal_key, "ANSWER_KEY", tmp_path)  # the full kit (also in the candidate's)
    assert seal_key.grading_key(None, isolated=False) is None  # no key on the machine yet
    assert seal_key.grading_key(tmp_path / "team.key", isolated=True) == KEY
    with pytest.raises(seal_key.SealKeyError, match="not isolated and could read the key"):
        seal_key.grading_key(tmp_path / "team.key", isolated=False)
    assert seal_key.grading_key(None, isolated=True) == seal_key.read_key(
        seal_key.default_key_file()
    )
    with pytest.raises(seal_key.SealKeyError, match="is on this machine, and a worker that is not"):
        seal_key.grading_key(None, isolated=False)  # it could read the key now made
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "candidate"))  # a candidate's machine
    monkeypatch.setattr(seal_key, "ANSWER_KEY", tmp_path / "no_answer_key")  # the candidate kit
    assert seal_key.grading_key(None, isolated=True) is None
    with pytest.raises(seal_key.SealKeyError, match="the candidate kit does not seal"):
        seal_key.grading_key(tmp_path / "team.key", isolated=True)


def test_checking_a_seal_never_makes_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert seal_key.verifying_key(None) is None
    assert not (tmp_path / "paged-attention-kit").exists()


def not_ascii_seal(report: dict) -> dict:
    return {**report, "provenance": {**report["provenance"], "seal": "\u00e9" * 64}}


@pytest.mark.parametrize(
    "change",
    [
        not_ascii_seal,  # with the right key's id: hmac.compare_digest would raise on it
        lambda report: {**report, "environment": "x", "isolation": [1]},
        lambda report: {**report, "submission": None},
    ],
    ids=["seal not ascii", "fields not dicts", "no submission"],
)
def test_a_malformed_report_is_refused_not_a_crash(tmp_path: Path, change) -> None:
    report = change(written(tmp_path, KEY))
    assert provenance.problems(report, KEY)
    provenance.settings(report)


def test_the_kits_version_hashes_its_sources_not_what_the_set_up_builds(tmp_path: Path) -> None:
    """A Ray node's copy of the kit has no compiled catalogs and no bytecode (Ray leaves out what
    .gitignore names): its reports carry the driver's version, so a drive keeps them."""
    catalog = tmp_path / "grader" / "report" / "locale" / "zh" / "LC_MESSAGES" / "messages.po"
    catalog.parent.mkdir(parents=True)
    catalog.write_text('msgid "title"\nmsgstr "评分报告"\n')
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    version = provenance.kit_version.__wrapped__
    copied = version(tmp_path)
    catalog.with_suffix(".mo").write_bytes(b"compiled")
    (tmp_path / "grader" / "__pycache__").mkdir()
    (tmp_path / "grader" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"bytecode")
    assert version(tmp_path) == copied
    catalog.write_text('msgid "title"\nmsgstr "报告"\n')
    assert version(tmp_path) != copied
