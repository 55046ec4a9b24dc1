"""Reading a submission: a folder, a .zip and a .tar.gz of the same files give the same SPEC files,
byte for byte, and anything unsafe or unreadable is refused with a message that says why."""

import hashlib
import io
import re
import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import intake
from grader.intake import SubmissionRefused, read_submission

SOURCES = {
    "block_allocator.py": b"class BlockAllocator:\r\n    pass\r\n",  # CRLF kept as it is
    "kv_cache_manager.py": b"# \xe9t\xe9 (latin-1, not UTF-8)\n",
    "paged_attention.py": b"",
    "scheduler.py": b"from .kv_cache_manager import Request\n",
}
EXTRAS = {"README.md": b"# notes\n", "helpers.py": b"x = 1\n", "old/scheduler.py": b"old = 1\n"}
CLUTTER = {"__pycache__/scheduler.cpython-311.pyc": b"\x00\x01", ".DS_Store": b"\x00"}
IGNORED = ["README.md", "helpers.py", "old/scheduler.py"]
KINDS = ["folder", "zip", "tar.gz", "tgz"]


def write_folder(root: Path, tree: dict[str, bytes]) -> Path:
    for name, data in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


def write_zip(path: Path, tree: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, data in tree.items():
            bundle.writestr(name, data)
    return path


def write_tar(path: Path, tree: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as bundle:
        for name, data in tree.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            bundle.addfile(member, io.BytesIO(data))
    return path


def pack(kind: str, tmp_path: Path, tree: dict[str, bytes]) -> Path:
    """`tree` as a submission named `candidate`: a folder, a .zip, a .tar.gz or a .tgz."""
    if kind == "folder":
        return write_folder(tmp_path / "candidate", tree)
    path = tmp_path / f"candidate.{kind}"
    return write_zip(path, tree) if kind == "zip" else write_tar(path, tree)


# -- what is read -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_takes_the_spec_files_byte_for_byte_and_lists_the_rest(kind: str, tmp_path: Path) -> None:
    submission = read_submission(pack(kind, tmp_path, SOURCES | EXTRAS | CLUTTER))
    assert submission.name == "candidate"
    assert submission.files == SOURCES
    assert submission.ignored == IGNORED


def test_sha256_is_each_files_digest(tmp_path: Path) -> None:
    submission = read_submission(pack("folder", tmp_path, SOURCES))
    assert submission.sha256() == {
        name: hashlib.sha256(data).hexdigest() for name, data in SOURCES.items()
    }


@pytest.mark.parametrize("kind", KINDS)
def test_one_folder_wrapping_everything_is_looked_into(kind: str, tmp_path: Path) -> None:
    tree = {f"candidate-main/{name}": data for name, data in (SOURCES | EXTRAS).items()}
    submission = read_submission(pack(kind, tmp_path, tree))
    assert submission.files == SOURCES
    assert submission.ignored == [f"candidate-main/{name}" for name in IGNORED]


def test_missing_spec_files_are_simply_absent(tmp_path: Path) -> None:
    submission = read_submission(pack("zip", tmp_path, {"scheduler.py": b"x = 1\n"}))
    assert submission.files == {"scheduler.py": b"x = 1\n"}
    assert submission.ignored == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_spec_file_over_max_file_bytes_is_refused(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intake, "MAX_FILE_BYTES", 64)
    assert read_submission(pack(kind, tmp_path, {"scheduler.py": b"#" * 64})).files
    (tmp_path / "big").mkdir()
    tree = {"block_allocator.py": b"#" * 65, "scheduler.py": b"#" * 64}
    with pytest.raises(SubmissionRefused, match=r"block_allocator\.py holds 65 bytes"):
        read_submission(pack(kind, tmp_path / "big", tree))


@pytest.mark.parametrize("kind", KINDS)
def test_a_submission_of_exactly_max_total_bytes_is_read(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intake, "MAX_TOTAL_BYTES", 1 << 20)
    tree = {"scheduler.py": b"x = 1\n", "weights.bin": bytes((1 << 20) - 6)}
    assert read_submission(pack(kind, tmp_path, tree)).files == {"scheduler.py": b"x = 1\n"}


# -- what is refused ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_submission_over_max_total_bytes_is_refused(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unpacked sizes count, not the archive's: 1 MiB and a byte of zeros packs to little."""
    monkeypatch.setattr(intake, "MAX_TOTAL_BYTES", 1 << 20)
    tree = {"scheduler.py": b"x = 1\n", "weights.bin": bytes((1 << 20) - 5)}
    with pytest.raises(SubmissionRefused, match="submission unpacks to more than 1 MiB"):
        read_submission(pack(kind, tmp_path, tree))


def symlinked_file_in_folder(tmp_path: Path) -> Path:
    folder = write_folder(tmp_path / "candidate", {"scheduler.py": b""})
    (folder / "block_allocator.py").symlink_to("/etc/passwd")
    return folder


def symlinked_folder_in_folder(tmp_path: Path) -> Path:
    folder = write_folder(tmp_path / "candidate", {"scheduler.py": b""})
    (folder / "notes").symlink_to("/etc", target_is_directory=True)
    return folder


def symlinked_submission(tmp_path: Path) -> Path:
    (tmp_path / "link").symlink_to(write_folder(tmp_path / "candidate", SOURCES))
    return tmp_path / "link"


def zip_with_symlink(tmp_path: Path) -> Path:
    path = tmp_path / "linked.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        link = zipfile.ZipInfo("block_allocator.py")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        bundle.writestr(link, "/etc/passwd")
    return path


def tar_with_symlink(tmp_path: Path) -> Path:
    path = tmp_path / "linked.tar.gz"
    with tarfile.open(path, "w:gz") as bundle:
        link = tarfile.TarInfo("block_allocator.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        bundle.addfile(link)
    return path


def zip_with_damaged_data(tmp_path: Path) -> Path:
    """A sound directory over deflate data that zlib rejects (0xff: a reserved block type)."""
    path = write_zip(tmp_path / "damaged.zip", {"block_allocator.py": bytes(1000)})
    raw = bytearray(path.read_bytes())
    start = 30 + len("block_allocator.py")  # after the local header, which has no extra field
    raw[start : start + 4] = b"\xff" * 4
    path.write_bytes(raw)
    return path


def zip_with_password(tmp_path: Path) -> Path:
    """The 'encrypted' flag set in both headers, as a password-protected zip has it."""
    path = write_zip(tmp_path / "locked.zip", {"block_allocator.py": b"x = 1\n"})
    raw = bytearray(path.read_bytes())
    raw[6] |= 1
    raw[raw.find(b"PK\x01\x02") + 8] |= 1
    path.write_bytes(raw)
    return path


def plain_file(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(tmp_path: Path) -> Path:
        (tmp_path / name).write_bytes(data)
        return tmp_path / name

    return make


REFUSED = [
    pytest.param(
        lambda tmp_path: tmp_path / "nope", "nope does not exist: give a folder", id="gone"
    ),
    pytest.param(
        plain_file("x.txt", b"hi"), "x.txt is not a folder, a .zip or a .tar.gz", id="txt"
    ),
    pytest.param(
        lambda tmp_path: write_zip(tmp_path / "a.zip", SOURCES | {"/etc/evil.py": b""}),
        "the archive holds an unsafe path '/etc/evil.py': repack it plainly",
        id="zip absolute path",
    ),
    pytest.param(
        lambda tmp_path: write_tar(tmp_path / "a.tar.gz", SOURCES | {"../evil.py": b""}),
        "the archive holds an unsafe path '../evil.py'",
        id="tar parent path",
    ),
    pytest.param(
        lambda tmp_path: write_zip(tmp_path / "a.zip", {"sub\\scheduler.py": b""}),
        "unsafe path 'sub\\\\scheduler.py'",
        id="zip backslash",
    ),
    pytest.param(zip_with_symlink, "holds a link 'block_allocator.py'", id="zip symlink"),
    pytest.param(
        tar_with_symlink,
        "holds 'block_allocator.py', which is a link or a special file: repack it with plain",
        id="tar symlink",
    ),
    pytest.param(
        symlinked_file_in_folder,
        "block_allocator.py is a symbolic link: submit the file itself",
        id="folder file symlink",
    ),
    pytest.param(symlinked_folder_in_folder, "notes is a symbolic link", id="folder dir symlink"),
    pytest.param(
        symlinked_submission,
        "link is a symbolic link: pass the folder or archive itself",
        id="submission symlink",
    ),
    pytest.param(plain_file("a.zip", b"PK\x03\x04junk"), "a.zip is not a readable .zip", id="junk"),
    pytest.param(zip_with_damaged_data, "damaged.zip is not a readable .zip", id="zip data"),
    pytest.param(zip_with_password, "locked.zip is not a readable .zip", id="zip password"),
    pytest.param(plain_file("a.tar.gz", b"\x1f\x8bjunk"), "not a readable .tar.gz", id="tar junk"),
]


@pytest.mark.parametrize(("make", "says"), REFUSED)
def test_refused_with_a_message_that_says_why(
    make: Callable[[Path], Path], says: str, tmp_path: Path
) -> None:
    with pytest.raises(SubmissionRefused, match=re.escape(says)):
        read_submission(make(tmp_path))
