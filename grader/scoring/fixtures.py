"""The grading plugin's fixtures: the workers a check talks to, and what it records for the report.

`submission` is the candidate's package in a worker, `reference` the kit's answer key in a worker
of its own, for timing and for comparing traces (the check is skipped where the answer key is not
shipped); `profile` the grading profile; `record_benchmark` a timing and `record_section` any
other JSON data, for the report.

Each part has a candidate's worker of its own (`worker`), forked from a zygote where one can be
made (a fiftieth of a second; `zygotes.py`), else started afresh, and stopped when the next part
starts its own (a process grades its parts one after another): what a candidate's code keeps in
module-level state lives on from check to check of a part, never from one part to another, so a
part grades the same whichever parts ran before it, and in whichever of the grading's two
processes (`grade.split_parts`). The answer key's reference worker, which keeps no state, is
shared by the parts that run the same files. Each check starts with an empty transcript, and
with a fresh worker where the previous check left it crashed or timed out. Each part has its own
wall-clock budget (`Limits.part_seconds`), counted from its first check that asks for a worker,
within the submission's (`submission_deadline`), and its own calls that did not return in time
(`Sandbox.hung`, `Sandbox.part_hangs`). An integrity event is the part's whose check's request
brought it (the report flags one that several parts' workers sent once: `grade.worker_flags`).

A part built on other parts (its `swapped` files in `grader/parts.toml`) is scored apart from
them, on the answer key's modules for those parts, where the kit ships it. The answer key never
enters the candidate's worker: that worker gets stand-ins in place of those files, whose objects
the kit's own worker serves (`kit_server.py`); `part_notes` says which files each such part was
scored with. A plugin made with `swapped` does the same for every part it grades.
"""

import functools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from grader.parts import PARTS
from grader.said import said
from grader.sandbox.isolation import Isolation
from grader.sandbox.launch import STAND_INS
from grader.sandbox.process import Events, Limits, Sandbox
from grader.sandbox.proxy import Submission
from grader.sandbox.zygotes import Zygotes
from grader.scoring.profiles import Profile
from grader.scoring.timing import RecordBenchmark, implausible

Workers = dict[tuple, Submission]  # by role, part (the candidate's), package, files, environment


def part_of(request: pytest.FixtureRequest) -> str:
    """The part the requesting check grades (its module's `part` marker)."""
    return request.node.get_closest_marker("part").args[0]


def check_name(item: pytest.Item) -> str:
    """A check's name: its function's without `check_` ("random_allocate_and_free")."""
    return item.name.removeprefix("check_")


def check_id(item: pytest.Item) -> str:
    """A check's id in the report: its part's, then its name ("allocator/random_allocate_...")."""
    return f"{item.get_closest_marker('part').args[0]}/{check_name(item)}"


@dataclass(kw_only=True)
class WorkerFixtures:
    """The fixtures the checks use, and what they leave behind (a mixin of `GradingPlugin`)."""

    files: dict[str, bytes]  # the candidate's, by file name
    package: str  # the name the candidate's package is imported under in its workers
    reference_files: dict[str, bytes] | None  # the answer key's; None in the candidate bundle
    grading_profile: Profile
    limits: Limits
    worker_env: dict[str, dict[str, str]]  # by part
    isolation: Isolation | None = None  # None: bubblewrap where a sandbox can be made
    swapped: tuple[str, ...] = ()  # answer-key files in place of the candidate's, in every part
    submission_deadline: float = math.inf  # when the grading's budget is spent (monotonic)
    zygotes: Zygotes | None = None  # the grading's, its workers forked from them (`zygotes.py`)
    events: dict[str, Events] = field(default_factory=dict)  # the workers' integrity events
    benchmarks: list[dict] = field(default_factory=list)
    sections: dict[str, dict] = field(default_factory=dict)
    part_notes: dict[str, str] = field(default_factory=dict)  # what a part was scored with
    deadlines: dict[str, float] = field(default_factory=dict)  # by part, on the monotonic clock
    part_hangs: dict[str, list[tuple]] = field(default_factory=dict)  # `Sandbox.part_hangs`
    part_files: dict[str, dict[str, bytes]] = field(default_factory=dict)  # `files_for`, by part

    @pytest.fixture(scope="session")
    def workers(self) -> Iterator[Workers]:
        """The grading's workers (`worker`); all stopped at its end."""
        workers: Workers = {}
        try:
            yield workers
        finally:
            for worker in workers.values():
                worker.sandbox.close()

    @pytest.fixture
    def submission(self, request: pytest.FixtureRequest, workers: Workers) -> Submission:
        part = part_of(request)
        return self.worker(workers, "candidate", part, self.files_for(part), self.package)

    @pytest.fixture
    def reference(self, request: pytest.FixtureRequest, workers: Workers) -> Submission:
        if self.reference_files is None:
            pytest.skip(
                said("runs only in the full kit: the answer key it is compared with is absent")
            )
        return self.worker(workers, "reference", part_of(request), self.reference_files,
                           "solutions")  # fmt: skip

    def worker(
        self, workers: Workers, role: str, part: str, files: dict[str, bytes], package: str
    ) -> Submission:
        """The `role` worker ("candidate" or "reference") that runs `files` as `package` in
        `part`'s environment, started on its first request, now within `part`'s budget: the
        candidate's, `part`'s own; the reference, shared by the parts that run the same files."""
        env = self.worker_env[part]
        deadline = self.deadlines.setdefault(part, time.monotonic() + self.limits.part_seconds)
        own = part if role == "candidate" else None  # the answer key's, stateless, is shared
        key = (role, own, package, tuple(sorted(files.items())), tuple(sorted(env.items())))
        if key not in workers:
            if role == "candidate":  # the previous part's is done with
                for done in [other for other in workers if other[0] == role and other[1] != part]:
                    workers.pop(done).sandbox.close()
            kit = self.kit_files(part) if role == "candidate" else {}
            sandbox = Sandbox(files, self.limits, env, deadline, self.isolation,
                              remembers_hangs=role == "candidate", kit_files=kit,
                              zygotes=self.zygotes, answer_key=role == "reference")  # fmt: skip
            workers[key] = Submission(sandbox, package)
        workers[key].sandbox.part_deadline = deadline
        workers[key].sandbox.submission_deadline = self.submission_deadline
        workers[key].sandbox.part_hangs = self.part_hangs.setdefault(part, [])
        return workers[key]

    def files_for(self, part: str) -> dict[str, bytes]:
        """The candidate's files, with those `part` builds on, and `swapped`, replaced by
        stand-ins for the answer key's (where the kit ships it); only its own for a part graded
        `alone`; made once per part."""
        if part in self.part_files:
            return self.part_files[part]
        if PARTS[part].alone:
            own = {name: self.files[name] for name in PARTS[part].files if name in self.files}
            self.part_files[part] = own
            return own
        built_on = PARTS[part].swapped
        if built_on:
            names = functools.reduce(
                lambda first, second: said("{first} and {second}", first=first, second=second),
                built_on,
            )
            self.part_notes[part] = (
                said(
                    "scored with your own {files}: the full kit swaps in its reference ones",
                    files=names,
                )
                if self.reference_files is None
                else said("scored with the kit's reference {files} in place of yours", files=names)
            )
        kit = self.kit_files(part)
        files = {name: content for name, content in self.files.items() if name not in kit}
        files |= {name: (STAND_INS / name).read_bytes() for name in kit}
        self.part_files[part] = files
        return files

    def kit_files(self, part: str) -> dict[str, bytes]:
        """The answer key's files that `part` runs the candidate's code on, served by the kit's
        worker to the stand-ins that replace them (none where the kit does not ship them)."""
        if self.reference_files is None:
            return {}
        return {name: self.reference_files[name] for name in (*PARTS[part].swapped, *self.swapped)}

    @pytest.fixture
    def profile(self) -> Profile:
        return self.grading_profile

    @pytest.fixture
    def record_benchmark(self, request: pytest.FixtureRequest) -> RecordBenchmark:
        """`record_benchmark(name, candidate_s, reference_s, ratio, limit)`, for the report,
        with the part and the check that timed it."""
        part, check = part_of(request), check_id(request.node)

        def record(name: str, candidate: float, reference: float, ratio: float, limit: float):
            self.benchmarks.append({
                "name": name,
                "part": part,
                "check": check,
                "candidate_seconds": candidate,
                "reference_seconds": reference,
                "ratio": round(ratio, 3),
                "limit": limit,
                "rounds": self.grading_profile.timing_rounds,  # asked (`timing.affordable` and
                # `timing.clearly_passes` may run fewer)
                "passed": ratio <= limit and not implausible(ratio),
            })  # fmt: skip

        return record

    @pytest.fixture
    def record_section(self) -> Any:
        """`record_section(name, value)`: JSON-able data the report shows under `name`."""

        def record(name: str, value: dict) -> None:
            self.sections[name] = value

        return record

    @pytest.fixture(autouse=True)
    def fresh_check(self, request: pytest.FixtureRequest) -> Iterator[None]:
        """Before each check: a working worker and an empty transcript. After it: the events
        the candidate's worker sent during the check, recorded as the part's."""
        used = {name: request.getfixturevalue(name) for name in ("submission", "reference")
                if name in request.fixturenames}  # fmt: skip
        for worker in used.values():
            worker.sandbox.next_check()
            worker.transcript.reset()
        yield
        if "submission" in used:
            sandbox = used["submission"].sandbox
            self.events.setdefault(part_of(request), Events()).merge(sandbox.events)
            sandbox.events = Events()
