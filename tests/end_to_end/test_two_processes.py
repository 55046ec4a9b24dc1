"""A grading of several parts grades some of them in a second process (`grader/beside.py`); where
that process fails, its parts are graded in the first after all, with the same report, and a
line says so."""

import json
import subprocess
import sys

from grader.report.i18n import tr
from tests.grading import CLI_TIMEOUT, KIT_ROOT, SOLUTIONS

# `python -m grader`, its second process dying as soon as it is forked.
DYING = """
import os, runpy, sys
from grader import grade

fork = grade.Beside.fork
grade.Beside.fork = lambda run, parts: fork(lambda stream: os._exit(3), parts)
sys.argv = ["grader", *sys.argv[1:]]
runpy.run_module("grader", run_name="__main__")
"""


def test_the_parts_of_a_second_process_that_dies_are_graded_in_the_first(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", DYING, str(SOLUTIONS), "--out", str(tmp_path / "report"),
         "--parts", "decode,gather"],
        cwd=KIT_ROOT, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["errors"] == []
    for part in ("decode", "gather"):
        statuses = {check["status"] for check in report["parts"][part]["checks"]}
        assert statuses == {"passed"}, part
    said = tr("en", "progress_beside_failed", parts="gather", error="")
    assert said.split("(")[0] in done.stderr, done.stderr
    assert "ended with status 3" in done.stderr
