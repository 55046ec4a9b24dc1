"""`python -m full_kit.bundle [--out PATH]`: the candidate kit, a .tar.gz with no answer in it.

The bundle is a folder rule and two templates. From the kit's files as git lists them (tracked,
or new and not ignored; a walk of the tree where there is no git):

- in: what lies under `SHIPPED_FOLDERS` (the stubs and their statement, the grader, the kernel
  oracles, the tests), and the `SHIPPED_FILES`;
- out: what lies under `FULL_KIT_FOLDERS`, the folders only the full kit has: the answer key,
  `full_kit/` (the tools that run on it), and the test folders that need one or the other;
- the templates: `CANDIDATE_FILES` become the bundle's `Makefile` and `README.md`.

So a test in a shipped folder must run without `solutions/` and `full_kit/`, and on a finished
submission as well as on the stubs: the bundle's `make test` runs them
(`tests/full_kit/test_shipped_kits.py` runs each on the stubs, and the contract's, under
`tests/exercises/`, on a finished submission too; the others read `exercises/` only as a folder
to grade or to name, or as the stubs' code, where a finished submission only widens what they
allow).

Before writing, every function body of `solutions/*.py` that the stubs do not give, and every
large statement in one, is compared (as a syntax tree: formatting and comments aside) with every
function body and statement of the bundle's Python files, and as text with its other files. A
match refuses the bundle.
"""

import argparse
import ast
import io
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from grader import KIT_ROOT

DEFAULT_OUT = Path("dist") / "paged-attention-candidate-kit.tar.gz"
TOP_FOLDER = "paged-attention-candidate-kit"  # what the archive unpacks into
ANSWER_KEY = "solutions"
SHIPPED_FOLDERS = ("exercises/", "grader/", "kernels/", "tests/")
SHIPPED_FILES = (".gitignore", "pyproject.toml", "babel.cfg")
FULL_KIT_FOLDERS = {
    f"{ANSWER_KEY}/": "the answer key",
    "full_kit/": "the full kit's tools, which run on the answer key",
    "tests/solutions/": "tests of the answer key",
    "tests/full_kit/": "tests of the full kit's tools",
    "tests/end_to_end/": "gradings run as the command, most of them of the answer key",
    "tests/submissions/": "fixture submissions, made from the answer key",
    "tests/stubs/": "tests that the stubs are still stubs, which a candidate fills in",
}
CANDIDATE_FILES = {
    "Makefile": "full_kit/candidate/Makefile",
    "README.md": "full_kit/candidate/README.md",
}
MIN_ANSWER_NODES = 20  # smaller bodies (`return self._free`) say nothing an answer could lose
BUILT = (".pyc", ".mo")  # bytecode, and the catalogs each kit's set-up compiles
WALK_SKIPPED = {"__pycache__", "reports", "dist", "build"}  # and hidden folders


class BundleRefused(RuntimeError):
    """The bundle would give an answer away, or cannot be built here; the message says why."""


# -- the files ----------------------------------------------------------------------------------


def kit_files(root: Path) -> list[str]:
    """The kit's files: what git tracks or would add; a walk of the tree without git."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, check=True,
        ).stdout.decode()  # fmt: skip
        names = {name for name in listed.split("\0") if name}
    except (OSError, subprocess.CalledProcessError):
        names = {
            path.relative_to(root).as_posix()
            for path in root.rglob("*")
            if path.is_file() and path.suffix not in BUILT and not skipped(path.relative_to(root))
        }
    return sorted(name for name in names if (root / name).is_file())  # deleted, not committed


def skipped(path: Path) -> bool:
    """Whether a walk of the tree skips `path`: caches, outputs, hidden folders, build metadata."""
    folders = path.parts[:-1]
    return any(f in WALK_SKIPPED or f.startswith(".") or f.endswith(".egg-info") for f in folders)


def shipped(name: str) -> bool:
    """Whether the file `name` (a path relative to the kit's root) goes into the bundle as is."""
    in_shipped = name.startswith(SHIPPED_FOLDERS) or name in SHIPPED_FILES
    return in_shipped and not name.startswith(tuple(FULL_KIT_FOLDERS))


def bundle_files(root: Path, names: list[str]) -> dict[str, bytes]:
    """`bundled path -> content`: the shipped files among `names`, and the candidate templates."""
    files = {name: (root / name).read_bytes() for name in names if shipped(name)}
    for name, template in CANDIDATE_FILES.items():
        files[name] = (root / template).read_bytes()
    return files


def left_out(names: list[str]) -> dict[str, int]:
    """`full-kit folder -> how many of `names` it holds`, for the folders that hold any."""
    counts = {folder: sum(name.startswith(folder) for name in names) for folder in FULL_KIT_FOLDERS}
    return {folder: count for folder, count in counts.items() if count}


# -- nothing copied from the answer key ---------------------------------------------------------


def body_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """A function's statements without its docstring (the stubs share the docstrings)."""
    body = function.body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        return body[1:]
    return body


def fingerprints(tree: ast.AST) -> dict[str, str]:
    """Syntax-tree dumps of each function body and each large statement -> the function's name.

    A dump ignores formatting, comments and line numbers: a copy reformatted is still a copy.
    """
    found = {}
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = body_of(function)
        pieces = [body, *([statement] for node in body for statement in ast.walk(node)
                          if isinstance(statement, ast.stmt))]  # fmt: skip
        for piece in pieces:
            if sum(1 for node in piece for _ in ast.walk(node)) >= MIN_ANSWER_NODES:
                found.setdefault("\n".join(ast.dump(node) for node in piece), function.name)
    return found


def answer_fingerprints(root: Path) -> dict[str, str]:
    """The answer key's bodies and statements that the stubs do not give -> `file:function`."""
    key = root / ANSWER_KEY
    if not key.is_dir():
        raise BundleRefused(
            f"no {ANSWER_KEY}/ in {root}: the candidate kit is built from the full kit, whose "
            "answer key the check against copies needs; run this in a clone of the full kit"
        )
    given = set()
    for stub in sorted((root / "exercises").glob("*.py")):
        given |= set(fingerprints(ast.parse(stub.read_bytes())))
    answers = {}
    for path in sorted(key.glob("*.py")):
        for dump, function in fingerprints(ast.parse(path.read_bytes())).items():
            if dump not in given:
                answers[dump] = f"{ANSWER_KEY}/{path.name}:{function}"
    return answers


def answer_texts(root: Path) -> dict[str, str]:
    """The answer key's bodies of three lines or more, whitespace collapsed -> `file:function`."""
    texts = {}
    for path in sorted((root / ANSWER_KEY).glob("*.py")):
        source = path.read_text()
        for function in ast.walk(ast.parse(source)):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                body = body_of(function)
                if body and body[-1].end_lineno - body[0].lineno >= 2:
                    lines = source.splitlines()[body[0].lineno - 1 : body[-1].end_lineno]
                    texts[" ".join(" ".join(lines).split())] = f"{path.name}:{function.name}"
    return texts


def copies_of_answers(root: Path, files: dict[str, bytes]) -> list[str]:
    """`bundled file: answer` for each piece of the answer key found in `files`."""
    answers, texts = answer_fingerprints(root), answer_texts(root)
    found = []
    for name, data in sorted(files.items()):
        if name.endswith(".py"):
            for dump, function in fingerprints(ast.parse(data, filename=name)).items():
                if dump in answers:
                    found.append(f"{name}:{function} is a copy of {answers[dump]}")
        else:
            flat = " ".join(data.decode(errors="replace").split())
            found += [f"{name} holds {where}" for text, where in texts.items() if text in flat]
    return found


# -- the archive --------------------------------------------------------------------------------


def write_archive(root: Path, files: dict[str, bytes], out: Path) -> None:
    """`out`, a .tar.gz of `files` under one top folder, written whole or not at all."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    now = int(time.time())
    with tarfile.open(partial, "w:gz") as archive:
        for name, data in sorted(files.items()):
            source = root / CANDIDATE_FILES.get(name, name)
            member = tarfile.TarInfo(f"{TOP_FOLDER}/{name}")
            member.size = len(data)
            member.mtime = int(source.stat().st_mtime) if source.is_file() else now
            member.mode = 0o755 if source.is_file() and source.stat().st_mode & 0o100 else 0o644
            archive.addfile(member, io.BytesIO(data))
    partial.replace(out)


def build(out: Path, root: Path = KIT_ROOT) -> dict[str, bytes]:
    """Choose the files, prove no answer is among them, write the archive; print each step.
    Returns the bundled files (`bundled path -> content`)."""
    print(f"Listing the kit's files in {root}...")
    names = kit_files(root)
    files = bundle_files(root, names)
    for folder, count in left_out(names).items():
        print(f"  left out {folder} ({count} files): {FULL_KIT_FOLDERS[folder]}")
    for name, template in CANDIDATE_FILES.items():
        print(f"  {name} is {template}")
    print(f"Checking that none of the {len(files)} bundled files copies the answer key...")
    copies = copies_of_answers(root, files)
    if copies:
        raise BundleRefused(
            "refusing to write the bundle, it would give answers away:\n  "
            + "\n  ".join(copies)
            + "\nmove those files to a folder only the full kit has (full_kit/bundle.py's "
            "FULL_KIT_FOLDERS) or remove the copies"
        )
    write_archive(root, files, out)
    print(f"Wrote {out} ({len(files)} files, {out.stat().st_size / 1024:.0f} KiB)")
    return files


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(
        prog="python -m full_kit.bundle",
        description="Build the candidate kit: stubs, statement, grader and tests, no answers.",
    )
    cli.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default {DEFAULT_OUT}")
    args = cli.parse_args(argv)
    try:
        build(args.out)
    except (BundleRefused, OSError, SyntaxError) as error:
        print(f"full_kit.bundle: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
