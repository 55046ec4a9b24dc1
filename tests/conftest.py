"""Shared test settings: one Hypothesis profile whatever the environment, one torch thread, one
folder of gradings per test session, and a seal key of the session's own.

Hypothesis loads its own `ci` profile whenever `CI` is set; loading ours explicitly keeps a
run on a laptop and a run in CI the same (same examples, no deadline, no example database).
The tests' tensors are small: a torch thread pool only adds waiting, and on a busy 2-core
machine it makes each small op and each benchmark round ten times slower at random.
`make test` runs the test modules in several processes (pytest-xdist, a whole module per
process); the gradings that several modules read are shared between them (`shared_gradings`).
Every grading the tests run, in this process or another, seals its report with a key made in a
config folder of the session's own (`XDG_CONFIG_HOME`, set before the xdist workers start and
removed at the end), never the user's.
"""

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import settings

pytest_plugins = ("tests.browser",)  # the `browser` fixture of the page tests

settings.register_profile(
    "kit", derandomize=True, database=None, deadline=None, print_blob=True, max_examples=100
)
settings.load_profile("kit")
torch.set_num_threads(1)


CONFIG_FOLDER = pytest.StashKey[str]()  # the session's own XDG_CONFIG_HOME


def pytest_configure(config: pytest.Config) -> None:
    """The session's own config folder (see the module), made by its first process; `both_kits`,
    the marker of a shipped test that checks more where the full kit's folders are: the full
    kit runs it itself, where a whole run leaves the other shipped tests to the candidate kit."""
    config.addinivalue_line(
        "markers", "both_kits: a shipped test that checks more in the full kit (solutions/...)"
    )
    if not hasattr(config, "workerinput"):
        folder = tempfile.mkdtemp(prefix="kit-tests-config-")
        config.stash[CONFIG_FOLDER] = os.environ["XDG_CONFIG_HOME"] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    if CONFIG_FOLDER in config.stash:
        shutil.rmtree(config.stash[CONFIG_FOLDER], ignore_errors=True)


@pytest.fixture(scope="session")
def shared_gradings(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every xdist worker of it shares: the gradings that
    several test modules read (`tests.grading.grade_shared`)."""
    base = tmp_path_factory.getbasetemp()
    if hasattr(pytestconfig, "workerinput"):  # an xdist worker: its base is in the session's
        base = base.parent
    folder = base / "shared-gradings"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, config) -> None:
    """After `make bench`'s table, the figures each benchmark derived (its `extra_info`)."""
    session = getattr(config, "_benchmarksession", None)
    figures = [(b.name, b.extra_info) for b in getattr(session, "benchmarks", []) if b.extra_info]
    if figures:
        terminalreporter.section("benchmark figures")
        for name, extra_info in figures:
            shown = ", ".join(
                f"{key}={value:,.{0 if isinstance(value, int) else 1}f}"
                for key, value in extra_info.items()
            )
            terminalreporter.write_line(f"{name}: {shown}")
