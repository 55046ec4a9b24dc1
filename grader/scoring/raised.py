"""Where a failure was raised in the candidate's code: the deepest frame of its worker's traceback
that lies in one of the submission's files.

The traceback is the worker's text (`RemoteError.traceback`), so where it points is a claim: it
decides nothing of the grade, and the report takes only a file name and a line number from it.
The grading process keeps them only where the file is one of the submission's, ran as the
candidate wrote it, and holds that line (`code_marks`); it reads the line, and the function it
lies in, from the file it holds. A forged traceback can point at another line of the candidate's
own files, never show text they do not hold.
"""

import ast
import re
from collections.abc import Collection

from grader.sandbox.proxy import RemoteError
from grader.text import clean

# A frame line of a Python traceback: `  File "/sandbox/package/submission/x.py", line 3, in f`.
FRAME = re.compile(r'^  File "(?P<path>[^"\n]+)", line (?P<line>\d{1,7}), in \S')
# Where a worker's package holds the submission's files (`Sandbox.write_package`), as a worker
# started afresh and one forked from a zygote both see it.
PACKAGE_FOLDER = "/package/submission/"
# Between the sections of a chained exception's traceback: the last is the exception raised.
CHAINED = re.compile(
    r"^(During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)$",
    re.MULTILINE,
)
CUT = re.compile(r"\.\.\. \[\d+ more characters cut\]$")  # `text.clean`'s note on a cut text
CHAIN_DEPTH = 8  # exceptions followed back through `__context__` to the candidate's
VIEW_LINES = 2000  # a file longer than this is shown around its marked lines only
CONTEXT = 20  # lines shown on each side of a marked line of such a file
LINE_CHARS = 300  # of each line shown
CODE_CHARS = 200  # of the line a check names
LINE_END = re.compile(r"\r\n|\r|\n")  # what ends a line for Python's line numbers


def remote_error_of(error: BaseException) -> RemoteError | None:
    """The candidate's exception behind `error`: itself, or the one a check was handling when it
    raised its own failure (`expect.succeeds`: "... must succeed, but raised IndexError"); not
    one the answer key's worker raised."""
    for _ in range(CHAIN_DEPTH):
        if isinstance(error, RemoteError):
            return error if error.candidates else None
        if error.__context__ is None:
            return None
        error = error.__context__
    return None


def raised_at(error: BaseException, files: Collection[str]) -> dict:
    """`{"file", "line"}` of the deepest frame in one of `files` (names in the submission) of
    the candidate's exception behind `error`, in its traceback's last section (the exception
    raised, not one it was handling); `{}` where there is none, or the traceback was cut."""
    remote = remote_error_of(error)
    if remote is None or CUT.search(remote.traceback.rstrip()):
        return {}
    raised = CHAINED.split(remote.traceback)[-1]
    for text in reversed(raised.splitlines()):
        frame = FRAME.match(text)
        if frame and PACKAGE_FOLDER in frame["path"]:
            name = frame["path"].rsplit(PACKAGE_FOLDER, 1)[1]
            if name in files:
                return {"file": name, "line": int(frame["line"])}
    return {}


def code_marks(checks: list[dict], files: dict[str, bytes], ran: dict[str, bytes]) -> list[dict]:
    """The candidate's files that failed `checks` (report rows) raised in, each with what a view
    of it shows and the checks that raised at each marked line: `[{"file", "excerpts": [[first
    line's number, text], ...], "marks": [[line, [check ids]], ...]}]`, in file and line order.
    A file is one excerpt, whole, up to `VIEW_LINES` lines; a longer one, the lines within
    `CONTEXT` of a mark. A check's `raised_at` stays only where the check failed (one skipped,
    left to another part, shows nothing), its file is one of `files` that ran as written (`ran`,
    the submission's files as the workers get them, `grade.runnable`, holds the same bytes) and
    holds its line; it then gets the line's `code` and the `function` it lies in, read from
    `files`."""
    named = {(check.get("raised_at") or {}).get("file") for check in checks}
    as_written = [name for name in named if name in files and ran.get(name) == files[name]]
    texts = {name: lines_of(files[name]) for name in as_written}  # each file read once
    scopes = {name: scopes_of(files[name]) for name in as_written}
    marks: dict[str, dict[int, list[str]]] = {}
    for check in checks:
        where = check.get("raised_at") or {}
        name, line = where.get("file"), where.get("line", 0)
        failed = check.get("status") in ("failed", "error")
        if not (failed and name in texts and 0 < line <= len(texts[name])):
            check["raised_at"] = {}
            continue
        code = shortened(texts[name][line - 1].strip(), CODE_CHARS)
        function = function_at(scopes[name], line)
        check["raised_at"] = {"file": name, "line": line, "function": function, "code": code}
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
    """`source`'s lines as Python numbers them (a form feed ends none), as text, control
    characters shown as the report shows the candidate's."""
    text = source.decode("utf-8", "replace")
    lines = LINE_END.split(text)
    if lines and not lines[-1]:
        lines.pop()  # after the last line's end
    return [clean(line, None).rstrip() for line in lines]


def scopes_of(source: bytes) -> list[tuple[int, int, str]]:
    """Each function's and class's body in `source`: `(first line, last line, name)` (a `def`
    line and its decorators run in the scope around it); none where the file does not parse
    here."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    return [
        (node.body[0].lineno, node.end_lineno or node.lineno, node.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]


def function_at(scopes: list[tuple[int, int, str]], line: int) -> str:
    """The innermost of `scopes` (`scopes_of`) whose body holds `line`, as a traceback names
    it; `<module>` outside any. A lambda or a comprehension is named by the function it lies
    in."""
    around = [scope for scope in scopes if scope[0] <= line <= scope[1]]
    return max(around)[2] if around else "<module>"


def excerpts(lines: list[str], marked: Collection[int]) -> list[list]:
    """`[first line's number, text]` of each run of `lines` a file view shows: all of them up to
    `VIEW_LINES`, else those within `CONTEXT` of a `marked` one; each line cut to
    `LINE_CHARS`."""
    if len(lines) <= VIEW_LINES:
        shown = list(range(1, len(lines) + 1))
    else:
        shown = sorted({n for mark in marked for n in range(mark - CONTEXT, mark + CONTEXT + 1)
                        if 0 < n <= len(lines)})  # fmt: skip
    runs: list[list[int]] = []
    for number in shown:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return [[run[0], "\n".join(shortened(lines[n - 1], LINE_CHARS) for n in run)] for run in runs]


def shortened(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and "…" where it is longer."""
    return text if len(text) <= limit else f"{text[:limit]}…"
