"""A folder as .tar.gz bytes and back: grade-all --ray sends a submission to its task and the
report folder back to the driver this way.

`unpack` takes folders and plain files only, each at a relative path without `..`: with no link
ever extracted, nothing can land outside its folder. A submission may hold no link anyway (the
intake refuses them) and a report folder holds none. The kit checks the rule itself, through
tarfile's `filter` argument where it has one (3.11.4 and newer), else through its `members`
(Debian 12's Python is 3.11.2).
"""

import copy
import io
import os
import tarfile
from pathlib import Path, PurePosixPath

PLAIN_MODE_BITS = 0o755  # no setuid, setgid or sticky bit; writable by the owner alone
# What `plain` raises: a filter's FilterError stops tarfile (an ExtractError it would skip quietly).
REFUSED = getattr(tarfile, "FilterError", tarfile.TarError)


def pack(path: Path) -> bytes:
    """`path` (a folder or a file) as a .tar.gz holding it under its own name."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        bundle.add(path, arcname=path.name)
    return buffer.getvalue()


def unpack(data: bytes, into: Path) -> None:
    """Extract the .tar.gz `data` into the folder `into`: its folders and plain files (`plain`);
    a member of any other kind, or one whose path leaves `into`, raises `tarfile.TarError`, and
    neither it nor any member after it is written."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as bundle:
        if hasattr(tarfile, "data_filter"):
            bundle.extractall(into, filter=lambda member, _: plain(member))
        else:
            bundle.extractall(into, members=[plain(member) for member in bundle.getmembers()])


def plain(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """`member`, a folder or a plain file at a relative path without `..`, as a copy owned by
    this process with `PLAIN_MODE_BITS` at most; anything else raises `REFUSED`."""
    if not (member.isfile() or member.isdir()):
        raise REFUSED(f"{member.name!r} is a link or a special file")
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts:
        raise REFUSED(f"{member.name!r} lands outside the folder it is unpacked in")
    kept = copy.copy(member)
    kept.mode &= PLAIN_MODE_BITS
    kept.uid, kept.gid, kept.uname, kept.gname = os.geteuid(), os.getegid(), "", ""
    return kept
