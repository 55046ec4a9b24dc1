"""The answer key is a submission as exercises/README.md defines it: its modules import each
other relatively, so that it loads as a package under any name."""

import shutil
import subprocess
import sys
from pathlib import Path

from grader import KIT_ROOT
from tests.exercises.test_submission_layout import (
    assert_imports_only_torch_triton_and_the_standard_library,
)

ROOT = KIT_ROOT


def test_answer_key_runs_as_a_package_of_any_name(tmp_path: Path) -> None:
    """A copy of solutions/ named like a candidate's folder, imported in a fresh interpreter
    whose working directory is outside the kit: the relative imports hold it together."""
    shutil.copytree(ROOT / "solutions", tmp_path / "candidate_42")
    script = (
        "import candidate_42.kv_cache_manager as m\n"
        "manager = m.KVCacheManager(4, 2, 3)\n"
        "req = m.Request(7, 3)\n"
        "manager.allocate_for_prefill(req)\n"
        "manager.allocate_for_decode(req)\n"
        "print(req.seq_len, len(req.block_table), len(manager.free_blocks))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, '.')\n{script}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["4", "2", "2"]


def test_answer_key_imports_only_torch_triton_and_the_standard_library() -> None:
    assert_imports_only_torch_triton_and_the_standard_library("solutions")
