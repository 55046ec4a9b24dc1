"""What a report was made by and from, so that reports graded apart can be trusted together.

Every report.json carries `provenance` (`grade.py`): `kit`, a hash of the kit's own files (its
version: any change to the grader, the checks, the answer key or the pins changes it); `rubric`,
a hash of the rubric's weights and points; `files`, a checksum over the submission's per-file
sha256 (`submission.files`); and `seal`, a sha256 of the whole report as written, `seal` aside
(`sealed`). With the profile, seed and parts of `environment`, they make the report's `settings`:
`grade-all` skips a submission whose report has the drive's settings (`resume.py`), and
`grade-all --merge` refuses reports of different settings (`merge.py`).

`problems` catches a report.json edited by hand: a file hash changed without its checksum, or
anything changed without the seal. Neither is a signature: whoever edits the file can recompute
them; they catch a careless edit and a copy damaged on the way, not a forger.
"""

import functools
import hashlib
import json
from pathlib import Path

from grader import KIT_ROOT
from grader.scoring.rubric import Rubric

KIT_FOLDERS = ("grader", "kernels", "solutions", "full_kit")  # the kit's own code and data
KIT_FILES = ("pyproject.toml",)  # the pins: another Hypothesis draws other examples
SETTINGS = ("kit", "profile", "seed", "rubric", "parts")
DIGEST_CHARS = 16


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def canonical(value: object) -> bytes:
    """`value` as JSON with sorted keys, the same bytes wherever it is written."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


@functools.cache
def kit_version(root: Path = KIT_ROOT) -> str:
    """A hash of the kit's files under `root` (`KIT_FOLDERS`, `KIT_FILES`; no bytecode)."""
    files = [root / name for name in KIT_FILES if (root / name).is_file()]
    for folder in KIT_FOLDERS:
        files += [
            path
            for path in (root / folder).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        ]
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(f"{path.relative_to(root).as_posix()}\0".encode())
        hashed.update(hashlib.sha256(path.read_bytes()).digest())
    return hashed.hexdigest()[:DIGEST_CHARS]


def rubric_digest(rubric: Rubric) -> str:
    return digest(canonical({"weights": rubric.weights, "points": rubric.points}))


def files_checksum(files: dict[str, str]) -> str:
    """A checksum over a submission's `{file: sha256}`."""
    return digest(canonical(files))


def of(rubric: Rubric, files: dict[str, str]) -> dict:
    """A new report's `provenance`, its `seal` still to come (`sealed`)."""
    return {"kit": kit_version(), "rubric": rubric_digest(rubric), "files": files_checksum(files)}


def seal_of(report: dict) -> str:
    unsealed = {**report, "provenance": {**report.get("provenance", {}), "seal": None}}
    return digest(canonical(unsealed))


def sealed(report: dict) -> dict:
    """`report` with its `provenance.seal`; a report without provenance is returned as is."""
    if "provenance" not in report:
        return report
    return {**report, "provenance": {**report["provenance"], "seal": seal_of(report)}}


def settings(report: dict) -> dict:
    """What a report was graded with: kit version, profile, seed, rubric and parts."""
    made = report.get("provenance") or {}
    environment = report.get("environment") or {}
    return {
        "kit": made.get("kit"),
        "profile": environment.get("profile"),
        "seed": environment.get("seed"),
        "rubric": made.get("rubric"),
        "parts": environment.get("parts"),
    }


def problems(report: dict) -> list[str]:
    """Why `report` (as read from its report.json, not `bounded`) is not as the grader wrote
    it; empty when its checksum and seal hold."""
    made = report.get("provenance")
    if not isinstance(made, dict):
        return ["it records no provenance (a kit older than grade-all --merge)"]
    found = []
    files = (report.get("submission") or {}).get("files")
    if not isinstance(files, dict) or files_checksum(files) != made.get("files"):
        found.append("its submission's file hashes do not match their recorded checksum")
    if seal_of(report) != made.get("seal"):
        found.append("it was changed after grading (its seal does not match)")
    return found
