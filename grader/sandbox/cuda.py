"""Whether this grading runs part 4's kernels natively on CUDA.

Where the grading process sees a GPU, `settle` asks once, before any part is graded, whether a
worker started as part 4's are (the sandbox, its user, its limits), running the kit's probe
(`tools/gpu_probe.py`) and no submission's code, can use it. Where it cannot, the grading runs
part 4 under Triton's interpreter on the CPU, as on a machine without a GPU, and its report says
why (`problem`): a fault of the machine is never charged to a submission. The answer rests on
the kit's own worker alone, so no submission can change it.
"""

import time

import torch

from grader.sandbox.isolation import Isolation
from grader.sandbox.process import Limits, Sandbox, SubmissionFailure, described
from grader.sandbox.proxy import RemoteError, Submission

PROBE_BYTES = 1 << 20  # device memory the probe allocates and writes

_problem = ""  # why this grading's workers cannot use its GPU (`settle`); "" where they can


def settle(isolation: Isolation, limits: Limits) -> str:
    """Ask, where this process sees a GPU, whether its workers can use it; remember and return
    why not ("" where they can, or where there is no GPU)."""
    global _problem
    _problem = probe(isolation, limits, PROBE_BYTES) if torch.cuda.is_available() else ""
    return _problem


def problem() -> str:
    """Why this grading's workers cannot use the GPU this process sees ("" where they can)."""
    return _problem


def native() -> bool:
    """Whether part 4's workers run Triton natively on CUDA in this grading."""
    return torch.cuda.is_available() and not _problem


def probe(isolation: Isolation, limits: Limits, allocate_bytes: int) -> str:
    """Why a worker started as part 4's are does not allocate `allocate_bytes` of device memory
    and run a Triton kernel on it (`gpu_probe.probe`) within `limits.import_seconds`; "" where
    it does."""
    seconds = limits.import_seconds
    deadline = time.monotonic() + seconds
    sandbox = Sandbox({}, limits, {}, deadline, isolation, answer_key=True, runs_tool=True)
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
