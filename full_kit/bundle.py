"""`python -m full_kit.bundle [--out PATH]`: the candidate kit, a .tar.gz with no answer in it.

The bundle holds the stubs and their statement, the grader, the kernel oracles and the kit's
tests that run without the answer key, with a Makefile and a README for candidates. Files are
chosen by rules, from the kit's files as git lists them (tracked, or new and not ignored):

- Areas: `exercises/`, `grader/`, `kernels/`, the top level of `tests/`, `pyproject.toml`,
  `Makefile`, `.gitignore`. Everything else stays out: `solutions/` (the answer key), the
  folders under `tests/` (fixtures made from the answer key), docs, CI; and by name the few
  files `LEFT_OUT_BY_NAME` gives a reason for.
- Answers: a file outside `exercises/` that defines a `@triton.jit` kernel is an answer to part
  4; a file that imports the answer key or a left-out module stays out (to a fixed point), unless
  the import is in a function's body and the grader imports the module (the engine:
  the integration check needs it, only its demo needs the answer key).
- Tests: a test module that needs the answer key when it is imported (a module-level import or
  path) stays out; a test function that needs it in its body is deselected in the bundle's
  pytest settings, so the rest of its module still runs. A test needs what it imports, and what
  a bundled function it calls imports when it runs (`grade.simulation()` imports the left-out
  `full_kit.simulate`). `DESELECTED_BY_NAME` deselects the few tests that check the stubs are
  still stubs: the bundle's `make test` must pass on a candidate's finished `exercises/` too
  (`tests/test_contract.py` checks the contract on whatever `exercises/` holds).
- The Makefile loses the targets that run a left-out module or a pytest marker no bundled test
  carries; `README.md` is `candidate_readme.md`.

Before writing, every function body of `solutions/*.py` that the stubs do not give, and every
large statement in one, is compared (as a syntax tree: formatting and comments aside) with every
function body and statement of the bundle's Python files, and as text with its other files. A
match refuses the bundle.
"""

import argparse
import ast
import io
import re
import subprocess
import sys
import tarfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader import KIT_ROOT

DEFAULT_OUT = Path("dist") / "paged-attention-candidate-kit.tar.gz"
TOP_FOLDER = "paged-attention-candidate-kit"  # what the archive unpacks into
ANSWER_KEY = "solutions"
README_TEMPLATE = "full_kit/candidate/README.md"
BUNDLED_AREAS = ("exercises/", "grader/", "kernels/", "tests/")
BUNDLED_FILES = (".gitignore", "Makefile", "pyproject.toml")
LEFT_OUT_BY_NAME = {
    "full_kit/bundle.py": "builds this bundle from the full kit (it reads the answer key)",
    README_TEMPLATE: "becomes the bundle's README.md",
    "full_kit/simulate.py": "models part 5's scheduler step for step: an answer in another form",
    "full_kit/torch_baseline.py": "a working decode in torch, timed only by make gpu-check",
}
DESELECTED_BY_NAME = {
    "tests/test_stubs.py::test_each_stub_raises_not_implemented": (
        "checks that exercises/ still holds the stubs, which a candidate fills in"
    ),
}
REQUIRED = ("grader/__main__.py", "grader/grade.py", "exercises/block_allocator.py")
MIN_ANSWER_NODES = 20  # smaller bodies (`return self._free`) say nothing an answer could lose
WALK_SKIPPED = {"__pycache__", "reports", "dist", "build"}  # and hidden folders


class BundleRefused(RuntimeError):
    """The bundle would give an answer away, or cannot be built here; the message says why."""


@dataclass
class Selection:
    """What goes into the bundle, what stays out and why, and the tests deselected there."""

    files: dict[str, bytes] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)
    deselected: dict[str, str] = field(default_factory=dict)  # pytest node id -> why
    lazy: dict[str, str] = field(default_factory=dict)  # bundled, but a function needs the key
    dropped_targets: dict[str, str] = field(default_factory=dict)


# -- the kit's files ------------------------------------------------------------------------


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
            if path.is_file() and path.suffix != ".pyc" and not skipped(path.relative_to(root))
        }
    return sorted(name for name in names if (root / name).is_file())  # deleted, not committed


def skipped(path: Path) -> bool:
    """Whether a walk of the tree skips `path`: caches, outputs, hidden folders, build metadata."""
    folders = path.parts[:-1]
    return any(f in WALK_SKIPPED or f.startswith(".") or f.endswith(".egg-info") for f in folders)


def module_of(path: str) -> str | None:
    """`grader/checks/x.py` -> `grader.checks.x`; `kernels/__init__.py` -> `kernels`."""
    if not path.endswith(".py"):
        return None
    parts = PurePosixPath(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def area_rule(path: str) -> str | None:
    """Why `path` stays out by where it lies; None when its area is bundled."""
    first = PurePosixPath(path).parts[0]
    if first == ANSWER_KEY:
        return "the answer key"
    if path in LEFT_OUT_BY_NAME:
        return LEFT_OUT_BY_NAME[path]
    if path == "README.md":
        return f"the kit's README: the bundle's is {README_TEMPLATE}"
    if path.startswith("tests/") and len(PurePosixPath(path).parts) > 2:
        return "test fixtures (submissions, reports or traces made from the answer key)"
    if path.startswith(BUNDLED_AREAS) or path in BUNDLED_FILES:
        return None
    return "not part of the candidate kit"


# -- what a Python file needs -----------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """Something left out that a file uses, where: in a test's body, or only when called."""

    what: str
    test: str | None  # the top-level test whose body it lies in
    lazy: bool  # in a function's body: the module imports without it


def imported(node: ast.AST, package: tuple[str, ...]) -> list[str]:
    """The modules an import statement or an `import_module("x.y")` call names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = package[: len(package) - node.level + 1] if node.level else ()
        module = ".".join([*base, *([node.module] if node.module else [])])
        return [module, *(f"{module}.{alias.name}" for alias in node.names)]
    if isinstance(node, ast.Call) and node.args:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        name = node.func.id if isinstance(node.func, ast.Name) else name
        first = node.args[0]
        if isinstance(first, ast.JoinedStr) and first.values:
            first = first.values[0]
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
            return [str(first.value).rstrip(".")]
    return []


def import_aliases(tree: ast.Module, package: tuple[str, ...]) -> dict[str, str]:
    """The names the module's imports bind -> the dotted names they stand for: `from grader
    import grade` binds `grade` to `grader.grade`, `import grader.grade` binds `grader`."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom):
            module = imported(node, package)[0]
            aliases |= {
                alias.asname or alias.name: f"{module}.{alias.name}" for alias in node.names
            }
    return aliases


def dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """The dotted name an expression like `grade.simulation` stands for, through `aliases`."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(attrs)])
    return None


def importing_functions(trees: dict[str, ast.Module], left_out_modules: set[str]) -> dict[str, str]:
    """`module.function -> what it imports` for each top-level function of a module outside
    tests/ whose body imports a left-out module: the module imports, but a call fails."""
    found = {}
    for name, tree in trees.items():
        if name.startswith("tests/"):
            continue
        for function in tree.body:
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            modules = [m for node in ast.walk(function) for m in imported(node, package_of(name))]
            hit = next((m for m in modules if left_out(m, left_out_modules)), None)
            if hit:
                found[f"{module_of(name)}.{function.name}"] = hit
    return found


def left_out(module: str, left_out_modules: set[str]) -> bool:
    """Whether `module` is, or lies in, one of `left_out_modules`."""
    return any(module == m or module.startswith(m + ".") for m in left_out_modules)


def path_constants(node: ast.AST) -> list[str]:
    """The strings a path expression starts from: `root / "solutions"`, `Path("tests/x")`."""
    operands = []
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        operands = [node.left, node.right]
    elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Path", "PurePath"):
        operands = node.args
    return [
        op.value for op in operands if isinstance(op, ast.Constant) and isinstance(op.value, str)
    ]


FUNCTIONS = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def test_names(tree: ast.Module) -> dict[int, str]:
    """`id(function) -> node id part` for the module's top-level tests and test methods."""
    names = {}
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and statement.name.startswith("test"):
            names[id(statement)] = statement.name
        elif isinstance(statement, ast.ClassDef) and statement.name.startswith("Test"):
            for method in statement.body:
                if isinstance(method, ast.FunctionDef) and method.name.startswith("test"):
                    names[id(method)] = f"{statement.name}::{method.name}"
    return names


def walk(node: ast.AST, tests: dict[int, str], test: str | None = None, lazy: bool = False):
    """Every node under `node` as (the test whose body holds it, whether in a function, node).

    A function's decorators and defaults run when the module is imported; only its body waits.
    """
    yield test, lazy, node
    body = node.body if isinstance(node, FUNCTIONS) else None
    for child in ast.iter_child_nodes(node):
        inside = child is body or (isinstance(body, list) and any(child is s for s in body))
        inner = tests.get(id(node), test) if inside else test
        yield from walk(child, tests, inner, lazy or inside)


def needs(
    path: str,
    tree: ast.Module,
    left_out_modules: set[str],
    left_out_dirs: set[str],
    importing: dict[str, str] | None = None,
):
    """What `path` uses that the bundle leaves out: imports, and in tests/ paths as well as
    calls of the `importing` functions (`importing_functions`)."""
    package = package_of(path)
    aliases = import_aliases(tree, package) if path.startswith("tests/") else {}
    found = []
    for test, lazy, node in walk(tree, test_names(tree)):
        name = dotted(node, aliases) if isinstance(node, ast.Attribute | ast.Name) else None
        if name in (importing or {}):
            found.append(Need(f"calls {name}, which imports {importing[name]}", test, lazy))
        for module in imported(node, package):
            if left_out(module, left_out_modules):
                found.append(Need(f"imports {module}", test, lazy))
        if path.startswith("tests/"):
            for text in path_constants(node):
                if PurePosixPath(text).parts[:1] and PurePosixPath(text).parts[0] in left_out_dirs:
                    found.append(Need(f"reads {text}/", test, lazy))
    return found


def defines_kernel(tree: ast.Module) -> bool:
    """Whether the module defines a function decorated with Triton's `jit`."""
    return any(
        "jit" in ast.unparse(decorator)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        for decorator in node.decorator_list
    ) and any("triton" in imported_name for node in ast.walk(tree) for imported_name in
              imported(node, ()))  # fmt: skip


def allowed(path: str, need: Need) -> bool:
    """Whether `path` stays in the bundle despite `need`.

    A test that needs it in its body is deselected; outside tests/, a function that imports it
    when called leaves the module importable (make targets that run it are dropped).
    """
    if path.startswith("tests/"):
        return bool(need.test) and is_test_module(path)
    return need.lazy


def package_of(path: str) -> tuple[str, ...]:
    return tuple(PurePosixPath(path).parent.parts)


def is_test_module(path: str) -> bool:
    return path.startswith("tests/test_") and path.endswith(".py")


# -- choosing the files -------------------------------------------------------------------------


def select(root: Path, names: list[str]) -> Selection:
    """Apply the module docstring's rules to the kit's files."""
    selection = Selection()
    kept: dict[str, bytes] = {}
    for name in names:
        why = area_rule(name)
        if why:
            selection.left_out[name] = why
        else:
            kept[name] = (root / name).read_bytes()
    trees = {
        name: ast.parse(data, filename=name)
        for name, data in kept.items()
        if name.endswith(".py") and not name.startswith("exercises/")
    }
    for name, tree in trees.items():
        if defines_kernel(tree):
            selection.left_out[name] = "defines a Triton kernel: a working kernel answers part 4"
    leave_out_dependents(selection, trees, set(kept))
    selection.files = {name: data for name, data in kept.items() if name not in selection.left_out}
    selection.deselected |= {
        node: why
        for node, why in DESELECTED_BY_NAME.items()
        if node.partition("::")[0] in selection.files
    }
    selection.files["Makefile"] = trim_makefile(selection).encode()
    selection.files["pyproject.toml"] = with_deselected(selection).encode()
    selection.files["README.md"] = (root / README_TEMPLATE).read_bytes()
    return selection


def leave_out_dependents(selection: Selection, trees: dict[str, ast.Module], kept: set[str]):
    """Leave out what needs a left-out file, up to a fixed point; note deselections and tools.

    A module that imports the answer key only when one of its functions runs stays when the
    grader (a bundled module outside tests/) imports it; otherwise it is a tool of the full kit.
    """
    imports = {
        name: {m for node in ast.walk(tree) for m in imported(node, package_of(name))}
        for name, tree in trees.items()
    }
    changed = True
    while changed:
        changed = False
        modules = {ANSWER_KEY} | {m for name in selection.left_out if (m := module_of(name))}
        folders = {part for name in selection.left_out for part in PurePosixPath(name).parts[:-1]}
        folders -= {part for name in kept for part in PurePosixPath(name).parts[:-1]}
        selection.deselected, selection.lazy = {}, {}
        live = {name: tree for name, tree in trees.items() if name not in selection.left_out}
        importing = importing_functions(live, modules)
        for name, tree in live.items():
            found = needs(name, tree, modules, folders, importing)
            fatal = [need for need in found if not allowed(name, need)]
            if fatal:
                selection.left_out[name] = f"{fatal[0].what}, which the bundle leaves out"
                changed = True
            for need in [] if fatal else found:
                if need.test:
                    selection.deselected[f"{name}::{need.test}"] = need.what
                else:
                    selection.lazy[name] = f"{need.what} when it runs"
        for name, why in selection.lazy.items():
            users = [
                user
                for user, names in imports.items()
                if module_of(name) in names and user != name and not user.startswith("tests/")
                and user not in selection.left_out
            ]  # fmt: skip
            if not users:
                selection.left_out[name] = f"a tool of the full kit: it {why}"
                changed = True
    selection.lazy = {n: why for n, why in selection.lazy.items() if n not in selection.left_out}


def trim_makefile(selection: Selection) -> str:
    """The Makefile without the targets that need what the bundle leaves out."""
    text = selection.files["Makefile"].decode()
    phony = re.search(r"^\.PHONY:(.*)$", text, re.MULTILINE)
    targets = phony.group(1).split() if phony else []
    blocks = re.split(r"(?m)^(?=\S)", text)  # a rule is its line and the tab-indented recipe
    kept = []
    for block in blocks:
        name = block.split(":", 1)[0]
        why = target_needs(block, selection) if name in targets else None
        if why:
            selection.dropped_targets[name] = why
        else:
            kept.append(block)
    trimmed = "".join(kept)
    if phony:
        names = " ".join(name for name in targets if name not in selection.dropped_targets)
        trimmed = trimmed.replace(phony.group(0), f".PHONY: {names}")
    header = (
        "# The candidate kit's Makefile: the full kit's, without the targets that need its answer\n"
        f"# key ({', '.join(selection.dropped_targets) or 'none'}).\n"
    )
    return header + trimmed


def target_needs(block: str, selection: Selection) -> str | None:
    """Why a make target cannot run in the bundle: a module or a pytest marker it lacks."""
    for module in re.findall(r"python -m ([\w.]+)", block):
        if module.split(".")[0] not in {"grader", "kernels", "exercises", "tests", ANSWER_KEY}:
            continue  # a library: pytest, pip
        candidates = [f"{module.replace('.', '/')}{end}" for end in (".py", "/__main__.py")]
        needy = next((selection.lazy[p] for p in candidates if p in selection.lazy), "")
        if needy:
            return f"runs {module}, which {needy}"
        if not any(path in selection.files for path in candidates):
            reason = next(
                (selection.left_out[p] for p in candidates if p in selection.left_out), ""
            )
            return f"runs {module}, " + (f"left out: {reason}" if reason else "not in the kit")
    for marker in re.findall(r"pytest .*?-m (\w+)", block):
        tests = [data for name, data in selection.files.items() if is_test_module(name)]
        if not any(f"mark.{marker}".encode() in data for data in tests):
            return f"runs the tests marked {marker}, and no bundled test is"
    return None


def with_deselected(selection: Selection) -> str:
    """pyproject.toml with the deselected tests added to pytest's `addopts`."""
    text = selection.files["pyproject.toml"].decode()
    if not selection.deselected:
        return text
    line = re.search(r'^addopts = "(.*)"$', text, re.MULTILINE)
    if not line:
        raise BundleRefused(
            'pyproject.toml has no `addopts = "..."` line under [tool.pytest.ini_options] to '
            "deselect the tests that need the answer key: add one (it may be empty)"
        )
    options = " ".join(f"--deselect={node}" for node in selection.deselected)
    new = text.replace(line.group(0), f'addopts = "{line.group(1)} {options}"')
    tomllib.loads(new)  # still valid
    return new


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
            source = root / name
            member = tarfile.TarInfo(f"{TOP_FOLDER}/{name}")
            member.size = len(data)
            member.mtime = int(source.stat().st_mtime) if source.is_file() else now
            member.mode = 0o755 if source.is_file() and source.stat().st_mode & 0o100 else 0o644
            archive.addfile(member, io.BytesIO(data))
    partial.replace(out)


def summarize(selection: Selection) -> list[str]:
    """Lines saying what stayed out and why, a left-out folder on one line."""
    by_folder: dict[tuple[str, str], list[str]] = {}
    for name, why in selection.left_out.items():
        parts = PurePosixPath(name).parts
        depth = 2 if parts[0] == "tests" else 1
        folder = "/".join(parts[:depth]) + "/" if len(parts) > depth else name
        by_folder.setdefault((folder, why), []).append(name)
    lines = [
        f"  left out {folder} ({len(names)} files): {why}" if len(names) > 1 else
        f"  left out {names[0]}: {why}"
        for (folder, why), names in sorted(by_folder.items())
    ]  # fmt: skip
    lines += [f"  deselected {node}: {why}" for node, why in sorted(selection.deselected.items())]
    lines += [f"  kept {name}, which {why}" for name, why in sorted(selection.lazy.items())]
    lines += [
        f"  make {name} dropped: {why}" for name, why in sorted(selection.dropped_targets.items())
    ]
    return lines


def build(out: Path, root: Path = KIT_ROOT) -> Selection:
    """Choose the files, prove no answer is among them, write the archive; print each step."""
    print(f"Listing the kit's files in {root}...")
    names = kit_files(root)
    print(f"Choosing among {len(names)} files...")
    selection = select(root, names)
    print("\n".join(summarize(selection)))
    lost = [f"{name} ({selection.left_out.get(name, 'not found')})" for name in REQUIRED
            if name not in selection.files]  # fmt: skip
    if lost:
        raise BundleRefused(f"the bundle could not grade without {', '.join(lost)}")
    print(
        f"Checking that none of the {len(selection.files)} bundled files copies the answer key..."
    )
    copies = copies_of_answers(root, selection.files)
    if copies:
        raise BundleRefused(
            "refusing to write the bundle, it would give answers away:\n  "
            + "\n  ".join(copies)
            + "\nleave those files out (see the rules in full_kit/bundle.py) or remove the copies"
        )
    write_archive(root, selection.files, out)
    size = out.stat().st_size
    print(f"Wrote {out} ({len(selection.files)} files, {size / 1024:.0f} KiB)")
    return selection


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
