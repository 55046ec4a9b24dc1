"""The kernel rule (`grader/kernel_rule.py`), read on the answer key, on the kit's split-KV
kernel and on edits of them: every honest wrapper keeps it, however it is written (the answer
key's, one with integer bookkeeping and fills, split-K ones with two kernels, one that autotunes
and launches from a helper, one that launches through an object); every way to compute
attention outside a Triton kernel, or to escape the reading, breaks it at its line, saying how.
(Here, not in `tests/grader/`: the candidate kit has neither the answer key nor `full_kit/`.)"""

from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.kernel_rule import RULE, first_break

ANSWER_KEY = (KIT_ROOT / "solutions" / "paged_attention.py").read_text()
FIXTURES = KIT_ROOT / "tests" / "submissions" / "kernels"
LAUNCH_END = "        HEAD_DIM=triton.next_power_of_2(head_dim),\n    )\n    return out\n"
CHECKED = "    check_inputs(q, k_cache, v_cache, block_tables, seq_lens)\n"


def edited(old: str, new: str, source: str = ANSWER_KEY) -> str:
    assert source.count(old) == 1, old
    return source.replace(old, new)


def after_launch(code: str) -> str:
    """The answer key with `code` (indented lines) run after its launch, before `return out`."""
    return edited(LAUNCH_END, LAUNCH_END.replace("    return out\n", f"{code}    return out\n"))


def before_launch(code: str) -> str:
    return edited(CHECKED, f"{CHECKED}{code}")


SPLIT_K = """
import math
from functools import lru_cache

import torch
import triton
import triton.language as tl

SUPPORTED = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def _partial(part_ptr, q_ptr, k_ptr, SPLITS: tl.constexpr):
    tl.store(part_ptr + tl.program_id(0), tl.load(q_ptr))


@triton.jit
def _reduce(out_ptr, part_ptr, SPLITS: tl.constexpr):
    tl.store(out_ptr + tl.program_id(0), tl.load(part_ptr))


@lru_cache(maxsize=None)
def splits_for(max_len: int, block_size: int) -> int:
    return max(1, min(8, math.ceil(max_len / (block_size * 4))))


def _check(q, k_cache, v_cache, block_tables, seq_lens):
    if q.dim() != 3 or not isinstance(q, torch.Tensor):
        raise ValueError(f"q must be 3-d, got shape {tuple(q.shape)} on {q.device}")
    assert q.dtype in SUPPORTED, q.dtype
    assert k_cache.shape == v_cache.shape and q.is_contiguous() or True
    for name, t in (("block_tables", block_tables), ("seq_lens", seq_lens)):
        if t.dtype != torch.int32:
            raise ValueError(f"{name} must be int32, got {t.dtype}")


def paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale=None):
    _check(q, k_cache, v_cache, block_tables, seq_lens)
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    scale = scale or 1.0 / math.sqrt(head_dim)
    if q.numel() == 0:
        return torch.empty_like(q)
    max_len = int(seq_lens.max().item()) if seq_lens.numel() else 0
    splits = splits_for(max_len, block_size)
    lengths = [int(n) for n in seq_lens.tolist()]
    print("longest", max(lengths, default=0), "splits", splits)
    q = q.contiguous()
    part = torch.empty((num_seqs, num_heads, splits, head_dim), dtype=torch.float32,
                       device=q.device)
    out = q.new_empty(q.shape)
    grid = lambda meta: (num_seqs, num_heads, meta["SPLITS"])  # noqa: E731
    _partial[grid](part, q, k_cache.view(-1, num_kv_heads, head_dim), SPLITS=splits,
                   num_warps=4, num_stages=2)
    _reduce[(num_seqs, num_heads)](out, part, SPLITS=splits)
    out.masked_fill_((seq_lens == 0)[:, None, None], 0.0)
    return out.view(num_seqs, num_heads, head_dim)
"""

AUTOTUNED = """
from __future__ import annotations

import torch
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 32) for w in (2, 4)]


@triton.autotune(configs=CONFIGS, key=["head_dim"])
@triton.heuristics({"EVEN": lambda args: args["head_dim"] % 16 == 0})
@triton.jit
def _kernel(out_ptr, q_ptr, head_dim, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    tl.store(out_ptr, tl.load(q_ptr))


def _launch(out: torch.Tensor, q: torch.Tensor, head_dim: int) -> torch.Tensor:
    _kernel[(q.shape[0], q.shape[1])](out, q, head_dim)
    return out


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    if not torch.cuda.is_available() and q.device.type == "cuda":
        raise RuntimeError("no CUDA")
    head_dim = q.size(-1)
    scale = head_dim**-0.5 if scale is None else scale
    out = torch.zeros_like(q, dtype=torch.float32)
    strides = [*q.stride(), *k_cache.stride()]
    assert len(strides) == 7
    return _launch(out, q.to(torch.float32), head_dim).to(q.dtype)
"""


SPLIT_KV = (
    (KIT_ROOT / "full_kit" / "paged_attention_split.py").read_text()
    .replace("def paged_attention_decode_split(", "def paged_attention_decode(")
    .replace("from full_kit.decode_inputs import check_inputs\n", "")
    .replace("    check_inputs(q, k_cache, v_cache, block_tables, seq_lens)\n", "")
)  # fmt: skip
MORE_BOOKKEEPING = (
    after_launch("    lengths = seq_lens.contiguous()\n    longest = int(lengths.max())\n")
    .replace(CHECKED, CHECKED
             + "    for name, t in zip(('q', 'k_cache'), (q, k_cache)):\n"
             "        if t.dim() < 3:\n            raise ValueError(f'{name} has {t.dim()} dims')\n"
             "    config = Config()\n    config.num_warps = 8\n"
             "    def grid(meta):\n        return (q.shape[0], meta['BLOCK'])\n\n"
             "    seq_lens = seq_lens.contiguous()\n")
    .replace("\n\n@triton.jit", "\n\nclass Config:\n    def __init__(self):\n"
             "        self.num_warps = 4\n\n\ndef other_grid(num_seqs):\n"
             "    def grid(meta):\n        return (num_seqs,)\n\n    return grid\n\n\n"
             "@triton.jit", 1)
)  # fmt: skip
CLASS_WRAPPER = edited(
    "    _paged_attention_decode_kernel[(num_seqs, num_heads)](\n",
    "    LAUNCH(_paged_attention_decode_kernel, (num_seqs, num_heads),\n",
).replace(
    "\n\ndef paged_attention_decode(",
    "\n\nclass Launcher:\n    def __call__(self, kernel, grid, *args, **meta):\n"
    "        kernel[grid](*args, **meta)\n\n\nLAUNCH = Launcher()\n\n\n"
    "def paged_attention_decode(",
    1,
)


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(ANSWER_KEY, id="the answer key"),
        pytest.param(
            after_launch("    out[seq_lens == 0] = 0.0\n"
                         "    out.masked_fill_(seq_lens[:, None, None] == 0, 0.0)\n")
            .replace(CHECKED, CHECKED + "    longest = int(seq_lens.max())\n"
                     "    block_tables = block_tables.long().to(torch.int32).contiguous()\n"
                     "    needed = (seq_lens + k_cache.shape[1] - 1) // k_cache.shape[1]\n"
                     "    assert int(needed.max()) <= block_tables.shape[1] or longest == 0\n"),
            id="bookkeeping and fills",
        ),
        pytest.param(SPLIT_K, id="split-K, two kernels, helpers"),
        pytest.param(SPLIT_KV, id="the kit's split-KV kernel"),
        pytest.param(AUTOTUNED, id="autotuned, launched by a helper"),
        pytest.param((KIT_ROOT / "exercises" / "paged_attention.py").read_text(), id="the stub"),
        pytest.param(before_launch(
            "    for name, t, dims in (('q', q, 3), ('k_cache', k_cache, 4)):\n"
            "        if t.dim() != dims:\n            raise ValueError(f'{name}: {dims}')\n"
            "    tensors = (q, k_cache, v_cache)\n"
            "    assert all(isinstance(t, torch.Tensor) for t in tensors)\n"
            "    assert k_cache.nbytes < 2**40 and not q.requires_grad\n"
        ), id="loops over a tuple of tensors, measures"),
        pytest.param(CLASS_WRAPPER, id="an object of a class of the file, a kernel as argument"),
        pytest.param(MORE_BOOKKEEPING, id="named loops, nested grids, a config, seq_lens after"),
    ],
)  # fmt: skip
def test_an_honest_wrapper_keeps_the_rule(source: str) -> None:
    assert first_break(source.encode()) is None


CHEATS = {
    "pure torch": ((FIXTURES / "pure_torch" / "paged_attention.py").read_text(),
                   "line 25 `k_cache[blocks]` gathers by a computed index"),
    "arithmetic on the output": (after_launch("    out = out * 1.0\n"), "`out * 1.0` computes on"),
    "a method that computes": (before_launch("    q = q.exp()\n"), "calls .exp() on"),
    "a torch function by alias": (
        before_launch("    e = einsum('shd,shd->sh', q, q)\n")
        .replace("import torch\n", "import torch\nfrom torch import einsum\n", 1),
        "calls torch.einsum on"),
    "a literal getattr": (before_launch("    getattr(torch, 'softmax')(q, -1)\n"),
                          "calls torch.softmax on"),
    "a matmul operator": (before_launch("    s = q @ k_cache\n"), "computes on"),
    "a builtin that reduces": (before_launch("    s = sum(q)\n"), "calls `sum` on"),
    "a value read out": (before_launch("    x = float(q[0, 0, 0])\n"), "calls `float` on"),
    "the data as a list": (before_launch("    rows = q.tolist()\n"), "calls .tolist() on"),
    "iteration": (before_launch("    for row in q:\n        pass\n"), "iterates over"),
    "a gather by an index": (before_launch("    k = k_cache[block_tables[0].long()]\n"),
                             "gathers by a computed index"),
    "a truth test": (before_launch("    if q.any():\n        pass\n"), "calls .any() on"),
    "a comparison": (before_launch("    mask = q > 0\n"), "`q > 0` computes on"),
    "laundered by a copy kernel": (after_launch("    out = out.softmax(-1)\n"),
                                   "calls .softmax() on"),
    "laundered by copy_": (before_launch("    buf = torch.empty(q.shape)\n    buf.copy_(q)\n"
                                         "    buf = buf.exp()\n"), "calls .exp() on"),
    "laundered into a global": (before_launch("    STORE[0] = q\n")
                                .replace("\n\n@triton.jit", "\nSTORE = [None]\n\n\n@triton.jit", 1),
                                "stores, in an attribute or an item,"),
    "a closure": (before_launch("    def inner():\n        return q * 2\n\n    inner()\n"),
                  "`q * 2` computes on"),
    "a lambda": (before_launch("    f = lambda: q.sum()  # noqa: E731\n"), "calls .sum() on"),
    "numpy": (ANSWER_KEY.replace("import torch\n", "import numpy\nimport torch\n", 1),
              "imports numpy, outside the modules the contract lists"),
    "another file of the submission": (
        ANSWER_KEY.replace("import torch\n", "import torch\n\nfrom .scheduler import x\n", 1),
        "imports .scheduler: paged_attention.py is graded alone"),
    "exec": (before_launch("    exec('pass')\n"), "reads exec, which runs or finds code by name"),
    "getattr by a computed name": (before_launch("    getattr(torch, 'soft' + 'max')\n"),
                                   "calls getattr with a computed name"),
    "the entry bound again": (ANSWER_KEY + "\npaged_attention_decode = check_inputs\n",
                              "defines paged_attention_decode other than by one plain def"),
    "a module patched": (ANSWER_KEY + "\ntorch.Tensor.softmax = None\n",
                         "changes `torch.Tensor.softmax`"),
    "laundered by a copy into a view": (
        before_launch("    buf = torch.empty(q.shape)\n    buf.view(-1).copy_(q.reshape(-1))\n"
                      "    buf = buf.exp()\n"), "calls .exp() on"),
    "laundered by a kernel into a view": (
        after_launch("    view = out.view(-1)\n    _paged_attention_decode_kernel[(1,)](view)\n"
                     "    out.softmax(-1)\n"), "calls .softmax() on"),
    "printed to a sink": (before_launch("    print(q, file=SINK)\n"), "calls `print` on"),
    "kept on an object": (before_launch("    box = Box()\n    box.data = q\n"),
                          "changes `box.data`"),
    "a lambda that returns it": (before_launch("    k = (lambda: q)()\n"), "calls"),
    "a default argument": (before_launch("    def inner(x=q):\n        return x\n"),
                           "binds, as a default,"),
    "a generator that yields it": (
        before_launch("    (x,) = gen(q)\n    x = x.exp()\n")
        .replace("\n\n@triton.jit", "\n\ndef gen(t):\n    yield t\n\n\n@triton.jit", 1),
        "calls .exp() on"),
    "a match on it": (before_launch("    match q:\n        case _:\n            pass\n"),
                      "matches on"),
    "an entry taking *args": (
        edited("def paged_attention_decode(\n    q: torch.Tensor,\n    k_cache: torch.Tensor,\n"
               "    v_cache: torch.Tensor,\n", "def paged_attention_decode(\n    *args,\n"),
        "without q, k_cache and v_cache as its first three parameters"),
    "a buffer's abs": (before_launch("    buf = abs(torch.empty_like(q))\n"
                                     "    _paged_attention_decode_kernel[(1,)](buf, q)\n"
                                     "    buf = buf.exp()\n"), "calls .exp() on"),
    "a value made into a tensor": (before_launch("    t = torch.full_like(q, q[0, 0, 0])\n"),
                                   "calls torch.full_like on"),
    "laundered into a flat view": (
        before_launch("    buf = torch.empty_like(q)\n    flat = buf.ravel()\n"
                      "    _paged_attention_decode_kernel[(1,)](flat, q)\n    buf = buf.exp()\n"),
        "calls .exp() on"),
    "laundered through an address": (
        before_launch("    buf = torch.empty_like(q)\n"
                      "    _paged_attention_decode_kernel[(1,)](buf.data_ptr(), q)\n"
                      "    buf = buf.exp()\n"), "calls .exp() on"),
    "laundered by a kernel into a global": (
        before_launch("    global BUF\n    BUF = torch.empty_like(q)\n"
                      "    _paged_attention_decode_kernel[(1,)](BUF, q)\n")
        .replace("\n\n@triton.jit", "\nBUF = None\n\n\n@triton.jit", 1),
        "hands BUF, a name of another scope, to a kernel"),
    "a gather by the block table": (
        before_launch("    table = block_tables.tolist()\n"
                      "    k = k_cache.select(0, table[0][0])\n"), "gathers by the block table"),
    "a tensor's method named in a class": (
        before_launch("    k = k_cache.index_select(0, block_tables[0].long())\n")
        .replace("\n\n@triton.jit", "\n\nclass Names:\n    def index_select(self):\n"
                 "        pass\n\n\n@triton.jit", 1), "calls .index_select() on"),
    "a class Python calls on its own": (
        ANSWER_KEY + "\n\nclass Meta(type):\n    def __instancecheck__(cls, other):\n"
        "        return True\n", "which Python calls on its own"),
    "self bound outside a method": (ANSWER_KEY + "\nself = torch.Tensor\n", "binds self"),
    "a class made at run time": (before_launch("    box = type('box', (), {'q': q})\n"),
                                 "makes a class of"),
    "a function's code swapped by name": (
        ANSWER_KEY + "\n\ndef other(q, k, v):\n    return q\n\n\n"
        "setattr(paged_attention_decode, '__code__', getattr(other, '__code__'))\n",
        "reads __code__ by name"),
    "an object's attribute written by a launch": (
        after_launch("    runner = Runner()\n"
                     "    _paged_attention_decode_kernel[(1,)](runner.buf, q)\n"
                     "    runner.finish()\n")
        .replace("\n\n@triton.jit", "\n\nclass Runner:\n    def __init__(self):\n"
                 "        self.buf = torch.empty(4)\n\n    def finish(self):\n"
                 "        return torch.softmax(self.buf, -1)\n\n\n@triton.jit", 1),
        "calls torch.softmax on"),
    "a special method assigned": (ANSWER_KEY + "\n\nclass Box:\n    __bool__ = check_inputs\n",
                                  "gives the class Box __bool__"),
    "torch's internals": ((FIXTURES / "torch_escaping_the_dispatch_mode" / "paged_attention.py")
                          .read_text(), "uses torch.utils._python_dispatch._disable_current_modes"),
    "the worker's watchers patched": (
        (FIXTURES / "patches_the_watchers" / "paged_attention.py").read_text(), "imports sys"),
}  # fmt: skip


@pytest.mark.parametrize(("source", "said"), CHEATS.values(), ids=CHEATS)
def test_computing_outside_a_kernel_breaks_the_rule_at_its_line(source: str, said: str) -> None:
    broken = first_break(source.encode())
    assert broken is not None
    assert broken.startswith("line ")
    assert said in broken, broken
    assert broken.endswith(RULE)


def test_a_file_that_does_not_parse_is_left_to_the_syntax_check(tmp_path: Path) -> None:
    assert first_break(b"def paged_attention_decode(:\n") is None
