"""Helpers of the counterexample tests: run a report's counterexample as a candidate would.

A candidate runs a counterexample with the kit's Python in the folder that holds their files,
whatever its name (the script makes it the package they were graded in), or pastes it into the
Python REPL started there. `kit` makes such a folder with any implementation's files, `run` runs a
script there, and `assert_pastes_into_the_repl` feeds a script to the REPL's compiler line by
line.
"""

import code
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPT = "counterexample.py"
RUN_TIMEOUT = 300.0  # a safety net: a counterexample runs in seconds


def kit(folder: Path, files: Path) -> Path:
    """`folder` holding `files`' modules (and nothing else of theirs), as a candidate's folder:
    a counterexample runs in it."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for module in files.glob("*.py"):
        shutil.copyfile(module, folder / module.name)
    return folder


@dataclass
class Ran:
    returncode: int
    stderr: str
    lines: int  # in the script

    def failed_at_the_last_line(self) -> bool:
        """It stopped with an exception (an AssertionError, or the candidate's own) raised by
        the script's last statement (the traceback's first frame)."""
        frames = [line for line in self.stderr.splitlines() if f'{SCRIPT}", line ' in line]
        return self.returncode != 0 and bool(frames) and f"line {self.lines}," in frames[0]

    def __str__(self) -> str:
        return f"exit status {self.returncode}\n{self.stderr[-3000:]}"


def run(folder: Path, script: str) -> Ran:
    """`python counterexample.py` in `folder`, holding `script`."""
    (folder / SCRIPT).write_text(script)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, SCRIPT],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return Ran(done.returncode, done.stderr, len(script.splitlines()))


class Compiler(code.InteractiveConsole):
    """The REPL's reading of a paste, line by line, without running anything."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: list[str] = []

    def runcode(self, compiled: object) -> None:
        pass

    def showsyntaxerror(self, filename: str | None = None, **kwargs: object) -> None:
        self.errors.append(self.buffer[-1] if self.buffer else "")


def assert_pastes_into_the_repl(script: str) -> None:
    """Pasted into the REPL line by line, `script` reads with no SyntaxError (a compound
    statement needs a blank line before the next statement)."""
    compiler = Compiler()
    for number, line in enumerate([*script.splitlines(), ""], start=1):
        before = len(compiler.errors)
        compiler.push(line)
        assert len(compiler.errors) == before, f"SyntaxError at line {number}: {line}\n{script}"
