"""The kernel's watchers (`watchers.py`): what they record, and what recording costs."""

import json
import subprocess
import sys

from grader import KIT_ROOT

# Run in a fresh interpreter: this test's process may have imported torch._dynamo already.
WATCHED_BMM = """
import json, sys, torch
from grader.sandbox.watchers import torch_ops_outside_kernels
q = torch.ones(2, 3, 4)
with torch_ops_outside_kernels([q]) as seen:
    torch.empty_like(q)
    q @ q.transpose(1, 2)
print(json.dumps({"seen": seen, "dynamo": "torch._dynamo" in sys.modules}))
"""


def test_the_recorder_names_what_torch_computes_and_imports_no_dynamo() -> None:
    """The recorder names the bmm, not the allocation, and asks torch for no Dynamo guard where
    Dynamo is not loaded (nothing compiles then): the guard's first use imports `torch._dynamo`,
    about 1.4 CPU-s of every worker that launches a kernel."""
    done = subprocess.run(
        [sys.executable, "-c", WATCHED_BMM], cwd=KIT_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"seen": ["aten.bmm"], "dynamo": False}
