"""`make candidate-kit`: the bundle holds no answer, and speaks to candidates.

The bundle is built by its command into a temp folder and unpacked there. Its commands run as a
candidate runs them, on the stubs and on a finished submission, in `test_shipped_kits.py`.
"""

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from full_kit.bundle import (
    CANDIDATE_FILES,
    FULL_KIT_FOLDERS,
    BundleRefused,
    build,
    bundle_files,
    copies_of_answers,
    kit_files,
)
from grader import KIT_ROOT
from tests.full_kit.test_shipped_kits import unpack

SOLUTIONS = KIT_ROOT / "solutions"


def bodies(source: str) -> set[str]:
    """Each function body of `source` of three statements or more, as normalized code."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) else node.body
            if len(body) >= 3:
                found.add(ast.unparse(ast.Module(body=body, type_ignores=[])))
    return found


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """The candidate bundle, built by its command."""
    archive = tmp_path_factory.mktemp("bundle") / "candidate.tar.gz"
    command = [sys.executable, "-m", "full_kit.bundle", "--out", str(archive)]
    built = subprocess.run(command, cwd=KIT_ROOT, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"Wrote {archive}" in built.stdout
    return archive


@pytest.fixture(scope="module")
def kit(archive: Path, tmp_path_factory) -> Path:
    """The candidate bundle, unpacked, with the stubs in `exercises/`."""
    return unpack(archive, tmp_path_factory.mktemp("unpacked"))


def test_no_answer_key_is_in_the_bundle(kit: Path) -> None:
    files = {name: kit / name for name in kit_files(kit)}  # a walk: no .venv, no reports
    assert "exercises/block_allocator.py" in files
    assert "grader/grade.py" in files
    assert "kernels/reference.py" in files
    assert not [name for name in files if name.startswith(tuple(FULL_KIT_FOLDERS))]
    sources = {name: path.read_text() for name, path in files.items() if name.endswith(".py")}
    answers = set().union(*(bodies(path.read_text()) for path in SOLUTIONS.glob("*.py")))
    given = set().union(*(bodies(sources[name]) for name in sources if name.startswith("exer")))
    copied = {name for name, text in sources.items() if bodies(text) & (answers - given)}
    assert not copied, copied


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
    for name in ("pyproject.toml", "exercises", "grader", "solutions", "full_kit/candidate"):
        if (KIT_ROOT / name).is_dir():
            shutil.copytree(KIT_ROOT / name, root / name, ignore=shutil.ignore_patterns("__py*"))
        else:
            shutil.copyfile(KIT_ROOT / name, root / name)
    shutil.copyfile(SOLUTIONS / "block_allocator.py", root / "grader" / "pool.py")
    out = tmp_path / "bundle.tar.gz"
    with pytest.raises(BundleRefused, match=r"grader/pool.py:allocate is a copy of solutions/"):
        build(out, root)
    assert not out.exists()


def test_the_folder_rule(tmp_path: Path) -> None:
    """Shipped folders in, the full kit's folders out whatever they hold, the templates as the
    bundle's Makefile and README."""
    names = [
        "exercises/scheduler.py",
        "grader/grade.py",
        "kernels/reference.py",
        "tests/conftest.py",
        "tests/grader/test_grade.py",
        "tests/kernels/test_reference.py",
        "pyproject.toml",
        ".gitignore",
        "Makefile",
        "README.md",
        "docs/notes.md",
        "solutions/scheduler.py",
        "full_kit/simulate.py",
        "tests/solutions/test_scheduler.py",
        "tests/full_kit/test_bundle.py",
        "tests/end_to_end/test_cli.py",
        "tests/submissions/kernels/torch_only.py",
        "tests/stubs/test_not_implemented.py",
        *CANDIDATE_FILES.values(),
    ]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(name)
    files = bundle_files(tmp_path, names)
    assert sorted(files) == [
        ".gitignore",
        "Makefile",
        "README.md",
        "exercises/scheduler.py",
        "grader/grade.py",
        "kernels/reference.py",
        "pyproject.toml",
        "tests/conftest.py",
        "tests/grader/test_grade.py",
        "tests/kernels/test_reference.py",
    ]
    assert files["Makefile"] == CANDIDATE_FILES["Makefile"].encode()
    assert files["README.md"] == CANDIDATE_FILES["README.md"].encode()


def test_the_bundle_speaks_to_candidates(kit: Path) -> None:
    readme = (kit / "README.md").read_text()
    assert "runs only in the full kit" in readme
    assert "step-by-step trace" in readme
    makefile = (kit / "Makefile").read_text()
    assert makefile == (KIT_ROOT / CANDIDATE_FILES["Makefile"]).read_text()
    targets = set(re.findall(r"(?m)^([a-z-]+):", makefile))
    assert targets == {"help", "grade", "grade-all", "test", "lint"}
    assert "solutions" not in makefile
    assert "full_kit" not in makefile
    command = ["make", "--no-print-directory", "help"]
    listed = subprocess.run(command, cwd=kit, capture_output=True, text=True, check=False)
    assert listed.returncode == 0, listed.stderr
    assert "make grade" in listed.stdout
