"""Part 4: the Triton paged-attention kernel, against the float64 oracle.

Each case is a decode batch from `kernels.cases.make_case`: ragged lengths with partial last
blocks, shuffled block tables, NaN in every slot the kernel must not read (the tails of last
blocks, blocks no sequence owns, the block padding entries name). The output must have q's
shape and dtype, hold no NaN or Inf, be exact zeros for empty sequences, and stay within the
contract's relative tolerance elsewhere. Every call must launch at least one `@triton.jit` kernel,
and compute nothing in torch outside its kernels: the worker watches the call with a torch dispatch
mode, and an aten op no wrapper needs (a matmul, a softmax, float arithmetic, a gather from the
cache: `watchers.wrapper_may_run`) fails the check. Every check here goes through `run_kernel`, so a
pure-torch answer, with or without a Triton launch beside it, scores nothing here.

Without CUDA the worker runs the kernel under Triton's interpreter on CPU tensors (a few ms per
loop iteration of a program), so the cases are small; with CUDA they run natively, and
`check_large_cases_on_cuda` adds long contexts, a batch of 64 and head dim 256 (skipped, "needs
a CUDA device", on CPU: the interpreter would take many minutes over them).
"""

import importlib.util

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.checks.support.expect import expect, same
from grader.checks.support.workloads import function_source
from grader.said import said
from grader.sandbox import cuda
from grader.sandbox.transcript import Transcript
from kernels.cases import (
    LARGE_LOGITS,
    LARGE_LOGITS_SCALE,
    TOLERANCE,
    Case,
    make_case,
    relative_error,
)
from kernels.reference import paged_attention_decode_reference

pytestmark = [
    pytest.mark.part("kernel"),
    pytest.mark.skipif(
        importlib.util.find_spec("triton") is None,
        reason=said("needs Triton, which installs on Linux only"),
    ),
]

HEAD_DIMS = (32, 64, 80, 96, 128, 256)
# GQA groups of 3, 6 and 7 query heads a kv head: any divisor is a group, not only a power of two.
GROUPS_NOT_A_POWER_OF_TWO = (
    {"num_heads": 6, "num_kv_heads": 2},
    {"num_heads": 6, "num_kv_heads": 1},
    {"num_heads": 7, "num_kv_heads": 1},
)
BLOCK_SIZES = (1, 8, 16, 32)
# A long bfloat16 context, 42 blocks of 32 tokens over two sequences (84 loop iterations on the
# interpreter, well under a second): an accumulator rounded to bfloat16 loses about 2**-9 of itself
# at each block, and over this many blocks its error passes the tolerance (about 0.06 against
# 0.016, the answer key's 0.005), where it stays under in the drawn cases of 3 blocks at most.
LONG_BFLOAT16 = {"seq_lens": [1024, 300], "num_heads": 2, "num_kv_heads": 1, "block_size": 32,
                 "dtype": torch.bfloat16}  # fmt: skip
DTYPES = tuple(TOLERANCE)
# Interpreter cost grows with programs x loop iterations: keep each case to a few dozen.
MAX_BLOCKS_PER_SEQ = 3
# Natively on CUDA only. Each crosses to the worker as bytes: the largest pool is ~25 MB.
LARGE_CASES = (
    # Long and one-token sequences in the timing suite's layout: 32/8 heads, head dim 128, bf16.
    {"seq_lens": [8191, 1, 4097, 0], "num_heads": 32, "num_kv_heads": 8, "head_dim": 128,
     "block_size": 16, "dtype": torch.bfloat16, "seed": 11},
    # A batch of 64 ragged sequences, one of them empty.
    {"seq_lens": [37 * i % 301 for i in range(64)], "num_heads": 8, "num_kv_heads": 2,
     "head_dim": 64, "block_size": 8, "dtype": torch.float16, "seed": 12},
    # Head dim 256, block size 32, MQA with 16 query heads.
    {"seq_lens": [3000, 33, 0, 1], "num_heads": 16, "num_kv_heads": 1, "head_dim": 256,
     "block_size": 32, "dtype": torch.float32, "seed": 13},
    # Head dim 80 (padded lanes), one token per block: a long loop of tiny tiles.
    {"seq_lens": [700, 513], "num_heads": 8, "num_kv_heads": 2, "head_dim": 80,
     "block_size": 1, "dtype": torch.bfloat16, "seed": 14},
)  # fmt: skip


# What a counterexample runs first where the check counted the kernel's Triton launches or the
# torch ops its wrapper ran outside them (the worker's `count_kernel_launches` and
# `torch_ops_outside_kernels`, in short): `out = watched(lambda: paged_attention_decode(...))`.
WATCH = (
    "from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes",
    "from triton.runtime.interpreter import InterpretedFunction",
    "from triton.runtime.jit import JITFunction",
    "launches, torch_ops = [], []",
    "def counted(run):",
    "    def launch(self, *args, **kwargs):",
    '        if not kwargs.get("warmup"):',
    "            launches.append(self)",
    "        with _disable_current_modes():",
    "            return run(self, *args, **kwargs)",
    "    return launch",
    "",
    "JITFunction.run = counted(JITFunction.run)",
    "InterpretedFunction.run = counted(InterpretedFunction.run)",
    "class TorchOps(TorchDispatchMode):",
    "    def __torch_dispatch__(self, op, types, args=(), kwargs=None):",
    '        torch_ops.append(f"{op.namespace}.{op.overloadpacket.__name__}")',
    "        return op(*args, **(kwargs or {}))",
    "",
    "def watched(call):",
    "    with TorchOps():",
    "        return call()",
    "",
)


def watch(transcript: Transcript, out: object) -> None:
    """The counterexample's kernel call, which gave `out`, made under `WATCH`."""
    line = transcript.producer(out)
    if line is not None:
        transcript.insert_before(line, WATCH)
        line.code = f"out = watched(lambda: {line.expression})"


def kernel_examples() -> settings:
    """A quarter of the profile's examples: each costs a kernel launch (interpreted on CPU)."""
    return settings(settings.default, max_examples=max(5, settings.default.max_examples // 4))


def run_kernel(
    submission,
    case: Case,
    description: str,
    scale: float | None = None,
    shown: bool = True,
    strided: bool = False,
):
    """The candidate's output for `case`, checked against the oracle; fails with `description`.
    The call and the assert that fails are the check's counterexample, where `shown`. With
    `strided`, q, k_cache and v_cache reach the wrapper as views of larger buffers."""
    transcript = submission.transcript if shown else Transcript("")  # a copy nobody shows
    transcript.define("from kernels.cases import make_case")
    transcript.define(
        f"q, k_cache, v_cache, block_tables, seq_lens = make_case({description}).inputs",
        q=case.q, k_cache=case.k_cache, v_cache=case.v_cache,
        block_tables=case.block_tables, seq_lens=case.seq_lens,
    )  # fmt: skip
    if strided:
        transcript.needs("import torch")
        for line in function_source("strided"):
            transcript.define(line)
        transcript.define("q, k_cache, v_cache = strided(q), strided(k_cache), strided(v_cache)")
    kwargs = {} if scale is None else {"scale": scale}
    module = submission.module("paged_attention")
    launches, torch_ops, out = module.call_counting_launches(
        "paged_attention_decode", *case.inputs, strided=strided, **kwargs
    )
    if not launches or torch_ops:
        watch(transcript, out)
    expect(
        transcript,
        launches > 0,
        said(
            "paged_attention_decode launched no @triton.jit kernel: the work must be done by a "
            "Triton kernel (a pure-torch answer scores nothing in this part){torch}",
            torch=said("; it ran {ops} in torch", ops=", ".join(torch_ops)) if torch_ops else "",
        ),
        got="len(launches) > 0",
        expected="True",
    )
    expect(
        transcript,
        not torch_ops,
        said(
            "paged_attention_decode computed attention with torch ({ops}) outside any "
            "Triton kernel: the attention must be computed by a @triton.jit kernel, so "
            "this part scores 0 (outside its kernels a wrapper may only allocate, view, "
            "copy, fill and convert tensors, and do integer bookkeeping on seq_lens and "
            "block_tables)",
            ops=", ".join(torch_ops),
        ),
        got=f"sorted(set(torch_ops) & set({sorted(torch_ops)!r}))",
        expected="[]",
    )
    judge_output(transcript, case, out, scale)


def judge_output(transcript: Transcript, case: Case, out: object, scale: float | None) -> None:
    """`out`, the kernel's output for `case`, against the contract and the oracle."""

    def name() -> str:  # only on failure: naming changes the line that gave `out`
        return transcript.source(out, "out")

    expect(
        transcript,
        isinstance(out, torch.Tensor),
        said("paged_attention_decode returned {type}", type=type(out).__name__),
        got=lambda: f"type({name()}).__name__",
        expected="'Tensor'",
    )
    same(
        transcript,
        list(out.shape),
        list(case.q.shape),
        said("the output's shape is {shape}, not q's", shape=list(out.shape)),
        got=lambda: f"list({name()}.shape)",
        expected="list(q.shape)",
    )
    same(
        transcript,
        out.dtype,
        case.q.dtype,
        said(
            "the output is {dtype}, not q's dtype {expected}",
            dtype=out.dtype,
            expected=case.q.dtype,
        ),
        got=lambda: f"{name()}.dtype",
        expected="q.dtype",
    )
    moved = out.to(case.q.device)
    empty = case.seq_lens == 0
    expect(
        transcript,
        torch.equal(moved[empty], torch.zeros_like(moved[empty])),
        said("a sequence of length 0 must give zeros"),
        got=lambda: f"{name()}[seq_lens == 0]",
        expected="torch.zeros_like(got)",
        op="equal",
    )
    expect(
        transcript,
        bool(torch.isfinite(moved).all()),
        said(
            "the output holds NaN or Inf: the kernel read a slot it must not (a tail "
            "slot, a block a padding entry names, a gap of a strided view) or overflowed"
        ),
        got=lambda: f"bool(torch.isfinite({name()}).all())",
        expected="True",
    )
    if not empty.all():
        reference = paged_attention_decode_reference(*case.inputs, scale=scale)
        error = relative_error(moved[~empty], reference[~empty])
        tolerance = TOLERANCE[case.q.dtype]
        if not error <= tolerance:
            transcript.needs("from kernels.cases import relative_error")
            transcript.needs("from kernels.reference import paged_attention_decode_reference")
        inputs = "q, k_cache, v_cache, block_tables, seq_lens" + (
            "" if scale is None else f", scale={scale!r}"
        )
        expect(
            transcript,
            error <= tolerance,
            said(
                "relative error {error} against the float64 reference (tolerance "
                "{tolerance} for {dtype})",
                error=f"{error:.3g}",
                tolerance=f"{tolerance:g}",
                dtype=str(case.q.dtype).removeprefix("torch."),
            ),
            got=lambda: (
                f"relative_error({name()}[seq_lens != 0], "
                f"paged_attention_decode_reference({inputs})[seq_lens != 0])"
            ),
            expected=f"{tolerance!r}",
            op="<=",
        )


def described(**params) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in params.items())


def build(params: dict) -> tuple[Case, str]:
    """The case `params` describe, on the grading's device (`cuda.native`), and the call that
    makes it."""
    device = {"device": "cuda"} if cuda.native() else {}
    return make_case(**params, **device), described(**params, **device)


@st.composite
def cases(draw, dtypes=DTYPES, head_dims=(32, 64, 80, 96), block_sizes=(8, 16)) -> dict:
    """Parameters of a small decode batch: MHA, GQA 2/4/8 or MQA, ragged lengths, 0 and 1."""
    num_kv_heads = draw(st.sampled_from([1, 2]))
    group = draw(st.sampled_from([1, 2, 4, 8] if num_kv_heads == 1 else [1, 2, 4]))
    block_size = draw(st.sampled_from(block_sizes))
    lengths = st.integers(0, MAX_BLOCKS_PER_SEQ * block_size)
    return {
        "seq_lens": draw(st.lists(lengths, min_size=1, max_size=3)),
        "num_heads": num_kv_heads * group,
        "num_kv_heads": num_kv_heads,
        "head_dim": draw(st.sampled_from(head_dims)),
        "block_size": block_size,
        "dtype": draw(st.sampled_from(dtypes)),
        "seed": draw(st.integers(0, 2**16)),
    }


@pytest.mark.points(2)
@pytest.mark.severity("contract")
def check_launches_a_triton_kernel(submission):
    case, description = build({"seq_lens": [5, 12]})
    run_kernel(submission, case, description)


@pytest.mark.points(5)
@pytest.mark.severity("safety")
def check_head_layouts_in_float32(submission):
    @kernel_examples()
    @given(cases(dtypes=(torch.float32,)))
    def layouts(params):
        submission.transcript.reset()
        run_kernel(submission, *build(params))

    layouts()
    for groups in GROUPS_NOT_A_POWER_OF_TWO:  # beside the drawn layouts (`cases`)
        submission.transcript.reset()
        run_kernel(submission, *build({"seq_lens": [5, 9], **groups}))
    submission.transcript.reset()  # views of larger buffers, every stride and offset unusual
    run_kernel(submission, *build({"seq_lens": [5, 9], "head_dim": 80}), strided=True)


@pytest.mark.points(4)
@pytest.mark.severity("safety")
def check_float16_and_bfloat16(submission):
    @kernel_examples()
    @given(cases(dtypes=(torch.float16, torch.bfloat16)))
    def half_precision(params):
        submission.transcript.reset()
        run_kernel(submission, *build(params))

    half_precision()
    submission.transcript.reset()
    run_kernel(submission, *build(LONG_BFLOAT16))  # beside the drawn cases (`cases`)


@pytest.mark.points(1)
@pytest.mark.severity("safety")
@pytest.mark.parametrize("head_dim", HEAD_DIMS)
def check_every_head_dim(submission, head_dim):
    dtype = DTYPES[HEAD_DIMS.index(head_dim) % len(DTYPES)]
    run_kernel(submission, *build({"seq_lens": [7, 3], "head_dim": head_dim, "dtype": dtype}))


@pytest.mark.points(1)
@pytest.mark.severity("safety")
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def check_every_block_size(submission, block_size):
    seq_lens = [2 * block_size + 1, block_size, 1]
    run_kernel(submission, *build({"seq_lens": seq_lens, "block_size": block_size}))


@pytest.mark.points(3)
@pytest.mark.severity("safety")
def check_empty_and_one_token_sequences(submission):
    run_kernel(submission, *build({"seq_lens": [0, 1, 0, 6]}))
    run_kernel(submission, *build({"seq_lens": [0, 0]}))


@pytest.mark.points(3)
@pytest.mark.severity("safety")
def check_padding_and_shared_blocks_are_handled(submission):
    # Block 4 holds NaN: only padding entries name it. Blocks 1 and 4 repeat within a table.
    tables = [[3, 1, 1, 4, 4], [1, 0, 4, 4, 4]]
    run_kernel(submission, *build({"seq_lens": [19, 10], "tables": tables}))


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_scale(submission):
    case, description = build({"seq_lens": [9, 4], "seed": 3})
    run_kernel(submission, case, description, scale=0.37)
    run_kernel(submission, case, description, scale=0.0)  # a scale, not "none given"
    run_kernel(submission, case, description)


@pytest.mark.points(1)
@pytest.mark.severity("safety")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: str(dtype).removeprefix("torch."))
def check_large_logits(submission, dtype):
    """Scores of several hundred, of both signs, as outliers among real models' attention logits
    reach: exp of a score overflows float32 past about 88, so a kernel that does not subtract its
    running max, or keeps the max of its first block while a later block's scores pass it, gives
    Inf or NaN."""
    case, description = build({**LARGE_LOGITS, "dtype": dtype})
    run_kernel(submission, case, description, scale=LARGE_LOGITS_SCALE)


@pytest.mark.points(3)
@pytest.mark.severity("safety")
@pytest.mark.skipif(not cuda.native(), reason=said("needs a CUDA device"))
def check_large_cases_on_cuda(submission):
    for params in LARGE_CASES:
        submission.transcript.reset()
        run_kernel(submission, *build(params))
