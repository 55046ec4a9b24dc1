"""The static scan flags nothing in the kit's own answers, stubs and kernels."""

from grader import KIT_ROOT
from grader.scan import scan_files, scan_kernel

ROOT = KIT_ROOT


def test_the_kits_own_answers_and_stubs_give_no_flag() -> None:
    paths = [ROOT / "solutions" / "block_allocator.py", ROOT / "solutions" / "kv_cache_manager.py"]
    paths += sorted((ROOT / "exercises").glob("*.py"))
    files = {f"{path.parent.name}/{path.name}": path.read_bytes() for path in paths}
    assert len(files) >= 6
    assert scan_files(files) == []


def test_the_kits_kernels_give_no_kernel_flag() -> None:
    answer = ROOT / "solutions" / "paged_attention.py"
    assert scan_files({"paged_attention.py": answer.read_bytes()}) == []
    split = ROOT / "full_kit" / "paged_attention_split.py"
    assert scan_kernel("paged_attention.py", split.read_bytes()) == []
