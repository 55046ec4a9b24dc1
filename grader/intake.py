"""Reading a submission: a folder, a `.zip` or a `.tar.gz`, into memory, safely.

The four submission files are taken, as bytes, from one folder (`submission_folder`): the top
(or the one folder an archive wraps everything in) where it holds any of them, else the one
folder below it that does. A submission that holds them in several folders below the top, one
that holds none, and the kit's own folder (its stubs, graded by mistake) are refused, saying which
folder to grade. Everything else is listed as ignored, but clutter and `__init__.py`.

Nothing is extracted to disk and nothing is followed: archives with absolute paths, `..`, links or
special files are refused, as are symlinks in a folder, a submission file over `MAX_FILE_BYTES`,
submissions that unpack to more than `MAX_TOTAL_BYTES` and submissions of more than
`MAX_ENTRIES` files and folders. Each worker later writes the bytes into a temp folder of its
own, so no process ever runs the candidate's files in place.

A hostile submission costs bounded time and memory. Entries are counted as they are read and
reading stops at the first one past `MAX_ENTRIES`: a .tar.gz of a million empty files is refused
after its first few thousand headers, a folder is walked without being listed whole first, and a
.zip's end record (zip64 included) is checked before `zipfile` parses its central directory. A
.tar.gz is unpacked through `Bounded`, which stops at `tar_limit()` bytes whatever size a header
claims. The report names at most `MAX_IGNORED_LISTED` ignored paths, then how many more.
"""

import gzip
import hashlib
import io
import os
import stat
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grader.parts import SUBMISSION_FILES

MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 64 << 20
MAX_ENTRIES = 4096  # files and folders; an archive's clutter counts too (each costs reading)
ZIP_ENTRY_BYTES = 1024  # a .zip's central directory may take this much per entry on average
TAR_ENTRY_BYTES = 4096  # unpacked tar beyond the files' bytes: headers, padding, pax records
MAX_IGNORED_LISTED = 200  # ignored paths named in the report, then "... and N more"
MAX_FOLDERS_NAMED = 5  # folders named in a refusal, then how many more
CLUTTER = ("__pycache__", ".DS_Store", ".git", ".venv", ".ipynb_checkpoints")
PACKAGE_MARKER = "__init__.py"  # a package's marker, wherever it is: never listed as ignored
KIT_MARKERS = ("exercises", "grader")  # folders that, side by side, make the kit's own folder
TOP = PurePosixPath()
ARCHIVES = (".zip", ".tar.gz", ".tgz")  # the submissions that are files, as `read_submission` reads


class SubmissionRefused(ValueError):
    """The path is not a submission the grader will read; the message says why and what to do."""


@dataclass
class Intake:
    """A submission as read: its name, its path (resolved), the submission files' bytes, the
    folder inside it they were taken from ("" for its top) and the other paths it held."""

    name: str
    path: str
    files: dict[str, bytes]
    ignored: list[str] = field(default_factory=list)
    folder: str = ""

    def sha256(self) -> dict[str, str]:
        return {name: hashlib.sha256(data).hexdigest() for name, data in sorted(self.files.items())}


def read_submission(path: Path) -> Intake:
    """The submission at `path`, or `SubmissionRefused` with a message for the user."""
    if path.is_symlink():
        raise SubmissionRefused(f"{path} is a symbolic link: pass the folder or archive itself")
    if path.is_dir():
        if is_the_kit(path) and not any((path / name).is_file() for name in SUBMISSION_FILES):
            # refused before it is read (it may hold more than MAX_ENTRIES files), as an archive
            # of it is once read: its top holds none of the files
            raise kit_refused(path, TOP, archive=False)
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
    return select_files(name, path, entries)


def select_files(name: str, path: Path, entries: dict[str, bytes | None]) -> Intake:
    """Keep the submission files of `submission_folder`; list the other entries as ignored."""
    paths = [PurePosixPath(entry) for entry in entries]
    folder = submission_folder(path, paths)
    files, ignored = {}, []
    for entry in sorted(paths):
        data = entries[str(entry)]
        if entry.parent == folder and entry.name in SUBMISSION_FILES and data is not None:
            files[entry.name] = data
        elif not is_clutter(entry) and entry.name != PACKAGE_MARKER:
            ignored.append(str(entry))
    if len(ignored) > MAX_IGNORED_LISTED:
        more = len(ignored) - MAX_IGNORED_LISTED
        ignored = [*ignored[:MAX_IGNORED_LISTED], f"... and {more:,} more"]
    shown = "" if folder == TOP else folder.as_posix()
    return Intake(name=name, path=str(path.resolve()), files=files, ignored=ignored, folder=shown)


def submission_folder(path: Path, paths: list[PurePosixPath]) -> PurePosixPath:
    """The folder of `paths` (the entries of the submission at `path`) to take the submission
    files from: the top, or the one folder everything lies in, where it holds any of them; else
    the one folder below it that does. `SubmissionRefused` where none or several do, or where
    that would grade the kit's own folder (its stubs)."""
    top = wrapping_folder(paths)
    holders = sorted({entry.parent for entry in paths if holds_a_submission_file(entry)})
    if top in holders:
        return top
    archive, kits = not path.is_dir(), kit_folders(paths)
    if top in kits:
        raise kit_refused(path, top, archive)
    if not holders:
        raise SubmissionRefused(
            f"no {', '.join(SUBMISSION_FILES)} anywhere in {path}: give the folder "
            "(or a .zip / .tar.gz of it) that holds your files"
        )
    if len(holders) > 1:
        what = "pack only the folder to grade" if archive else f"grade one, as {path / holders[0]}"
        raise SubmissionRefused(
            f"found submission files in {len(holders)} folders of {path} ({named(holders)}): {what}"
        )
    (holder,) = holders
    if holder.name == KIT_MARKERS[0] and holder.parent in kits:
        raise kit_refused(path, holder.parent, archive)
    return holder


def wrapping_folder(paths: list[PurePosixPath]) -> PurePosixPath:
    """The one folder every entry lies in, where there is nothing else at the top (an archive
    of a folder); else the top."""
    tops = {entry.parts[0] for entry in paths if len(entry.parts) > 1}
    if len(tops) == 1 and all(len(entry.parts) > 1 for entry in paths):
        return PurePosixPath(tops.pop())
    return TOP


def holds_a_submission_file(entry: PurePosixPath) -> bool:
    return entry.name in SUBMISSION_FILES and not is_clutter(entry)


def is_clutter(entry: PurePosixPath) -> bool:
    return any(part in CLUTTER for part in entry.parts)


def kit_folders(paths: list[PurePosixPath]) -> set[PurePosixPath]:
    """The folders among `paths` that hold the kit's `exercises/` beside its `grader/`."""
    folders = {folder for entry in paths for folder in entry.parents}
    return {
        folder.parent
        for folder in folders
        if folder.name == KIT_MARKERS[0] and folder.parent / KIT_MARKERS[1] in folders
    }


def is_the_kit(folder: Path) -> bool:
    """Whether `folder` holds the kit's `exercises/` beside its `grader/`."""
    return all((folder / marker).is_dir() for marker in KIT_MARKERS)


def kit_refused(path: Path, kit: PurePosixPath, archive: bool) -> SubmissionRefused:
    """The refusal of the kit's own folder (`kit` in `path`), whose stubs it would grade."""
    if archive:
        where = f"{path} holds the kit's own folder{'' if kit == TOP else f' {kit}/'}"
        return SubmissionRefused(f"{where}: unpack it and grade its exercises/ folder")
    folder = path / kit
    return SubmissionRefused(
        f"{folder} is the kit's own folder: grade {folder / 'exercises'} (make grade does)"
    )


def named(folders: list[PurePosixPath]) -> str:
    """The first `MAX_FOLDERS_NAMED` of `folders`, then how many more."""
    shown = [f"{folder}/" for folder in folders[:MAX_FOLDERS_NAMED]]
    if len(folders) > MAX_FOLDERS_NAMED:
        shown.append(f"and {len(folders) - MAX_FOLDERS_NAMED} more")
    return ", ".join(shown)


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
    """Whether the bytes of this entry are read: a submission file name, at any depth."""
    return PurePosixPath(name).name in SUBMISSION_FILES


def too_many() -> SubmissionRefused:
    return SubmissionRefused(
        f"the submission holds more than {MAX_ENTRIES:,} files and folders: "
        "submit the four files (and little else)"
    )


def folder_entries(folder: Path) -> dict[str, bytes | None]:
    """The files under `folder` (version control and caches skipped); links are refused.

    Each folder is read entry by entry (`os.scandir`), each entry counted as it comes: a folder
    of a million files costs its first `MAX_ENTRIES`, not a list of them all."""
    entries, total, count = {}, 0, 0
    pending = [folder]
    try:
        while pending:
            with os.scandir(pending.pop()) as listing:
                for item in listing:
                    if item.name in CLUTTER:
                        continue  # neither looked into nor counted
                    count += 1
                    if count > MAX_ENTRIES:
                        raise too_many()
                    path = Path(item.path)
                    name = path.relative_to(folder).as_posix()
                    if item.is_symlink():
                        raise SubmissionRefused(
                            f"{name} is a symbolic link: submit the file itself"
                        )
                    if item.is_dir():
                        pending.append(path)
                    elif item.is_file():
                        total = checked_size(item.stat().st_size, total, name)
                        entries[name] = path.read_bytes() if wanted(name) else None
    except OSError as error:
        raise SubmissionRefused(f"{folder} could not be read: {error}") from None
    return entries


def zip_directory_checked(file: BinaryIO) -> None:
    """Refuse a .zip whose end record announces more than `MAX_ENTRIES` entries, or a central
    directory over `MAX_ENTRIES * ZIP_ENTRY_BYTES`, before `zipfile` reads and parses it.

    The record is read by `zipfile._EndRecData`, the function `ZipFile` itself reads it with
    (zip64 included), so the numbers checked are the ones it goes by. It parses `_ECD_SIZE`
    bytes of directory whatever the entry count says, hence both bounds."""
    end = zipfile._EndRecData(file)
    if not end:
        return  # no end record: ZipFile refuses it
    if end[zipfile._ECD_ENTRIES_TOTAL] > MAX_ENTRIES:
        raise too_many()
    if end[zipfile._ECD_SIZE] > MAX_ENTRIES * ZIP_ENTRY_BYTES:
        raise SubmissionRefused(
            f"the archive's central directory takes {end[zipfile._ECD_SIZE]:,} bytes, more than "
            f"{MAX_ENTRIES * ZIP_ENTRY_BYTES:,}: submit the four files (and little else)"
        )


def zip_entries(archive: Path) -> dict[str, bytes | None]:
    entries, total = {}, 0
    try:
        with archive.open("rb") as file:
            zip_directory_checked(file)
            with zipfile.ZipFile(file) as bundle:
                infos = bundle.infolist()
                if len(infos) > MAX_ENTRIES:  # more than the end record said: forged
                    raise too_many()
                for info in infos:
                    name = checked_path(info.filename)
                    if stat.S_ISLNK(info.external_attr >> 16):
                        raise SubmissionRefused(
                            f"the archive holds a link {name!r}: repack it plainly"
                        )
                    if info.is_dir():
                        continue
                    total = checked_size(info.file_size, total, name)
                    entries[name] = bundle.read(info) if wanted(name) else None
    except SubmissionRefused:
        raise
    except Exception as error:  # zipfile's, zlib's and lzma's errors, encryption, unknown methods
        raise SubmissionRefused(f"{archive} is not a readable .zip: {error}") from None
    return entries


def tar_limit() -> int:
    """The bytes a .tar.gz may unpack to: its files' and room for each entry's headers."""
    return MAX_TOTAL_BYTES + MAX_ENTRIES * TAR_ENTRY_BYTES


class Bounded:
    """The unpacked tar stream for `tarfile`, read forward only and no further than `limit`.

    `tarfile` reads a pax or GNU long-name header whole, whatever size it claims, before it
    yields the member: a request past the limit is refused before anything is read."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self.stream, self.limit, self.position = stream, limit, 0

    def too_big(self) -> SubmissionRefused:
        return SubmissionRefused(
            f"the archive unpacks to more than {self.limit >> 20} MiB of tar data: "
            "submit the four files (and little else)"
        )

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0 or self.position + size > self.limit:
            raise self.too_big()
        data = self.stream.read(size)
        self.position += len(data)
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence != io.SEEK_SET or offset < self.position:
            raise tarfile.ReadError("the archive is read forward only")
        if offset > self.limit:
            raise self.too_big()
        self.position = self.stream.seek(offset)
        return self.position

    def tell(self) -> int:
        return self.position


def tar_entries(archive: Path) -> dict[str, bytes | None]:
    entries, total, count = {}, 0, 0
    try:
        with (
            gzip.open(archive, "rb") as unpacked,
            tarfile.open(fileobj=Bounded(unpacked, tar_limit()), mode="r:") as bundle,
        ):
            for member in bundle:  # lazily: the headers past the first refused one stay unread
                count += 1
                if count > MAX_ENTRIES:
                    raise too_many()
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
    except SubmissionRefused:
        raise
    except Exception as error:  # tarfile's, gzip's and zlib's errors, a pax chain's recursion
        raise SubmissionRefused(f"{archive} is not a readable .tar.gz: {error}") from None
    return entries
