"""Ctrl-C during `python -m grader`: the grading stops, its workers die, and nothing is written.

SIGINT raises KeyboardInterrupt in the grading process wherever it is. Inside the checks, pytest
catches it, closes every worker as it tears the fixtures down (`Sandbox.close`), and returns
`ExitCode.INTERRUPTED`, which `grade.run_modules` raises again as KeyboardInterrupt; a worker
that outlives that dies with the grading process (`process.die_with_the_grader`). No report is
written: `python -m grader` prints one line and exits with `EXIT_STATUS`. Once the checks are
done, the report is written and its summary printed `held` from Ctrl-C, so that a report is
written whole or not at all, and the line never says otherwise.
"""

import contextlib
import signal
import threading
from collections.abc import Iterator

EXIT_STATUS = 130  # 128 + SIGINT: what a shell reports of a command stopped by Ctrl-C


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Within it, SIGINT is ignored (Python sees signals in its main thread only: elsewhere it
    changes nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
