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
def attend(out_ptr, q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, scale, group, heads, tables,
           BLOCK: tl.constexpr, DIM: tl.constexpr):
    # One head of one sequence: softmax(q . K^T * scale) @ V over the blocks its table names.
    seq, head = tl.program_id(0), tl.program_id(1)
    dims, slots = tl.arange(0, DIM), tl.arange(0, BLOCK)
    q = tl.load(q_ptr + (seq * heads + head) * DIM + dims).to(tl.float32)
    length = tl.load(lens_ptr + seq)
    m, l, acc = float("-inf"), 0.0, tl.zeros([DIM], dtype=tl.float32)
    for j in range(tl.cdiv(length, BLOCK)):
        block = tl.load(table_ptr + seq * tables + j)
        rows = ((block * BLOCK + slots) * (heads // group) + head // group) * DIM
        mask = j * BLOCK + slots < length
        k = tl.load(k_ptr + rows[:, None] + dims[None, :], mask=mask[:, None], other=0.0)
        scores = tl.where(mask, tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale, -1e30)
        m_new = tl.maximum(tl.max(scores, axis=0), m)
        p, alpha = tl.exp(scores - m_new), tl.exp(m - m_new)
        v = tl.load(v_ptr + rows[:, None] + dims[None, :], mask=mask[:, None], other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        l, m = l * alpha + tl.sum(p, axis=0), m_new
    out = acc / tl.where(l > 0, l, 1.0)
    tl.store(out_ptr + (seq * heads + head) * DIM + dims, out.to(out_ptr.dtype.element_ty))

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
for dtype, heads, group, lengths in [
    (torch.float32, 6, 3, [1, 37, 0, 64]), (torch.float16, 4, 1, [5, 16]),
    (torch.bfloat16, 7, 7, [33]),
]:
    q = torch.randn(len(lengths), heads, 16, dtype=dtype)
    k, v = (torch.randn(24, 16, heads // group, 16, dtype=dtype) for _ in range(2))
    tables = torch.randperm(24, dtype=torch.int32)[: len(lengths) * 4].view(len(lengths), 4)
    out = torch.empty_like(q)
    attend[(len(lengths), heads)](out, q, k, v, tables, torch.tensor(lengths, dtype=torch.int32),
                                  0.25, group, heads, 4, BLOCK=16, DIM=16)
    for s, length in enumerate(lengths):  # the same attention, by torch
        rows = torch.arange(length)
        blocks = tables[s].long()[rows // 16] * 16 + rows % 16
        keys, values = (t.flatten(0, 1)[blocks].float().repeat_interleave(group, 1) for t in (k, v))
        weights = torch.softmax((keys * q[s].float()).sum(-1) * 0.25, dim=0)
        expected = (weights[..., None] * values).sum(0) if length else torch.zeros(heads, 16)
        assert torch.allclose(out[s].float(), expected, atol=1e-2), (dtype, s)
    digest.update(out.view(torch.uint8).numpy())
try:
    fails[(1,)](torch.zeros(4))
except Exception as error:
    raised = type(error).__name__
def patched():
    return [f"{module.__name__}.{name}" for module in (tl, tl.core)
            for name in ("program_id", "load", "arange")
            if not tl.core.is_builtin(getattr(module, name))]

counts = [patches_of(n) for n in (4, 40)]
patched_after = patched()
stray = tl.cdiv(7, 2)  # a device function the host calls, outside any launch
patches_of(4)
print(json.dumps({
    "sped_up": sped_up, "digest": digest.hexdigest(), "raised": raised, "patches": counts,
    "patched_after": patched_after, "stray": [int(stray), patched()],
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
    """A paged-attention kernel gives the same bytes (float32, float16, bfloat16, GQA groups of
    3, 1 and 7, an empty sequence), a failing launch raises as before, and a launch patches
    `triton.language` as often whether its kernel calls device functions 2 times or 20 (Triton
    alone patches again at each call), leaving nothing patched after it (Triton alone leaves
    `triton.language.core` patched); a device function the host calls works as in Triton."""
    plain, sped_up = launched("plain"), launched("sped up")
    assert sped_up["sped_up"] is True
    assert sped_up["digest"] == plain["digest"]
    assert sped_up["raised"] == plain["raised"] == "InterpreterError"
    assert sped_up["patches"][0] == sped_up["patches"][1] < plain["patches"][0]
    assert plain["patches"][0] < plain["patches"][1]
    assert sped_up["patched_after"] == []
    assert plain["patched_after"] != []
    assert sped_up["stray"] == plain["stray"]  # outside a launch, Triton's own way
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
