"""Whether this grading runs part 4's kernels natively on CUDA.

Where the grading process sees a GPU, `settle` asks once, before any part is graded and before
the submission's time budget starts, whether a worker started as part 4's are (the sandbox, its
user, its limits), running the kit's probe (`tools/gpu_probe.py`) and no submission's code, can
use it. Where it cannot, the grading runs part 4 under Triton's interpreter on the CPU, as on a
machine without a GPU, and its report says why (`settled`): a fault of the machine is never
charged to a submission. The answer rests on the kit's own worker alone, so no submission can
change it.
"""

import time
from dataclasses import dataclass

import torch

from grader.sandbox.isolation import Isolation
from grader.sandbox.process import Limits, Sandbox, SubmissionFailure, described
from grader.sandbox.proxy import RemoteError, Submission

PROBE_BYTES = 1 << 20  # device memory the probe allocates and writes


@dataclass(frozen=True)
class Settled:
    """What `settle` found: the GPU this process sees ("" where none), and why this grading's
    workers cannot use it ("" where they can)."""

    device: str = ""
    problem: str = ""


_settled = Settled()


def settle(isolation: Isolation, limits: Limits) -> Settled:
    """Ask, where this process sees a GPU, whether its workers can use it; remember the answer
    for this grading (`settled`, `native`) and return it."""
    global _settled
    if not torch.cuda.is_available():
        _settled = Settled()
    else:
        try:
            device = torch.cuda.get_device_name()
        except Exception as error:  # the driver's own fault: said by the probe too
            device = f"a CUDA device whose name torch cannot read ({error})"
        _settled = Settled(device, probe(isolation, limits, PROBE_BYTES))
    return _settled


def settled() -> Settled:
    """This grading's answer (`settle`)."""
    return _settled


def native() -> bool:
    """Whether part 4's workers run Triton natively on CUDA in this grading."""
    return torch.cuda.is_available() and not _settled.problem


def probe(isolation: Isolation, limits: Limits, allocate_bytes: int) -> str:
    """Why a worker started as part 4's are does not allocate `allocate_bytes` of device memory
    and run a Triton kernel on it (`gpu_probe.probe`) within `limits.import_seconds`; "" where
    it does."""
    seconds = limits.import_seconds
    deadline = time.monotonic() + seconds
    sandbox = Sandbox({}, limits, {}, deadline, isolation)
    try:
        Submission(sandbox, "submission").tool("gpu_probe", "probe", allocate_bytes,
                                               seconds=seconds)  # fmt: skip
    except RemoteError as error:
        return error.message
    except SubmissionFailure as failure:
        return str(described(failure))
    finally:
        sandbox.close()
    return ""
