"""What a report was made by and from, so that reports graded apart can be trusted together.

Every report.json carries `provenance` (`grade.py`): `kit`, a hash of the kit's own files (its
version: any change to the grader, the checks, the answer key or the pins changes it); `rubric`, a
hash of the rubric's weights, points and severity factors; `files`, a checksum over the submission's
per-file sha256 (`submission.files`); and, when written (`sealed`), `seal`, an HMAC-SHA256 of the
whole report as written, `seal` and the drive's own field (`DRIVE_FIELD`) aside, keyed by the
hiring team's key (`seal_key.py`), and `key`, that key's id; a report graded without a key has
`seal` and `key` null (`seal_state` says why). With the profile, seed and parts of `environment`,
they make the report's `settings`: `grade-all` skips a submission whose report has the drive's
settings (`drive/resume.py`), and `grade-all --merge` refuses reports of different settings
(`drive/merge.py`).

`problems` says why a report.json cannot be trusted: no seal, another key's, a seal that does not
hold (anything changed after grading), a file hash changed without its checksum. What a seal that
holds proves: a grading process holding the key wrote the report as it is. What it does not: that
the grading was right (a grader of another version, or one whose key leaked, seals what it writes;
the kit version is in the settings), or who ran it.
"""

import functools
import hashlib
import hmac
import json
from pathlib import Path

from grader import KIT_ROOT
from grader.said import said
from grader.scoring.rubric import Rubric
from grader.seal_key import key_id

KIT_FOLDERS = ("grader", "kernels", "solutions", "full_kit")  # the kit's own code and data
KIT_FILES = ("pyproject.toml",)  # the pins: another Hypothesis draws other examples
# What a score depends on: a drive resumes and merges only reports graded with the same. The
# limits and `--shrinks` are not among them: they bound the work a grading may take, not what its
# checks ask (`environment` records the shrinks).
SETTINGS = ("kit", "profile", "seed", "rubric", "parts")
# What a drive adds to a report.json after grading (its standing in the drive): outside the seal,
# computed anew by every drive, never read as evidence.
DRIVE_FIELD = "drive"
DIGEST_CHARS = 16


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def canonical(value: object) -> bytes:
    """`value` as JSON with sorted keys, the same bytes wherever it is written."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


@functools.cache
def kit_version(root: Path = KIT_ROOT) -> str:
    """A hash of the kit's files under `root` (`KIT_FOLDERS`, `KIT_FILES`), less what the set-up
    builds from them (bytecode, the catalogs' `.mo`), which a Ray node's copy does not have."""
    files = [root / name for name in KIT_FILES if (root / name).is_file()]
    for folder in KIT_FOLDERS:
        files += [
            path
            for path in (root / folder).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".mo"
        ]
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(f"{path.relative_to(root).as_posix()}\0".encode())
        hashed.update(hashlib.sha256(path.read_bytes()).digest())
    return hashed.hexdigest()[:DIGEST_CHARS]


def rubric_digest(rubric: Rubric) -> str:
    weighed = {"severity": rubric.severity} if rubric.severity else {}  # the default's as before
    return digest(canonical({"weights": rubric.weights, "points": rubric.points} | weighed))


def files_checksum(files: dict[str, str]) -> str:
    """A checksum over a submission's `{file: sha256}`."""
    return digest(canonical(files))


def of(rubric: Rubric, files: dict[str, str]) -> dict:
    """A new report's `provenance`, its `seal` and `key` still to come (`sealed`)."""
    return {"kit": kit_version(), "rubric": rubric_digest(rubric), "files": files_checksum(files)}


def seal_of(report: dict, key: bytes) -> str:
    """The HMAC-SHA256 under `key` of `report` as JSON (`canonical`), its `seal` and its
    `DRIVE_FIELD` aside."""
    unsealed = {**report, "provenance": {**report.get("provenance", {}), "seal": None}}
    unsealed.pop(DRIVE_FIELD, None)
    return hmac.new(key, canonical(unsealed), hashlib.sha256).hexdigest()


def sealed(report: dict, key: bytes | None) -> dict:
    """`report` with its `provenance.key` and `.seal` under `key`, both None without a key; a
    report without provenance is returned as is."""
    if "provenance" not in report:
        return report
    made = {**report["provenance"], "key": key_id(key) if key else None, "seal": None}
    report = {**report, "provenance": made}
    return {**report, "provenance": {**made, "seal": seal_of(report, key) if key else None}}


# Why a report has no seal, by `seal_state`: the candidate kit made it, or its workers were not
# isolated (no key then: `seal_key.grading_key`), or it was written without a key.
UNSEALED = {
    "candidate": said("self-graded, unsealed: the candidate kit made it"),
    "unisolated": said("unsealed: its workers were not isolated, so no key was there to seal it"),
    "no_key": said("unsealed: it was written without a seal key"),
}


def seal_state(report: dict) -> str | None:
    """Whether the report is "sealed", or why not (a key of `UNSEALED`), from what it records;
    None for a report from before the keyed seal (no `provenance.key`)."""
    made = field(report, "provenance")
    if "key" not in made:
        return None
    if isinstance(made.get("seal"), str):
        return "sealed"
    if field(report, "environment").get("kit") == "candidate":
        return "candidate"
    if field(report, "isolation").get("isolated") is False:
        return "unisolated"
    return "no_key"


def field(report: dict, name: str) -> dict:
    """`report[name]` where it is a dict, else an empty one: a report read from disk may hold
    anything."""
    value = report.get(name)
    return value if isinstance(value, dict) else {}


def settings(report: dict) -> dict:
    """What a report was graded with: kit version, profile, seed, rubric and parts."""
    made, environment = field(report, "provenance"), field(report, "environment")
    return {
        "kit": made.get("kit"),
        "profile": environment.get("profile"),
        "seed": environment.get("seed"),
        "rubric": made.get("rubric"),
        "parts": environment.get("parts"),
    }


def problems(report: dict, key: bytes | None) -> list[str]:
    """Why `report` (as read from its report.json, not `bounded`) is not as a grading holding
    `key` wrote it, each a message (`said`); empty when its checksum and seal hold."""
    made = report.get("provenance")
    if not isinstance(made, dict):
        return [said("it records no provenance (a kit older than grade-all --merge)")]
    found = []
    files = field(report, "submission").get("files")
    if not isinstance(files, dict) or files_checksum(files) != made.get("files"):
        found.append(said("its submission's file hashes do not match their recorded checksum"))
    seal, state = made.get("seal"), seal_state(report)
    if state in UNSEALED:
        found.append(said("it is {unsealed} (grade it with the hiring team's kit)",
                          unsealed=UNSEALED[state]))  # fmt: skip
    elif state is None or not isinstance(seal, str):
        found.append(said("it has no keyed seal (a kit older than the seal key): grade it again"))
    elif key is None:
        found.append(said("no seal key here to check its seal: give --seal-key FILE, the hiring "
                          "team's key it was graded with"))  # fmt: skip
    elif (sealed_by := made.get("key")) != key_id(key):
        found.append(
            said(
                "it was sealed with another key (id {sealed_by}; this one's is {key_id}): give "
                "--seal-key FILE, the key it was graded with",
                sealed_by=sealed_by,
                key_id=key_id(key),
            )
        )
    elif not hmac.compare_digest(seal_of(report, key).encode(), seal.encode()):
        found.append(said("it was changed after grading (its seal does not match)"))
    return found
