"""The grading plugin's progress lines: one per part, on stderr, as its checks finish.

A part's line shows how many of its checks have run and the seconds since its first began; it is
rewritten in place as each check finishes (`live`, a terminal) or printed once, when the part's
last check has finished. A `quiet` grading prints none. Every collected check must be `expect`ed
before it runs: the count of a part's checks is what ends its line.
"""

import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PartProgress:
    """One part's checks: how many were collected, how many have finished, when the first began."""

    total: int = 0
    done: int = 0
    started: float = 0.0


@dataclass(kw_only=True)
class ProgressLines:
    """The pytest hooks that report each part's progress (a mixin of `GradingPlugin`)."""

    live: bool = False  # rewrite the line as each check finishes
    quiet: bool = False  # no progress lines: a run whose results the report does not show
    progress: dict[str, PartProgress] = field(default_factory=dict)  # by part
    part_of_node: dict[str, str] = field(default_factory=dict)  # by pytest node id

    def expect(self, nodeid: str, part: str) -> None:
        """Count check `nodeid` among `part`'s, at collection."""
        self.progress.setdefault(part, PartProgress()).total += 1
        self.part_of_node[nodeid] = part

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        part = self.progress[self.part_of_node[nodeid]]
        part.started = part.started or time.monotonic()

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        part_id = self.part_of_node[nodeid]
        part = self.progress[part_id]
        part.done += 1
        if self.quiet:
            return
        seconds = time.monotonic() - part.started
        line = f"  {part_id:<10} {part.done:>3}/{part.total} checks  {seconds:6.1f} s"
        if self.live:
            end = "\n" if part.done == part.total else ""
            print(f"\r{line}", end=end, file=sys.stderr, flush=True)
        elif part.done == part.total:
            print(line, file=sys.stderr, flush=True)
