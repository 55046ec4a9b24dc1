"""Helpers of the counterexample tests: run a report's counterexample as a candidate would.

A candidate runs a counterexample with the kit's Python in the folder that holds their files,
whatever its name (the script makes it the package they were graded in), or pastes it into the
Python REPL started there. `kit` makes such a folder with any implementation's files, `run` runs a
script there (`ForkedRuns` many scripts, without starting Python for each), and
`assert_pastes_into_the_repl` feeds a script to the REPL's compiler line by line.
"""

import code
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SCRIPT = "counterexample.py"
FORK_SERVER = Path(__file__).resolve().parent / "fork_server.py"
RUN_TIMEOUT = 300  # seconds, a safety net: a counterexample runs in seconds


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


def environment() -> dict[str, str]:
    """The kit's Python's environment, as a candidate's shell has it: no PYTHONPATH."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def run(folder: Path, script: str) -> Ran:
    """`python counterexample.py` in `folder`, holding `script`."""
    (folder / SCRIPT).write_text(script)
    done = subprocess.run(
        [sys.executable, SCRIPT],
        cwd=folder,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return Ran(done.returncode, done.stderr, len(script.splitlines()))


class ForkedRuns:
    """`run` for many scripts: each runs as `python counterexample.py` would, in a child forked
    from one Python that has imported torch (`fork_server.py`), so that no script pays for that
    import. One thread at a time; a context manager: the server, and any script still running,
    end with it."""

    def __init__(self) -> None:
        self.server = subprocess.Popen(
            [sys.executable, str(FORK_SERVER)],
            env=environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            process_group=0,
        )  # fmt: skip

    def run(self, folder: Path, script: str) -> Ran:
        """`run(folder, script)`, forked."""
        (folder / SCRIPT).write_text(script)
        request = {"folder": str(folder.resolve()), "script": SCRIPT, "timeout": RUN_TIMEOUT}
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        replied, _, _ = select.select([self.server.stdout], [], [], RUN_TIMEOUT + 60)
        assert replied, f"no reply in {RUN_TIMEOUT + 60} s (the script's alarm was cancelled?)"
        line = self.server.stdout.readline()
        assert line, f"the fork server ended (exit status {self.server.wait()})"
        reply = json.loads(line)
        return Ran(reply["returncode"], reply["stderr"], len(script.splitlines()))

    def __enter__(self) -> "ForkedRuns":
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.server.pid, signal.SIGKILL)  # and a script still running
        self.server.wait()
        self.server.stdin.close()
        self.server.stdout.close()


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
