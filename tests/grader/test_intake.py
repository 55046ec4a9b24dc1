"""Reading a submission: a folder, a .zip and a .tar.gz of the same files give the same submission
files, byte for byte, and anything unsafe or unreadable is refused with a message that says why."""

import gzip
import hashlib
import io
import re
import stat
import struct
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import KIT_ROOT, intake
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
    root.mkdir(exist_ok=True)
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


def test_init_py_is_expected_beside_the_files_and_not_listed_as_ignored(tmp_path: Path) -> None:
    tree = SOURCES | {"__init__.py": b"", "helpers/__init__.py": b"", "helpers/util.py": b""}
    assert read_submission(pack("folder", tmp_path, tree)).ignored == ["helpers/util.py"]
    assert read_submission(KIT_ROOT / "exercises").ignored == ["README.md"]


NESTED = [
    pytest.param("submission/exercises", {"submission/README.md": b"# notes\n"}, id="wrapped"),
    pytest.param("code/v2", {"README.md": b"# notes\n", "code/v2/helpers.py": b""}, id="deeper"),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("folder", "others"), NESTED)
def test_the_one_folder_holding_the_files_is_found_at_any_depth(
    kind: str, folder: str, others: dict[str, bytes], tmp_path: Path
) -> None:
    tree = {f"{folder}/{name}": data for name, data in SOURCES.items()} | others
    submission = read_submission(pack(kind, tmp_path, tree))
    assert (submission.files, submission.folder) == (SOURCES, folder)
    assert submission.ignored == sorted(others)


def test_a_folder_of_the_files_at_the_top_is_taken_whatever_lies_deeper(tmp_path: Path) -> None:
    """The top's files, even some of them, make the submission: missing ones cost their parts."""
    tree = {"scheduler.py": b"x = 1\n", "old/block_allocator.py": b"", "v1/scheduler.py": b""}
    submission = read_submission(pack("zip", tmp_path, tree))
    assert (submission.files, submission.folder) == ({"scheduler.py": b"x = 1\n"}, "")
    assert submission.ignored == ["old/block_allocator.py", "v1/scheduler.py"]


NONE_ANYWHERE = (
    "no block_allocator.py, kv_cache_manager.py, paged_attention.py, scheduler.py, "
    "prefix_cache.py anywhere in {tmp}/candidate"
)


def a_kit(root: str, files: dict[str, bytes] = SOURCES) -> dict[str, bytes]:
    """The kit's layout under `root`: its stubs in exercises/ beside grader/."""
    tree = {f"{root}exercises/{name}": data for name, data in files.items()}
    return tree | {f"{root}grader/grade.py": b"", f"{root}README.md": b""}


NOT_ONE_FOLDER = [  # what the refusal says, `{tmp}` standing for the test's folder
    pytest.param("folder", {}, NONE_ANYWHERE, id="empty folder"),
    pytest.param("zip", {"README.md": b"", "src/helpers.py": b""}, NONE_ANYWHERE, id="no file"),
    pytest.param(
        "tar.gz",
        {"a/scheduler.py": b"", "b/c/block_allocator.py": b"", "README.md": b""},
        "found submission files in 2 folders of {tmp}/candidate.tar.gz (a/, b/c/): pack only",
        id="two folders",
    ),
    pytest.param(
        "folder",
        {"sub/v1/scheduler.py": b"", "sub/v2/scheduler.py": b""},
        "(sub/v1/, sub/v2/): grade one, as {tmp}/candidate/sub/v1",
        id="two versions",
    ),
    pytest.param(
        "zip",
        {f"v{number}/scheduler.py": b"" for number in range(7)},
        "(v0/, v1/, v2/, v3/, v4/, and 2 more): pack only the folder to grade",
        id="seven versions",
    ),
    pytest.param(
        "folder",
        a_kit(""),
        "{tmp}/candidate is the kit's own folder: grade {tmp}/candidate/exercises (make grade",
        id="kit",
    ),
    pytest.param(
        "folder", a_kit("", {"README.md": b""}), "candidate is the kit's own", id="kit, no stubs"
    ),
    pytest.param(
        "folder",
        a_kit("downloads/kit/"),
        "{tmp}/candidate/downloads/kit is the kit's own folder: grade "
        "{tmp}/candidate/downloads/kit/exercises (make grade does)",
        id="kit inside",
    ),
    pytest.param(
        "zip",
        a_kit("kit/"),
        "candidate.zip holds the kit's own folder kit/: unpack it and grade its exercises/",
        id="zip of the kit",
    ),
]


@pytest.mark.parametrize(("kind", "tree", "says"), NOT_ONE_FOLDER)
def test_refused_where_not_one_folder_holds_the_files(
    kind: str, tree: dict[str, bytes], says: str, tmp_path: Path
) -> None:
    with pytest.raises(SubmissionRefused, match=re.escape(says.format(tmp=tmp_path))):
        read_submission(pack(kind, tmp_path, tree))


def test_the_kits_own_folder_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named as the kit, not as a folder of too many files: what to grade, not what to delete."""
    monkeypatch.setattr(intake, "MAX_ENTRIES", 2)
    says = f"{KIT_ROOT} is the kit's own folder: grade {KIT_ROOT / 'exercises'} (make grade does)"
    with pytest.raises(SubmissionRefused, match=re.escape(says)):
        read_submission(KIT_ROOT)


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


# -- how many entries ---------------------------------------------------------------------------


def flat_tree(count: int) -> dict[str, bytes]:
    """The submission files and notes, `count` entries in all, none in a folder (so each kind counts
    the same: a folder's subfolders are entries, an archive need not list them)."""
    return SOURCES | {f"note{index:05}.txt": b"" for index in range(count - len(SOURCES))}


@pytest.mark.parametrize("kind", KINDS)
def test_max_entries_are_read_and_one_more_is_refused(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intake, "MAX_ENTRIES", 8)
    assert read_submission(pack(kind, tmp_path, flat_tree(8))).files == SOURCES
    (tmp_path / "more").mkdir()
    with pytest.raises(SubmissionRefused, match="holds more than 8 files and folders: submit"):
        read_submission(pack(kind, tmp_path / "more", flat_tree(9)))


def test_a_folders_subfolders_count_and_its_clutter_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(intake, "MAX_ENTRIES", 6)
    tree = SOURCES | {f".git/objects/{index}": b"" for index in range(50)}
    folder = write_folder(tmp_path / "candidate", tree | {"docs/notes.md": b""})  # 6 entries
    assert read_submission(folder).ignored == ["docs/notes.md"]
    (folder / "docs" / "more.md").write_bytes(b"")
    with pytest.raises(SubmissionRefused, match="more than 6 files and folders"):
        read_submission(folder)


def test_a_folder_of_too_many_files_is_refused(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "candidate", flat_tree(intake.MAX_ENTRIES + 1))
    with pytest.raises(SubmissionRefused, match=f"more than {intake.MAX_ENTRIES:,} files and"):
        read_submission(folder)


def million_empty_files(path: Path) -> Path:
    """A .tar.gz of a million empty files, 5 MB: one gzip member of a thousand headers, written
    a thousand times (gzip reads concatenated members as one stream)."""
    header = tarfile.TarInfo("empty.txt").tobuf(format=tarfile.USTAR_FORMAT)
    path.write_bytes(gzip.compress(header * 1000, compresslevel=1) * 1000)
    return path


def test_a_tar_of_a_million_entries_is_refused_after_max_entries_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = []  # each header tarfile reads, counted
    original = tarfile.TarFile.next

    def counted(self: tarfile.TarFile) -> tarfile.TarInfo | None:
        headers.append(1)
        return original(self)

    monkeypatch.setattr(tarfile.TarFile, "next", counted)
    archive = million_empty_files(tmp_path / "bomb.tar.gz")
    with pytest.raises(SubmissionRefused, match=f"more than {intake.MAX_ENTRIES:,} files and"):
        read_submission(archive)
    assert intake.MAX_ENTRIES < len(headers) <= intake.MAX_ENTRIES + 2  # not a million


@pytest.mark.parametrize("form", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu"])
def test_long_names_and_whole_blocks_read_forward_only(form: int, tmp_path: Path) -> None:
    """`Bounded` never seeks back: not after a file of whole 512-byte blocks, nor past the
    headers that long names (and, in pax, long records) take."""
    top = "d" * 120  # over ustar's 100 characters
    tree = {
        "scheduler.py": b"#" * 512,
        "block_allocator.py": b"#" * 1024,
        "paged_attention.py": b"#" * 513,
        "n" * 150: b"#" * 512,
        "kv_cache_manager.py": b"",
    }
    with tarfile.open(tmp_path / "long.tar.gz", "w:gz", format=form) as bundle:
        for name, data in tree.items():
            member = tarfile.TarInfo(f"{top}/{name}")
            member.size = len(data)
            member.pax_headers = {"comment": "\u00e9" * 3000} if form == tarfile.PAX_FORMAT else {}
            bundle.addfile(member, io.BytesIO(data))
    submission = read_submission(tmp_path / "long.tar.gz")
    assert submission.files == {name: data for name, data in tree.items() if name.endswith(".py")}
    assert submission.ignored == [f"{top}/{'n' * 150}"]


def tar_of_one_header(path: Path, kind: bytes, size: int) -> Path:
    """A header claiming `size` bytes of pax or long-name data, followed by 4 KiB of them."""
    header = tarfile.TarInfo("././@LongLink")
    header.type, header.size = kind, size
    path.write_bytes(gzip.compress(header.tobuf(format=tarfile.USTAR_FORMAT) + bytes(4096)))
    return path


@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME], ids=["pax", "long"])
def test_a_tar_header_claiming_a_gigabyte_is_refused_before_reading_it(
    kind: bytes, tmp_path: Path
) -> None:
    """`tarfile` would read the header's data whole; refused when asked, before reading (read,
    the 4 KiB the archive holds would end short: 'not a readable .tar.gz')."""
    archive = tar_of_one_header(tmp_path / "claim.tar.gz", kind, 1 << 30)
    limit = intake.tar_limit() >> 20
    with pytest.raises(SubmissionRefused, match=f"unpacks to more than {limit} MiB of tar data"):
        read_submission(archive)


def test_a_chain_of_pax_headers_is_refused_as_unreadable(tmp_path: Path) -> None:
    """`tarfile` reads each pax header's member by recursion: a long chain is not a traceback."""
    record = b"20 comment=aaaaaaaa\n"
    pax = tarfile.TarInfo("pax")
    pax.type, pax.size = tarfile.XHDTYPE, len(record)
    block = pax.tobuf(format=tarfile.USTAR_FORMAT) + record.ljust(512, b"\0")
    tail = tarfile.TarInfo("scheduler.py").tobuf(format=tarfile.USTAR_FORMAT) + bytes(1024)
    (tmp_path / "chain.tar.gz").write_bytes(gzip.compress(block * 3000 + tail))
    with pytest.raises(SubmissionRefused, match=r"chain\.tar\.gz is not a readable \.tar\.gz"):
        read_submission(tmp_path / "chain.tar.gz")


def zip_of_one_file_listed(path: Path, listed: int, announced: int | None = None) -> Path:
    """A .zip of one empty file, `f`, whose central directory lists it `listed` times, and whose
    end record announces `announced` entries (the truth by default; over 65,534, in zip64
    records, as zipfile writes them)."""
    local = struct.pack(zipfile.structFileHeader, zipfile.stringFileHeader, 20, 0, 0, 0, 0, 0,
                        0, 0, 0, 1, 0) + b"f"  # fmt: skip
    central = struct.pack(zipfile.structCentralDir, zipfile.stringCentralDir, 20, 3, 20, 0, 0, 0,
                          0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0o644 << 16, 0) + b"f"  # fmt: skip
    announced = listed if announced is None else announced
    directory = central * listed
    end = b""
    if announced > 0xFFFE:
        end_at = len(local) + len(directory)
        end += struct.pack(zipfile.structEndArchive64, zipfile.stringEndArchive64, 44, 45, 45,
                           0, 0, announced, announced, len(directory), len(local))  # fmt: skip
        end += struct.pack(zipfile.structEndArchive64Locator, zipfile.stringEndArchive64Locator,
                           0, end_at, 1)  # fmt: skip
        counts, size, offset = 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF
    else:
        counts, size, offset = announced, len(directory), len(local)
    end += struct.pack(zipfile.structEndArchive, zipfile.stringEndArchive, 0, 0, counts, counts,
                       size, offset, 0)  # fmt: skip
    path.write_bytes(local + directory + end)
    return path


@pytest.fixture
def directories_parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times `zipfile` parsed a central directory."""
    parsed: list[int] = []
    original = zipfile.ZipFile._RealGetContents

    def counted(self: zipfile.ZipFile) -> None:
        parsed.append(1)
        original(self)

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", counted)
    return parsed


@pytest.mark.parametrize("listed", [3, 100_000], ids=["zip", "zip64"])
def test_the_handmade_zips_are_sound(
    listed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, directories_parsed: list[int]
) -> None:
    """What the next tests refuse is read when the limits allow it (so zipfile reads it so)."""
    monkeypatch.setattr(intake, "MAX_ENTRIES", listed)
    assert intake.zip_entries(zip_of_one_file_listed(tmp_path / "many.zip", listed)) == {"f": None}
    assert directories_parsed == [1]


DIRECTORY_BYTES = intake.MAX_ENTRIES * intake.ZIP_ENTRY_BYTES  # 100,000 entries take more
TOO_MANY = f"holds more than {intake.MAX_ENTRIES:,} files and folders"
ZIPS_REFUSED_UNPARSED = [
    pytest.param(100_000, None, TOO_MANY, id="zip64 count"),
    pytest.param(3, 0xFFFF_FFFF_FFFF, TOO_MANY, id="forged zip64 count"),
    pytest.param(3, 65_000, TOO_MANY, id="forged count"),
    pytest.param(
        100_000, 3, f"directory takes 4,700,000 bytes, more than {DIRECTORY_BYTES:,}", id="size"
    ),
]


@pytest.mark.parametrize(("listed", "announced", "says"), ZIPS_REFUSED_UNPARSED)
def test_a_zip_announcing_too_many_entries_is_refused_before_its_directory_is_parsed(
    listed: int, announced: int | None, says: str, tmp_path: Path, directories_parsed: list[int]
) -> None:
    archive = zip_of_one_file_listed(tmp_path / "many.zip", listed, announced)
    with pytest.raises(SubmissionRefused, match=says):
        read_submission(archive)
    assert directories_parsed == []


def test_a_zip_listing_more_entries_than_it_announces_is_refused(
    tmp_path: Path, directories_parsed: list[int]
) -> None:
    """Under the directory's size limit, parsed (bounded work), then counted."""
    archive = zip_of_one_file_listed(tmp_path / "many.zip", intake.MAX_ENTRIES + 1, 3)
    with pytest.raises(SubmissionRefused, match=TOO_MANY):
        read_submission(archive)
    assert directories_parsed == [1]


def test_the_report_names_the_first_ignored_paths_then_how_many_more(tmp_path: Path) -> None:
    listed = intake.MAX_IGNORED_LISTED
    submission = read_submission(pack("zip", tmp_path, flat_tree(len(SOURCES) + listed + 50)))
    assert submission.files == SOURCES
    assert submission.ignored == [f"note{index:05}.txt" for index in range(listed)] + [
        "... and 50 more"
    ]
