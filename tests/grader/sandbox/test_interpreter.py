"""The interpreter's speed-up (`interpreter.py`): the same values, one patch of `triton.language`
a launch, nothing left patched after it, and every worker that launches a kernel sped up."""

import json
import subprocess
import sys
import time

import torch

from grader import KIT_ROOT
from grader.sandbox.process import INTERPRETED, Limits, Sandbox
from grader.sandbox.proxy import Submission

# Run in a fresh interpreter each way: the speed-up, once made, stays for the process.
LAUNCHES = """
import hashlib, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch, triton, triton.language as tl
from triton.runtime import interpreter
from solutions.paged_attention import paged_attention_decode
from grader.sandbox.interpreter import speed_up

@triton.jit
def halve(x):
    return x * 0.5

@triton.jit
def block_sums(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    total = 0.0
    for start in range(0, n, BLOCK):  # one tl.sum and one helper call a block
        offsets = start + tl.arange(0, BLOCK)
        total += halve(tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), axis=0))
    tl.store(out_ptr + tl.program_id(0), total)

@triton.jit
def fails(x_ptr):
    tl.store(x_ptr + tl.arange(0, 3), 1.0)  # not a power of two: the interpreter raises

patches = []
patch_builtin = interpreter._patch_builtin
interpreter._patch_builtin = lambda *args: patches.append(1) or patch_builtin(*args)
sped_up = speed_up() if sys.argv[1] == "sped up" else None

def patches_of(n):
    out, x = torch.zeros(1), torch.arange(n, dtype=torch.float32)
    patches.clear()
    block_sums[(1,)](x, out, n, BLOCK=4)
    assert float(out) == float(x.sum()) / 2, (float(out), n)
    return len(patches)

digest = hashlib.sha256()
torch.manual_seed(0)
for dtype, heads, kv_heads, head_dim, lengths in [
    (torch.float32, 6, 2, 20, [1, 37, 0, 64]), (torch.float16, 4, 4, 16, [5, 16]),
    (torch.bfloat16, 7, 1, 32, [33]),
]:
    q = torch.randn(len(lengths), heads, head_dim, dtype=dtype)
    k, v = (torch.randn(24, 16, kv_heads, head_dim, dtype=dtype) for _ in range(2))
    tables = torch.randperm(24, dtype=torch.int32)[: len(lengths) * 4].view(len(lengths), 4)
    seq_lens = torch.tensor(lengths, dtype=torch.int32)
    digest.update(paged_attention_decode(q, k, v, tables, seq_lens).view(torch.uint8).numpy())
try:
    fails[(1,)](torch.zeros(4))
except Exception as error:
    raised = type(error).__name__
print(json.dumps({
    "sped_up": sped_up, "digest": digest.hexdigest(), "raised": raised,
    "patches": [patches_of(n) for n in (4, 40)],
    "patched_after": [name for module in (tl, tl.core) for name in ("program_id", "load", "arange")
                      if not tl.core.is_builtin(getattr(module, name))],
    "sanitize_overflow": interpreter.interpreter_builder.options.sanitize_overflow,
}))
"""


def launched(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHES, mode], cwd=KIT_ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_sped_up_interpreter_computes_the_same_values_and_patches_once_a_launch() -> None:
    """The answer key's kernel gives the same bytes (float32, float16, bfloat16, GQA groups of
    3, 1 and 7, an empty sequence), a failing launch raises as before, and a launch patches
    `triton.language` as often whether its kernel calls device functions 2 times or 20 (Triton
    alone patches again at each call), leaving nothing patched after it (Triton alone leaves
    `triton.language.core` patched)."""
    plain, sped_up = launched("plain"), launched("sped up")
    assert sped_up["sped_up"] is True
    assert sped_up["digest"] == plain["digest"]
    assert sped_up["raised"] == plain["raised"] == "InterpreterError"
    assert sped_up["patches"][0] == sped_up["patches"][1] < plain["patches"][0]
    assert plain["patches"][0] < plain["patches"][1]
    assert sped_up["patched_after"] == []
    assert plain["patched_after"] != []
    assert (plain["sanitize_overflow"], sped_up["sanitize_overflow"]) == (True, False)


KERNEL = b"""
import sys
import torch
import triton
import triton.language as tl


@triton.jit
def total(x_ptr, out_ptr, N: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, N)), axis=0))


def launch(x):
    out = torch.empty(1)
    total[(1,)](x, out, N=x.numel())
    interpreter = sys.modules["triton.runtime.interpreter"]
    return out, interpreter.interpreter_builder.options.sanitize_overflow
"""


def test_a_worker_speeds_up_its_interpreter_before_it_launches_a_kernel() -> None:
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    sandbox = Sandbox({"kernel.py": KERNEL}, limits, INTERPRETED, time.monotonic() + 1200)
    kernel = Submission(sandbox, "candidate").module("kernel")
    try:
        launches, _, (out, sanitizes_overflow) = kernel.call_counting_launches(
            "launch", torch.ones(8)
        )
    finally:
        sandbox.close()
    assert (launches, out.tolist(), sanitizes_overflow) == (1, [8.0], False)
