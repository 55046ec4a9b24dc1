"""`python -m tests.unguarded ARGS`: `python -m grader ARGS` with the file rule off
(`grader/file_rule.py`), for the tests of the defences behind it.

A hostile fixture that imports `os` or reads `sys.meta_path` is refused by the file rule before
any worker sees it. Its test is about what stops it when it does run (the sandbox, the evidence
replay, the limits), so it grades with the rule off: `unguard` in the grading process, never in a
worker. The file rule's own hostile tests grade as users do.
"""

import sys

from grader import file_rule
from grader.drive import local


def unguard() -> None:
    """No file is held to the file rule, in this process and the gradings `grade-all` starts
    here: those it forks inherit the rule's absence, those it starts afresh run this module
    (not those it sends to a Ray cluster)."""
    file_rule.breaks = lambda files: {}
    graded_by = local.command
    local.command = lambda *args: unguarded(graded_by(*args))


def unguarded(command: list[str]) -> list[str]:
    """`python -m grader ...` as `python -m tests.unguarded ...`."""
    at = command.index("-m") + 1
    assert command[at] == "grader", command
    return [*command[:at], "tests.unguarded", *command[at + 1 :]]


if __name__ == "__main__":
    from grader.__main__ import main

    unguard()
    sys.exit(main(sys.argv[1:]))
