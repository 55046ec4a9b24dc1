"""The hiring team's seal key: the secret a report's seal is keyed by (`provenance.sealed`).

It lives outside every report folder, so that whoever can write a report folder, and nothing
more, cannot make a report that `grade-all` resume keeps or `--merge` takes. It is the file
`--seal-key FILE` names (a team shares one across machines and Ray nodes: the driver sends it to
each task, `drive/cluster.py`), or else `default_key_file()`, made on first use: 32 random bytes as
hex, mode 0600. A key file holds at least `MIN_KEY_CHARS` characters, blanks around them aside;
`(umask 077; openssl rand -hex 32 > FILE)` makes one (FILE outside the kit, which Ray uploads).

Only a grading by the full kit whose workers are isolated holds a key (`grading_key`): a worker
without isolation runs as the grader's user, with its files and its network, and could read the
key, so an unisolated grading is refused outright while the default key is on the machine; and
the candidate kit is the candidate's own. Their reports are unsealed, say so, and are never kept
by resume nor taken by merge. The key never enters a report, a worker or an environment
variable: a grading gets the file's path, a report records only the key's id (`key_id`), which
says which key sealed it and gives nothing of the key away.
"""

import contextlib
import hashlib
import os
import secrets
import tempfile
from pathlib import Path

from grader import ANSWER_KEY

KEY_BYTES = 32  # of randomness in a key made here
MIN_KEY_CHARS = 32  # in a key file, blanks around it aside (32 hex digits: 128 bits)
KEY_ID_CHARS = 16


class SealKeyError(ValueError):
    """A key that cannot be had or used; the message says what to do."""


DEFAULT_SHOWN = "$XDG_CONFIG_HOME/paged-attention-kit/seal.key (~/.config where unset)"
MAKE_ONE = "`(umask 077; openssl rand -hex 32 > FILE)` makes one, FILE outside the kit"


def default_key_file() -> Path:
    """`$XDG_CONFIG_HOME/paged-attention-kit/seal.key` (`~/.config` where that is unset, empty
    or relative, as the XDG specification says); SealKeyError where there is no home folder."""
    config = os.environ.get("XDG_CONFIG_HOME", "")
    try:
        base = Path(config) if os.path.isabs(config) else Path.home() / ".config"
    except RuntimeError:  # no HOME, and no home folder for this user
        raise SealKeyError(
            "no home folder for the default seal key: give --seal-key FILE, or set "
            "XDG_CONFIG_HOME to a folder of yours"
        ) from None
    return base / "paged-attention-kit" / "seal.key"


def read_key(path: Path, label: str = "--seal-key") -> bytes:
    """The key in the file `path`, blanks around it aside; SealKeyError if there is none.
    `label` names the file in a message: the option that gave it, or the default's."""
    try:
        key = path.read_bytes().strip()
    except OSError as error:
        raise SealKeyError(
            f"{label} {path}: {error.strerror or error}: give the file that holds the hiring "
            f"team's key ({MAKE_ONE})"
        ) from None
    if len(key) < MIN_KEY_CHARS:
        raise SealKeyError(
            f"{label} {path}: {len(key)} characters, too short for a key: give one of "
            f"{MIN_KEY_CHARS} at least ({MAKE_ONE})"
        )
    return key


def made_key(path: Path) -> bytes:
    """The key in `path`, made there first where there is none (its folder too, mode 0700).
    Gradings starting at once make one key between them: each writes a key of its own to a
    private file and links it to `path`, which only the first link creates."""
    if not path.exists():
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".seal.key.")  # 0600
            try:
                with os.fdopen(handle, "w") as file:
                    file.write(secrets.token_hex(KEY_BYTES) + "\n")
                with contextlib.suppress(FileExistsError):
                    os.link(temporary, path)
            finally:
                os.unlink(temporary)
        except OSError as error:
            raise SealKeyError(
                f"the seal key cannot be made at {path}: {error.strerror or error}: give "
                "--seal-key FILE, or set XDG_CONFIG_HOME to a folder of yours"
            ) from None
    return read_key(path, "the seal key")


def grading_key(path: Path | None, isolated: bool) -> bytes | None:
    """The key a grading seals its report with: the one in `path` (`--seal-key`), else the
    default one, made if need be; None in the candidate kit or for workers not `isolated`
    (see the module), where `--seal-key` is refused, and so is grading at all while the default
    key is on the machine: an unisolated worker could read it."""
    if not isolated and path is None and default_key_file().exists():
        raise SealKeyError(
            f"the seal key {default_key_file()} is on this machine, and a worker that is not "
            "isolated runs as you and could read it: install bubblewrap (Debian/Ubuntu: "
            "apt-get install bubblewrap), or grade as a user without the key (XDG_CONFIG_HOME "
            "set to another folder)"
        )
    if not ANSWER_KEY.is_dir():
        if path is not None:
            raise SealKeyError(
                "--seal-key: the candidate kit does not seal its reports (they are self-graded): "
                "leave it out; the hiring team grades with its own kit"
            )
        return None
    if not isolated:
        if path is not None:
            raise SealKeyError(
                "--seal-key: the workers here are not isolated and could read the key: install "
                "bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or leave --seal-key out "
                "and the reports unsealed"
            )
        return None
    return read_key(path) if path is not None else made_key(default_key_file())


def verifying_key(path: Path | None) -> bytes | None:
    """The key to check seals with, for resume and merge: the one in `path` (`--seal-key`), else
    the default one where it exists; None where there is none (no seal then holds)."""
    if path is not None:
        return read_key(path)
    default = default_key_file()
    return read_key(default, "the seal key") if default.exists() else None


def key_id(key: bytes) -> str:
    """Which key this is, as a report records it: a hash that gives nothing of the key away."""
    return hashlib.sha256(b"paged-attention-kit seal key\0" + key).hexdigest()[:KEY_ID_CHARS]
