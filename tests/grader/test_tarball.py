"""`tarball`: a folder packed and unpacked is the same folder, its modes plain; a link, a special
file or a path that leaves the folder is refused, and nothing lands outside it: through tarfile's
`filter` argument, and through its `members` as on Python before 3.11.4."""

import io
import stat
import tarfile
from pathlib import Path

import pytest

from grader import tarball


@pytest.fixture(params=["filter", "members"])
def python(request, monkeypatch) -> str:
    """Each test runs with tarfile as it is, then as Python 3.11.0 to 3.11.3 have it."""
    if request.param == "members":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def archive(*members: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        for member in members:
            bundle.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 1 if kind == tarfile.REGTYPE else 0
    return info


def test_a_packed_folder_unpacks_the_same(python, tmp_path: Path) -> None:
    folder = tmp_path / "submission"
    (folder / "sub").mkdir(parents=True)
    (folder / "scheduler.py").write_text("x = 1\n")
    (folder / "sub" / "notes.md").write_text("# notes\n")
    (folder / "scheduler.py").chmod(0o4777)
    tarball.unpack(tarball.pack(folder), tmp_path / "out")
    copy = tmp_path / "out" / "submission"
    assert (copy / "scheduler.py").read_text() == "x = 1\n"
    assert (copy / "sub" / "notes.md").read_text() == "# notes\n"
    assert stat.S_IMODE((copy / "scheduler.py").stat().st_mode) == 0o755


def test_a_folder_with_a_link_is_refused(python, tmp_path: Path) -> None:
    """No submission may hold one (the intake refuses them): refused here too, before intake."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "scheduler.py").write_text("x = 1\n")
    (folder / "here.py").symlink_to("scheduler.py")
    with pytest.raises(tarfile.TarError, match=r"'submission/here\.py' is a link"):
        tarball.unpack(tarball.pack(folder), tmp_path / "out")


ESCAPES = {
    "dot-dot": lambda outside: [member("../escaped.py")],
    "absolute": lambda outside: [member(str(outside / "escaped.py"))],
    "absolute link": lambda outside: [member("link", tarfile.SYMTYPE, str(outside))],
    "link up": lambda outside: [member("link", tarfile.SYMTYPE, "../..")],
    "hard link up": lambda outside: [member("hard", tarfile.LNKTYPE, "../escaped.py")],
    "through a link": lambda outside: [
        member("up", tarfile.SYMTYPE, ".."),
        member("up/escaped.py"),
    ],
    "device": lambda outside: [member("device", tarfile.CHRTYPE)],
    "a name linked again": lambda outside: [
        member("link", tarfile.SYMTYPE, "deep/down"),
        member("link", tarfile.SYMTYPE, "../../escaped"),
    ],
}


@pytest.mark.parametrize("escape", ESCAPES)
def test_nothing_lands_outside(python, escape: str, tmp_path: Path) -> None:
    """Refused: nothing appears beside the folder, and no link or special file in it."""
    into = tmp_path / "into"
    with pytest.raises(tarfile.TarError):
        tarball.unpack(archive(*ESCAPES[escape](tmp_path)), into)
    assert [path.name for path in tmp_path.iterdir()] == ["into"]
    links = [entry for entry in into.rglob("*") if entry.is_symlink()]
    special = [entry for entry in into.rglob("*") if not (entry.is_file() or entry.is_dir())]
    assert not links + special, f"{escape}: {links + special} left in the folder"
