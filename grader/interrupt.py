"""Ctrl-C during `python -m grader`: the grading stops, its workers die, and nothing is written.

SIGINT raises KeyboardInterrupt in the grading process wherever it is. Inside the checks, pytest
catches it, closes every worker as it tears the fixtures down (`Sandbox.close`), and returns
`ExitCode.INTERRUPTED`, which `grade.run_modules` raises again as KeyboardInterrupt; a worker
that outlives that dies with the grading process (`launch.die_with_the_grader`). No report is
written: `python -m grader` prints one line and exits with `EXIT_STATUS`. Once the checks are
done, the report is written and its summary printed `held` from Ctrl-C, so that a report is
written whole or not at all, and the line never says otherwise.

Only the main thread raises KeyboardInterrupt, and only the thread the kernel gives SIGINT to is
woken by it. A thread of the grader's own (a progress ticker, a drive's pool) calls
`leave_to_the_main_thread` first: were SIGINT taken there (a thread that forks a grading at that
moment takes it, say), the main thread, asleep on a lock, would see Ctrl-C only once the lock is
free, a whole grading later. A process such a thread starts calls `unblock_ctrl_c` before it
runs. A library's threads (torch's, Ray's) may still take it: grade-all's main thread also looks
for a SIGINT every second (`drive.local.WAKE_EVERY`).
"""

import contextlib
import signal
import threading
from collections.abc import Iterator

EXIT_STATUS = 130  # 128 + SIGINT: what a shell reports of a command stopped by Ctrl-C


def leave_to_the_main_thread() -> None:
    """In a thread the grader starts, first: SIGINT blocked in it, so that the kernel gives Ctrl-C
    to a thread that does not block it, the main thread. In the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def unblock_ctrl_c() -> None:
    """In a process started by such a thread, before it runs (`preexec_fn`): SIGINT unblocked,
    which the process inherited blocked from the thread."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


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
