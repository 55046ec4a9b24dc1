"""Each shipped test runs once a whole run: in the kit that ships it.

Where this session runs the test of the candidate kit's own `make test` (`test_shipped_kits.py`,
marked `runs_the_shipped_tests`; its `shipped` fixture needs a git clone), that kit, unpacked into
an empty folder and set up as a candidate gets it, runs every test it ships
(`full_kit.bundle.shipped`) on the same files. Those tests are deselected here, where they would
give the same verdicts a second time; a failure among them fails that kit's `make test`, whose
message names it. A shipped test marked `both_kits`, which checks more where the full kit's
folders are, runs here too. A run without that test (`make test TESTS=tests/grader`) runs them
all here.
"""

import pytest

from full_kit.bundle import shipped as shipped_file
from grader import KIT_ROOT

LEFT = pytest.StashKey[list[str]]()  # the ids of the tests this session left to the candidate kit


def kits_testable() -> bool:
    """Whether the kits can be tested as they ship: the full kit is tested from a git clone."""
    return (KIT_ROOT / ".git").exists()


def left_to_the_candidate_kit(item: pytest.Item) -> bool:
    """Whether `item` is a test of a file the candidate kit ships, run only there."""
    path = item.path
    return (
        path.is_relative_to(KIT_ROOT)
        and shipped_file(path.relative_to(KIT_ROOT).as_posix())
        and item.get_closest_marker("both_kits") is None
    )


def pytest_configure(config: pytest.Config) -> None:
    """The marker of the test whose verdict is the candidate kit's `make test`."""
    config.addinivalue_line(
        "markers", "runs_the_shipped_tests: passes only where the candidate kit's `make test` does"
    )


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: only a test still selected counts
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests left to the candidate kit, where its `make test` is tested."""
    kit_tested = kits_testable() and any(
        item.get_closest_marker("runs_the_shipped_tests") for item in items
    )
    left, kept = [], []
    for item in items:
        (left if kit_tested and left_to_the_candidate_kit(item) else kept).append(item)
    config.stash[LEFT] = [item.nodeid for item in left]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
