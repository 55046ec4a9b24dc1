"""`make candidate-kit`: the bundle holds no answer, and inside it `make grade` and `make test` run,
`make test` both on the stubs and on a finished submission (the answer key copied in).

The bundle is built by its command into a temp folder and unpacked there. Its `.venv` is a copy
of the environment running these tests made of hard links (no reinstall, no space), without the
full kit's editable install: that install's import hook would hand the bundle the full kit's
modules it leaves out (`full_kit.simulate`), and a bundled test that needs one would pass here and
fail for a candidate. `make -o .venv/.installed` keeps make from setting one up; run from the
bundle's root, `python -m grader` imports the bundle's own grader (the tests check which).
"""

import ast
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from full_kit.bundle import (
    CANDIDATE_FILES,
    FULL_KIT_FOLDERS,
    TOP_FOLDER,
    BundleRefused,
    build,
    bundle_files,
    copies_of_answers,
    kit_files,
)
from grader import KIT_ROOT

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


def link_or_copy(source: str, target: str) -> None:
    """A hard link where the file system allows one, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def environment_for(kit: Path) -> None:
    """`kit/.venv`: this environment as hard links, without the full kit's editable install
    (its `.pth` hook and metadata), so that the bundle imports nothing but its own files."""
    editable = shutil.ignore_patterns("__editable__*", "paged_attention_kit-*", "__pycache__")
    shutil.copytree(
        sys.prefix, kit / ".venv", symlinks=True, ignore=editable, copy_function=link_or_copy
    )


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """The candidate bundle, built by its command."""
    archive = tmp_path_factory.mktemp("bundle") / "candidate.tar.gz"
    built = run([sys.executable, "-m", "full_kit.bundle", "--out", str(archive)], KIT_ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    assert f"Wrote {archive}" in built.stdout
    return archive


def unpacked(archive: Path, root: Path, venv: Path | None = None) -> Path:
    """The bundle unpacked under `root`, with its environment (`environment_for`), or a link to
    `venv`, one made so before."""
    with tarfile.open(archive) as bundle:
        bundle.extractall(root, filter="data")
    kit = root / TOP_FOLDER
    if venv is None:
        environment_for(kit)
    else:
        (kit / ".venv").symlink_to(venv, target_is_directory=True)
    return kit


@contextlib.contextmanager
def unpacking_place() -> Iterator[Path]:
    """A new folder to unpack the bundle in, removed afterwards. Not under pytest's temp folder:
    a path with "pytest" in it would show in the sandbox's command lines, where the bundle's
    isolation tests check that no pytest process is visible."""
    place = Path(tempfile.mkdtemp(prefix="candidate-kit-"))
    try:
        yield place
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.fixture(scope="module")
def kit(archive: Path) -> Iterator[Path]:
    """The candidate bundle, unpacked, with the stubs in `exercises/`."""
    with unpacking_place() as place:
        yield unpacked(archive, place)


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


def test_every_bundled_module_imports_without_the_answer_key(kit: Path) -> None:
    """A function may import the full kit's when it runs (`grade.simulation`, called only where
    `full_kit.simulate` is found); no module does when it is imported."""
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
    listed = run(["make", "--no-print-directory", "help"], kit)
    assert listed.returncode == 0, listed.stderr
    assert "make grade" in listed.stdout


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
    part = report["parts"]["allocator"]
    skipped = [check for check in checks if check["status"] == "skipped"]
    assert all(check["max_points"] > 0 for check in checks), checks  # skipped ones keep theirs
    assert part["ungraded"] == [
        {"reason": "graded by the hiring team's kit", "points": part["ungraded_points"]}
    ]
    assert part["ungraded_points"] == pytest.approx(sum(c["max_points"] for c in skipped))
    assert part["max_score"] + part["ungraded_points"] == pytest.approx(15)
    assert "more graded by the hiring team's kit)" in graded.stdout
    page = (kit / "reports" / "exercises" / "report.html").read_text()
    assert "runs only in the full kit" in page
    assert "more graded by the hiring team&#39;s kit" in page


def test_a_check_is_worth_the_same_points_in_both_kits(kit: Path, tmp_path: Path) -> None:
    """The answer key graded by the bundle and by the full kit: each check has the same points;
    the bundle's maximum leaves out what only the full kit grades, and says how much that is."""
    submission = tmp_path / "finished"
    shutil.copytree(SOLUTIONS, submission, ignore=shutil.ignore_patterns("__py*"))
    reports = {}
    for name, root, python in (("bundle", kit, ".venv/bin/python"), ("full", KIT_ROOT, None)):
        out = tmp_path / name
        command = [python or sys.executable, "-m", "grader", str(submission), "--out", str(out)]
        graded = run([*command, "--parts", "allocator,gather"], root)
        assert graded.returncode == 0, graded.stdout + graded.stderr
        reports[name] = json.loads((out / "report.json").read_text())
    weights = {"allocator": 15, "gather": 15}
    for part_id, weight in weights.items():
        parts = {name: report["parts"][part_id] for name, report in reports.items()}
        worth = {
            name: {check["id"]: check["max_points"] for check in part["checks"]}
            for name, part in parts.items()
        }
        assert worth["bundle"] == worth["full"], part_id
        bundle, full = parts["bundle"], parts["full"]
        # The full kit's timings may fail on a busy machine: its maximum is what is compared.
        assert (full["max_score"], full["ungraded_points"]) == (weight, 0)
        assert bundle["score"] == bundle["max_score"] < weight
        assert bundle["max_score"] + bundle["ungraded_points"] == pytest.approx(weight, abs=0.02)


def test_the_bundled_tests_pass_in_the_bundle(kit: Path) -> None:
    tested = run([*MAKE, "test"], kit)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout


def test_the_bundled_tests_pass_on_a_finished_submission(archive: Path, kit: Path) -> None:
    """A candidate who filled every stub in (here: the answer key copied over `exercises/`)
    still sees the kit's own tests pass: none of them checks that the stubs are still stubs."""
    with unpacking_place() as place:
        finished = unpacked(archive, place, venv=kit / ".venv")
        for path in SOLUTIONS.glob("*.py"):
            shutil.copyfile(path, finished / "exercises" / path.name)
        tested = run([*MAKE, "test"], finished)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout
