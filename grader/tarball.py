"""A folder as .tar.gz bytes and back: grade-all --ray sends a submission to its task and the
report folder back to the driver this way.

`unpack` lets nothing land outside its folder: tarfile's "data" filter where Python has it
(3.11.4 and newer), the same rule checked here before (Debian 12's Python is 3.11.2).
"""

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path


def pack(path: Path) -> bytes:
    """`path` (a folder or a file) as a .tar.gz holding it under its own name."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        bundle.add(path, arcname=path.name)
    return buffer.getvalue()


def unpack(data: bytes, into: Path) -> None:
    """Extract the .tar.gz `data` into the folder `into`: folders, files, and links to a place
    inside `into`; anything else raises `tarfile.TarError` (nothing lands outside `into`)."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as bundle:
        if hasattr(tarfile, "data_filter"):
            bundle.extractall(into, filter="data")
        else:
            bundle.extractall(into, members=inside(bundle, into))


def inside(bundle: tarfile.TarFile, into: Path) -> Iterator[tarfile.TarInfo]:
    """`bundle`'s members, each checked as it is about to be extracted (so through the links
    extracted before it): a folder, a file or a link whose path and target stay in `into`."""
    root = into.resolve()
    for member in bundle.getmembers():
        place = (root / member.name).resolve()
        if member.issym():
            target = (place.parent / member.linkname).resolve()
        elif member.islnk():
            target = (root / member.linkname).resolve()
        else:
            target = place
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise tarfile.ExtractError(f"{member.name!r} is a device, a pipe or a special file")
        if not place.is_relative_to(root) or not target.is_relative_to(root):
            raise tarfile.ExtractError(f"{member.name!r} or its link's target lands outside {into}")
        yield member
