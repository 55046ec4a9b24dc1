"""The grading's workers (`WorkerFixtures.worker`): each part its own candidate's worker, stopped
when the next part starts its own, so no module-level state carries from one part to another;
one answer-key worker for the parts that run the same files."""

from grader.parts import PARTS
from grader.sandbox.process import Limits
from grader.scoring.fixtures import WorkerFixtures
from grader.scoring.profiles import PROFILES

COUNTER = b"CALLS = []\n\n\ndef call():\n    CALLS.append(1)\n    return len(CALLS)\n"


def test_each_part_has_a_candidates_worker_of_its_own_and_shares_the_reference() -> None:
    files = {"counter.py": COUNTER}
    plugin = WorkerFixtures(
        files=files,
        package="submission",
        reference_files=files,
        grading_profile=PROFILES["quick"],
        limits=Limits(call_seconds=600.0, import_seconds=600.0),
        worker_env={part: {} for part in PARTS},
    )
    workers, calls, started = {}, {}, {}
    try:
        for role in ("candidate", "reference"):
            for part in ("allocator", "decode"):
                worker = plugin.worker(workers, role, part, files, "submission")
                started[role, part] = worker.sandbox
                calls[role, part] = [worker.module("counter").call() for _ in range(2)]
    finally:
        for worker in workers.values():
            worker.sandbox.close()
    assert calls == {
        ("candidate", "allocator"): [1, 2],
        ("candidate", "decode"): [1, 2],
        ("reference", "allocator"): [1, 2],
        ("reference", "decode"): [3, 4],
    }
    assert started["candidate", "allocator"].process is None  # stopped when decode's started
    assert started["candidate", "allocator"].home is None
    assert started["reference", "allocator"] is started["reference", "decode"]
