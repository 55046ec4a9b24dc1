"""`make candidate-kit`: the bundle holds no answer, and inside it `make grade` and `make test` run.

The bundle is built by its command into a temp folder and unpacked there. Its `.venv` is a link
to the environment running these tests (no reinstall), and `make -o .venv/.installed` keeps
make from setting one up; run from the bundle's root, `python -m grader` imports the bundle's
own grader, not the kit's editable install (the tests check which).
"""

import ast
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from grader.bundle import TOP_FOLDER, BundleRefused, build, copies_of_answers

KIT_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = KIT_ROOT / "solutions"
TIMEOUT = 300
MAKE = ["make", "--no-print-directory", "-o", ".venv/.installed"]


def bodies(source: str) -> set[str]:
    """Each function body of `source` of three statements or more, as normalized code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            if len(body) >= 3:
                found.add(ast.unparse(ast.Module(body=body, type_ignores=[])))
    return found


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`command` in `cwd`, without the variables this pytest and an outer make set."""
    outer = ("PYTEST_", "MAKE", "MFLAGS", "PYTHONPATH")
    env = {key: value for key, value in os.environ.items() if not key.startswith(outer)}
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    """The candidate bundle, built and unpacked, with a link to this environment as `.venv`."""
    root: Path = tmp_path_factory.mktemp("bundle")
    archive = root / "candidate.tar.gz"
    built = run([sys.executable, "-m", "grader.bundle", "--out", str(archive)], KIT_ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"Wrote {archive}" in built.stdout
    with tarfile.open(archive) as bundle:
        bundle.extractall(root, filter="data")
    kit = root / TOP_FOLDER
    (kit / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return kit


def test_no_answer_key_is_in_the_bundle(kit: Path) -> None:
    files = {path.relative_to(kit).as_posix(): path for path in kit.rglob("*") if path.is_file()}
    assert "exercises/block_allocator.py" in files
    assert "grader/grade.py" in files
    assert "kernels/reference.py" in files
    assert not [name for name in files if name.startswith(("solutions/", "tests/submissions/"))]
    assert not [name for name in files if name.endswith("paged_attention_split.py")]
    sources = {name: path.read_text() for name, path in files.items() if name.endswith(".py")}
    answers = set().union(*(bodies(path.read_text()) for path in SOLUTIONS.glob("*.py")))
    given = set().union(*(bodies(sources[name]) for name in sources if name.startswith("exer")))
    copied = {name for name, text in sources.items() if bodies(text) & (answers - given)}
    assert not copied, copied


def test_every_bundled_module_imports_without_the_answer_key(kit: Path) -> None:
    """A function may import it when it runs (the full kit's demo); no module when imported."""
    modules = sorted(
        ".".join(path.relative_to(kit).with_suffix("").parts).removesuffix(".__init__")
        for folder in ("grader", "kernels")
        for path in (kit / folder).rglob("*.py")
        if path.name != "__main__.py"
    )
    script = f"import importlib\nfor name in {modules!r}:\n    importlib.import_module(name)\n"
    imported = run([".venv/bin/python", "-c", script], kit)
    assert imported.returncode == 0, imported.stderr[-3000:]


def test_a_copied_answer_is_caught_renamed_or_reformatted() -> None:
    source = (SOLUTIONS / "block_allocator.py").read_text()
    renamed = source.replace("def free(", "def release(").replace("    ", "  ")
    found = copies_of_answers(KIT_ROOT, {"grader/helpers.py": renamed.encode()})
    assert any("is a copy of solutions/block_allocator.py:free" in line for line in found), found
    stubs = {f"exercises/{p.name}": p.read_bytes() for p in (KIT_ROOT / "exercises").glob("*.py")}
    assert copies_of_answers(KIT_ROOT, stubs) == []


def test_a_kit_with_a_copied_answer_gets_no_bundle(tmp_path: Path) -> None:
    """A kit outside git (its files found by a walk) with the allocator pasted into grader/."""
    root = tmp_path / "kit"
    root.mkdir()
    for name in ("Makefile", "pyproject.toml", "exercises", "grader", "solutions"):
        if (KIT_ROOT / name).is_dir():
            shutil.copytree(KIT_ROOT / name, root / name, ignore=shutil.ignore_patterns("__py*"))
        else:
            shutil.copyfile(KIT_ROOT / name, root / name)
    shutil.copyfile(SOLUTIONS / "block_allocator.py", root / "grader" / "pool.py")
    out = tmp_path / "bundle.tar.gz"
    with pytest.raises(BundleRefused, match=r"grader/pool.py:allocate is a copy of solutions/"):
        build(out, root)
    assert not out.exists()


def test_the_bundle_speaks_to_candidates(kit: Path) -> None:
    readme = (kit / "README.md").read_text()
    assert "runs only in the full kit" in readme
    assert "step-by-step trace" in readme
    makefile = (kit / "Makefile").read_text()
    assert "\ngrade:" in makefile
    assert "\ncandidate-kit:" not in makefile
    assert "solutions" not in makefile


def test_make_grade_runs_on_the_stubs_with_the_bundles_grader(kit: Path) -> None:
    which = run([".venv/bin/python", "-c", "import grader; print(grader.__file__)"], kit)
    assert Path(which.stdout.strip()).is_relative_to(kit), which.stdout
    graded = run([*MAKE, "grade", "ARGS=--parts allocator"], kit)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    report = json.loads((kit / "reports" / "exercises" / "report.json").read_text())
    checks = report["parts"]["allocator"]["checks"]
    statuses = {check["status"] for check in checks}
    assert statuses == {"failed", "skipped"}, checks
    for check in checks:
        expected = (
            "runs only in the full kit" if check["status"] == "skipped" else "not implemented"
        )
        assert check["message"].startswith(expected), check
        assert check["points"] == 0
    page = (kit / "reports" / "exercises" / "report.html").read_text()
    assert "runs only in the full kit" in page


def test_the_bundled_tests_pass_in_the_bundle(kit: Path) -> None:
    tested = run([*MAKE, "test"], kit)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout
