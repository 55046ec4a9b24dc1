"""Each shipped test runs once a session: in the kit that ships it.

Where this session runs `test_shipped_kits.py` from a git clone (its `shipped` fixture needs one),
the candidate kit, unpacked into an empty folder and set up as a candidate gets it, runs its own
`make test`: every test it ships (`full_kit.bundle.shipped`), on the same files. Those tests are
deselected here, where they would give the same verdicts a second time; a failure among them
fails that kit's `make test` step, which names it. Run without `test_shipped_kits.py` (`make test
TESTS=tests/grader`), they run here.
"""

import pytest

from full_kit.bundle import shipped
from grader import KIT_ROOT

SHIPPED_KITS_MODULE = KIT_ROOT / "tests" / "full_kit" / "test_shipped_kits.py"


def in_shipped_file(item: pytest.Item) -> bool:
    """Whether `item` is a test of a file the candidate kit ships."""
    path = item.path
    return path.is_relative_to(KIT_ROOT) and shipped(path.relative_to(KIT_ROOT).as_posix())


@pytest.hookimpl(trylast=True)  # after -k and -m: only a test that stays selected counts
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kits_tested = (KIT_ROOT / ".git").exists() and any(
        item.path == SHIPPED_KITS_MODULE and "shipped" in item.fixturenames for item in items
    )
    if not kits_tested:
        return
    run_there = [item for item in items if in_shipped_file(item)]
    if run_there:
        config.hook.pytest_deselected(items=run_there)
        items[:] = [item for item in items if not in_shipped_file(item)]
