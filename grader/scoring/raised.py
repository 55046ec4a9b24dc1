"""Where a failure was raised in the candidate's code: the deepest frame of its worker's traceback
that lies in one of the submission's files.

The traceback is the worker's text (`RemoteError.traceback`), so what it names is a claim: it
decides nothing of the grade. The grading process keeps a frame only where its file is one of the
submission's and its line exists there, and reads the line itself from the file it holds
(`grade.code_marks`): a forged traceback can point at another line of the candidate's own files,
never show text they do not hold.
"""

import re
from collections.abc import Collection

from grader.sandbox.proxy import RemoteError
from grader.text import clean

# A frame line of a Python traceback: `  File "/sandbox/package/submission/x.py", line 3, in f`.
FRAME = re.compile(
    r'^  File "(?P<path>[^"\n]+)", line (?P<line>\d{1,7}), in (?P<function>\S{1,100})$'
)
# Where a worker's package holds the submission's files (`Sandbox.write_package`), as a worker
# started afresh and one forked from a zygote both see it.
PACKAGE_FOLDER = "/package/submission/"
CHAIN_DEPTH = 8  # exceptions followed back through `__context__` to the candidate's
VIEW_LINES = 2000  # a file longer than this is shown around its marked lines only
CONTEXT = 20  # lines shown on each side of a marked line of such a file
LINE_CHARS = 300  # of each line shown
CODE_CHARS = 200  # of the line a check names


def remote_error_of(error: BaseException) -> RemoteError | None:
    """The candidate's exception behind `error`: itself, or the one a check was handling when it
    raised its own failure (`expect.succeeds`: "... must succeed, but raised IndexError")."""
    for _ in range(CHAIN_DEPTH):
        if isinstance(error, RemoteError):
            return error
        if error.__context__ is None:
            return None
        error = error.__context__
    return None


def raised_at(error: BaseException, files: Collection[str]) -> dict:
    """`{"file", "line", "function"}` of the deepest frame in one of `files` (names in the
    submission) of the candidate's exception behind `error`; `{}` where there is none."""
    remote = remote_error_of(error)
    if remote is None:
        return {}
    for text in reversed(remote.traceback.splitlines()):
        frame = FRAME.match(text)
        if frame is None:
            continue
        path = frame["path"]
        if PACKAGE_FOLDER in path:
            name = path.rsplit(PACKAGE_FOLDER, 1)[1]
            if name in files:
                return {"file": name, "line": int(frame["line"]), "function": frame["function"]}
    return {}


def code_marks(checks: list[dict], files: dict[str, bytes], ran: dict[str, bytes]) -> list[dict]:
    """The candidate's files that failed `checks` (report rows) raised in, each with what a view
    of it shows and the checks that raised at each marked line: `[{"file", "excerpts": [[first
    line's number, text], ...], "marks": [[line, [check ids]], ...]}]`, in file and line order.
    A file is one excerpt, whole, up to `VIEW_LINES` lines; a longer one, the lines within
    `CONTEXT` of a mark. A check's `raised_at` stays only where the check failed (one skipped,
    left to another part, shows nothing), its file ran as the candidate wrote it (`ran`, the
    workers' files, holds the same bytes as `files`) and its line exists there; it then gets
    that line's `code`, read from `files`."""
    marks: dict[str, dict[int, list[str]]] = {}
    texts = {name: lines_of(source) for name, source in files.items()}
    for check in checks:
        where = check.get("raised_at") or {}
        name, line = where.get("file"), where.get("line", 0)
        as_written = name in files and ran.get(name) == files[name]
        failed = check.get("status") in ("failed", "error")  # not one left to another part
        if not (failed and as_written and 0 < line <= len(texts[name])):
            check["raised_at"] = {}
            continue
        check["raised_at"] = where | {"code": texts[name][line - 1].strip()[:CODE_CHARS]}
        marks.setdefault(name, {}).setdefault(line, []).append(check["id"])
    return [
        {
            "file": name,
            "excerpts": excerpts(texts[name], marks[name]),
            "marks": [[line, ids] for line, ids in sorted(marks[name].items())],
        }
        for name in sorted(marks)
    ]


def lines_of(source: bytes) -> list[str]:
    """`source`'s lines as text, each cut to `LINE_CHARS`, control characters shown as the report
    shows the candidate's."""
    text = source.decode("utf-8", "replace")
    return [clean(line, None).rstrip()[:LINE_CHARS] for line in text.splitlines()]


def excerpts(lines: list[str], marked: Collection[int]) -> list[list]:
    """`[first line's number, text]` of each run of `lines` a file view shows: all of them up to
    `VIEW_LINES`, else those within `CONTEXT` of a `marked` one."""
    if len(lines) <= VIEW_LINES:
        return [[1, "\n".join(lines)]] if lines else []
    shown = sorted({n for mark in marked for n in range(mark - CONTEXT, mark + CONTEXT + 1)
                    if 0 < n <= len(lines)})  # fmt: skip
    runs: list[list[int]] = []
    for number in shown:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return [[run[0], "\n".join(lines[n - 1] for n in run)] for run in runs]
