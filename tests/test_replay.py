"""`ForkedRuns` runs a script as `python SCRIPT` does: the same exit status, the same last line
on stderr, and a failure at the same line, for scripts that pass, fail at their last line or
earlier, exit with a status or a message, read stdin, print, or die of a signal."""

from pathlib import Path

import pytest

from tests.replay import ForkedRuns, Ran, run

SCRIPTS = {
    "passes": "x = 1\nassert x == 1\n",
    "fails_at_its_last_line": "x = 1\nprint('noise')\nassert x == 2, x\n",
    "fails_before_its_last_line": "raise ValueError('early')\nx = 1\n",
    "fails_in_a_function": "def f():\n    assert False\n\n\nf()\n",
    "exits_with_a_status": "import sys\nsys.exit(3)\n",
    "exits_with_a_message": "import sys\nsys.exit('stopped')\n",
    "reads_an_empty_stdin": "import sys\nassert sys.stdin.read() == ''\n",
    "runs_as_main_in_its_folder": (
        "import os, sys\nassert __name__ == '__main__'\n"
        "assert sys.path[0] == os.getcwd(), (sys.path[0], os.getcwd())\n"
    ),
    "dies_of_a_signal": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "imports_torch": "import torch\nassert torch.ones(2).sum() == 3\n",
}


def summary(ran: Ran) -> tuple[int, bool, str]:
    last = ran.stderr.strip().splitlines()[-1] if ran.stderr.strip() else ""
    return ran.returncode, ran.failed_at_the_last_line(), last


@pytest.fixture(scope="module")
def forked():
    with ForkedRuns() as runs:
        yield runs


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_forked_run_ends_as_python_ends(name: str, forked: ForkedRuns, tmp_path: Path) -> None:
    script = SCRIPTS[name]
    assert summary(forked.run(tmp_path, script)) == summary(run(tmp_path, script))
