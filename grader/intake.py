"""Reading a submission: a folder, a `.zip` or a `.tar.gz`, into memory, safely.

Only the four files of SPEC.md are taken, as bytes; everything else is listed as ignored. Nothing
is extracted to disk and nothing is followed: archives with absolute paths, `..`, links or
special files are refused, as are symlinks in a folder, a SPEC file over `MAX_FILE_BYTES` and
submissions that unpack to more than `MAX_TOTAL_BYTES`. Each worker later writes the bytes into
a temp folder of its own, so no process ever runs the candidate's files in place.
"""

import hashlib
import stat
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

SUBMISSION_FILES = (
    "block_allocator.py",
    "kv_cache_manager.py",
    "paged_attention.py",
    "scheduler.py",
)
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 64 << 20
CLUTTER = ("__pycache__", ".DS_Store", ".git", ".venv", ".ipynb_checkpoints")


class SubmissionRefused(ValueError):
    """The path is not a submission the grader will read; the message says why and what to do."""


@dataclass
class Intake:
    """A submission as read: its name, the SPEC files' bytes and the other paths it held."""

    name: str
    path: str
    files: dict[str, bytes]
    ignored: list[str] = field(default_factory=list)

    def sha256(self) -> dict[str, str]:
        return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(self.files.items())}


def read_submission(path: Path) -> Intake:
    """The submission at `path`, or `SubmissionRefused` with a message for the user."""
    if path.is_symlink():
        raise SubmissionRefused(f"{path} is a symbolic link: pass the folder or archive itself")
    if path.is_dir():
        entries = folder_entries(path)
        name = path.resolve().name
    elif path.is_file() and path.name.endswith(".zip"):
        entries = zip_entries(path)
        name = path.name.removesuffix(".zip")
    elif path.is_file() and path.name.endswith((".tar.gz", ".tgz")):
        entries = tar_entries(path)
        name = path.name.removesuffix(".tar.gz").removesuffix(".tgz")
    elif not path.exists():
        raise SubmissionRefused(f"{path} does not exist: give a folder, a .zip or a .tar.gz")
    else:
        raise SubmissionRefused(f"{path} is not a folder, a .zip or a .tar.gz")
    return select_files(name, str(path), entries)


def select_files(name: str, path: str, entries: dict[str, bytes | None]) -> Intake:
    """Keep the SPEC files from the top folder (or the one folder an archive wraps them in)."""
    paths = [PurePosixPath(entry) for entry in entries]
    top = PurePosixPath()
    tops = {entry.parts[0] for entry in paths if len(entry.parts) > 1}
    if not any(len(entry.parts) == 1 for entry in paths) and len(tops) == 1:
        top = PurePosixPath(tops.pop())  # an archive of one folder: look inside it
    files, ignored = {}, []
    for entry in sorted(paths):
        data = entries[str(entry)]
        if entry.parent == top and entry.name in SUBMISSION_FILES and data is not None:
            files[entry.name] = data
        elif not any(part in CLUTTER for part in entry.parts):
            ignored.append(str(entry))
    return Intake(name=name, path=path, files=files, ignored=ignored)


def checked_path(name: str) -> str:
    entry = PurePosixPath(name)
    if entry.is_absolute() or ".." in entry.parts or "\\" in name:
        raise SubmissionRefused(f"the archive holds an unsafe path {name!r}: repack it plainly")
    return str(entry)


def checked_size(size: int, total: int, name: str) -> int:
    """The running total with this entry; refused past the limits (a zip bomb, a stray dataset)."""
    if PurePosixPath(name).name in SUBMISSION_FILES and size > MAX_FILE_BYTES:
        raise SubmissionRefused(
            f"{name} holds {size:,} bytes: a submission file may hold {MAX_FILE_BYTES:,} at most"
        )
    if total + size > MAX_TOTAL_BYTES:
        raise SubmissionRefused(
            f"the submission unpacks to more than {MAX_TOTAL_BYTES >> 20} MiB: "
            "submit the four files (and little else)"
        )
    return total + size


def wanted(name: str) -> bool:
    """Whether the bytes of this entry are read: a SPEC file name, at any depth."""
    return PurePosixPath(name).name in SUBMISSION_FILES


def folder_entries(folder: Path) -> dict[str, bytes | None]:
    """The files under `folder` (version control and caches skipped); links are refused."""
    entries, total = {}, 0
    try:
        for path in sorted(folder.rglob("*")):
            name = path.relative_to(folder).as_posix()
            if any(part in CLUTTER for part in PurePosixPath(name).parts):
                continue
            if path.is_symlink():
                raise SubmissionRefused(f"{name} is a symbolic link: submit the file itself")
            if path.is_file():
                total = checked_size(path.stat().st_size, total, name)
                entries[name] = path.read_bytes() if wanted(name) else None
    except OSError as error:
        raise SubmissionRefused(f"{folder} could not be read: {error}") from None
    return entries


def zip_entries(archive: Path) -> dict[str, bytes | None]:
    entries, total = {}, 0
    try:
        with zipfile.ZipFile(archive) as bundle:
            for info in bundle.infolist():
                name = checked_path(info.filename)
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise SubmissionRefused(f"the archive holds a link {name!r}: repack it plainly")
                if info.is_dir():
                    continue
                total = checked_size(info.file_size, total, name)
                entries[name] = bundle.read(info) if wanted(name) else None
    except SubmissionRefused:
        raise
    except Exception as error:  # zipfile's, zlib's and lzma's errors, encryption, unknown methods
        raise SubmissionRefused(f"{archive} is not a readable .zip: {error}") from None
    return entries


def tar_entries(archive: Path) -> dict[str, bytes | None]:
    entries, total = {}, 0
    try:
        with tarfile.open(archive, mode="r:gz") as bundle:
            for member in bundle:
                name = checked_path(member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    raise SubmissionRefused(
                        f"the archive holds {name!r}, which is a link or a special file: "
                        "repack it with plain files only"
                    )
                total = checked_size(member.size, total, name)
                data = bundle.extractfile(member).read() if wanted(name) else None
                entries[name] = data
    except (tarfile.TarError, OSError, EOFError) as error:
        raise SubmissionRefused(f"{archive} is not a readable .tar.gz: {error}") from None
    return entries
