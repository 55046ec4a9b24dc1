"""Buggy kernels lose points in the contract's part 4, and none takes the grader down; the answer
key's kernel gets full marks (full_kit/test_shipped_kits.py grades the kit's other parts).

A buggy kernel is the answer key's `paged_attention.py` with exact text edits (each old text must
occur exactly once, so the table fails loudly when the answer key changes), or whole files from a
folder of `submissions/kernels/`. Its kernel part must score below its maximum through at least one
failed check, with no grader error. A kernel that reads or writes memory it does not own may crash
its worker: it is graded beside the allocator part, whose checks never import `paged_attention.py`,
and that part must keep full marks. A buggy kernel that no check catches yet is a strict expected
failure, whose reason says why.

Attention computed by torch or numpy, with or without a Triton launch beside it, in the kernel's
file or another, with the worker's watchers patched or not, must score 0, every check saying why:
the kernel rule (`grader/kernel_rule.py`) refuses the file before it runs. A kernel that switches
the worker's dispatch mode off is refused by it too, and the static scan flags the switch for a
reviewer.
"""

from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from full_kit.coverage import load, rules_missed
from tests.grading import (
    FIXTURES,
    NEEDS_CUDA,
    SOLUTIONS,
    Edit,
    Graded,
    concurrently,
    grade,
    grade_shared,
    module_items,
    mutant_options,
)
from tests.grading import selected_params as selected

PART = "kernel"
COVERAGE = load()  # each buggy kernel fails a check of every rule of docs/coverage.toml naming it
UNTOUCHED = "allocator"  # its checks never import paged_attention.py
# Seconds for each part (--part-timeout) where every check crashes its worker. Each kernel check
# then starts a worker that imports torch and Triton (about 5 s of CPU); for the bug to count as
# caught, a check must fail on its own before the cap, and the untouched part must end within it
# with full marks. A cap of 10 s cut even the first kernel check short in `make test` on a busy
# 2-core machine; 60 s is six times as much, and on idle cores lets about a dozen of the 19 CPU
# kernel checks crash (about 60 s of CPU).
CRASH_CAP = "60"
PART_FILE = "paged_attention.py"
NOT_RUN = f"{PART_FILE} is not run: line"  # the kernel rule refused it (grader/kernel_rule.py)

SCORES_MASK = '        scores = tl.where(token_mask, scores, float("-inf"))\n'
TILE_MASK = "tile_mask = token_mask[:, None] & dim_mask[None, :]"
TABLE_ENTRY = "block_tables_ptr + seq * stride_bs + j * stride_bj"
HEAD_DIM_ARGUMENT = "        head_dim,\n        num_heads // num_kv_heads,\n"
ACCUMULATE = "acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)"
OUTPUT_BUFFER = "    out = torch.empty_like(q, memory_format=torch.contiguous_format)\n"
LAUNCH_END = "        HEAD_DIM=triton.next_power_of_2(head_dim),\n    )\n"
TABLE_READS_UNSEEN = (
    "the checks see a stray read only through the NaN it loads: a read of a padding entry, or "
    "past the table's end, whose block is then loaded fully masked, changes no output"
)


@dataclass(frozen=True)
class Buggy:
    id: str
    edits: tuple[Edit, ...] = ()
    replaced_by: Path | None = None  # a folder of whole files in place of the answer key's
    wild: bool = False  # may crash its worker (reaches far outside its tensors): graded beside
    # the untouched part
    crashes: bool = False  # crashes its worker in every check: the parts' time is capped
    says: tuple[str, ...] = ()  # what every kernel check must fail saying (each of them)
    scores_nothing: bool = False  # its kernel part must score 0
    uncaught: str = ""  # why no kernel check catches it yet: its test is an expected failure
    replayed: bool = False  # test_counterexamples.py runs its counterexamples: they are shrunk

    @property
    def files(self) -> dict[str, Path]:
        return (
            {path.name: path for path in sorted(self.replaced_by.glob("*.py"))}
            if self.replaced_by
            else {}
        )

    @property
    def options(self) -> tuple[str, ...]:
        parts = f"{PART},{UNTOUCHED}" if self.wild else PART
        capped = ("--part-timeout", CRASH_CAP) if self.crashes else ()
        return mutant_options(("--parts", parts, *capped), self.replayed)


def kernel(old: str, new: str) -> tuple[Edit, ...]:
    return (Edit("paged_attention.py", old, new),)


def param(buggy: Buggy) -> pytest.ParameterSet:
    """`buggy` as a test parameter: an expected failure (strict) while it is uncaught."""
    uncaught = pytest.mark.xfail(strict=True, raises=AssertionError, reason=buggy.uncaught)
    return pytest.param(buggy, id=buggy.id, marks=[uncaught] if buggy.uncaught else [])


# fmt: off
BUGGY = [
    # The tail slots load as 0 and keep score 0 instead of -inf: they take a share of the softmax.
    Buggy("no_tail_mask", kernel(SCORES_MASK, "")),
    # The tail slots' NaN is loaded, and reaches the output through `p * v` with p == 0.
    Buggy("unmasked_loads_of_the_tail", kernel(TILE_MASK, "tile_mask = dim_mask[None, :]")),
    # Right for MHA and MQA only: under GQA query head h reads kv head h % num_kv_heads.
    Buggy("gqa_head_mapping_by_modulo", replayed=True, edits=kernel(
        "kv_head = head // group_size", "kv_head = head % (tl.num_programs(1) // group_size)")),
    Buggy("default_scale_one_over_head_dim", kernel(
        "scale = head_dim**-0.5 if scale is None", "scale = 1.0 / head_dim if scale is None")),
    # A scale of 0.0 taken for "none given": `scale or` the default.
    Buggy("zero_scale_taken_as_the_default", kernel(
        "scale = head_dim**-0.5 if scale is None else float(scale)",
        "scale = float(scale or head_dim**-0.5)")),
    # The group padded to a power of two (as for a `tl.arange` over it) and used for the mapping
    # too: right while every group is a power of two; a group of 3 maps head 3 to kv head 0.
    Buggy("gqa_group_padded_to_a_power_of_two", kernel(
        "        num_heads // num_kv_heads,\n",
        "        triton.next_power_of_2(num_heads // num_kv_heads),\n")),
    # No running max: exp of the raw scores, exact while every score stays small (the softmax
    # does not change when they shift), overflows once one passes about 88.
    Buggy("no_running_max", kernel(
        "m_new = tl.maximum(tl.max(scores, axis=0), m_i)",
        "m_new = tl.maximum(tl.max(scores, axis=0) * 0.0, m_i)")),
    # The max of the first block kept: exact while no later block's scores pass it by about 88.
    Buggy("max_of_the_first_block_only", kernel(
        "m_new = tl.maximum(tl.max(scores, axis=0), m_i)",
        "m_new = tl.where(j == 0, tl.max(scores, axis=0), m_i)")),
    # 0 / 0 for a sequence of length 0.
    Buggy("nan_for_an_empty_sequence", replayed=True, edits=kernel(
        "out = acc / tl.where(l_i > 0, l_i, 1.0)", "out = acc / l_i")),
    # The padded lanes count as real: head dim 80 loads 128 lanes of each row and stores 128,
    # over the next head's output and, for the last head, past the end of the output.
    Buggy("head_dim_80_treated_as_128", wild=True, edits=kernel(
        HEAD_DIM_ARGUMENT,
        "        triton.next_power_of_2(head_dim),\n        num_heads // num_kv_heads,\n")),
    # Block j's id comes from table entry j + 1: the last one from a padding entry, whose block
    # holds NaN.
    Buggy("reads_a_padding_entry", kernel(
        TABLE_ENTRY, "block_tables_ptr + seq * stride_bs + (j + 1) * stride_bj")),
    # The int32 table read as int64: two entries make one block id, terabytes past the pool.
    Buggy("reads_far_out_of_bounds", wild=True, crashes=True, edits=kernel(
        TABLE_ENTRY,
        "block_tables_ptr.to(tl.pointer_type(tl.int64)) + seq * stride_bs + j * stride_bj")),
    # One iteration per token, not per block: reads table entries past the sequence's blocks,
    # and past the table's end, but loads through them only masked slots.
    Buggy("loops_over_tokens_reads_past_the_table", uncaught=TABLE_READS_UNSEEN, edits=kernel(
        "for j in range(tl.cdiv(seq_len, BLOCK_SIZE)):", "for j in range(seq_len):")),
    # Narrow arithmetic: each stays within the tolerances on short contexts. The running sum of
    # the values, or of the weights, rounded to the input dtype at each block drifts past the
    # bfloat16 tolerance over a long context.
    Buggy("accumulates_in_the_input_dtype", (
        *kernel("acc = tl.zeros([HEAD_DIM], dtype=tl.float32)",
                "acc = tl.zeros([HEAD_DIM], dtype=v_cache_ptr.dtype.element_ty)"),
        *kernel(ACCUMULATE, "acc = (acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), "
                            "axis=0)).to(acc.dtype)"))),
    Buggy("denominator_in_the_input_dtype", kernel(
        "l_i = l_i * alpha + tl.sum(p, axis=0)",
        "l_i = (l_i * alpha + tl.sum(p, axis=0)).to(v.dtype).to(tl.float32)")),
    # float32's query rounded to float16's precision: float32 loses its tolerance only.
    Buggy("q_rounded_to_float16", kernel(
        "    q = q.to(tl.float32)\n", "    q = q.to(tl.float16).to(tl.float32)\n")),
    # Both half dtypes written through a bfloat16 output: float16 loses its tolerance only.
    Buggy("half_output_buffer_in_bfloat16", (
        *kernel(OUTPUT_BUFFER, "    half = torch.bfloat16 if q.element_size() == 2 else q.dtype\n"
                + OUTPUT_BUFFER.replace("empty_like(q,", "empty_like(q, dtype=half,")),
        *kernel(LAUNCH_END + "    return out\n", LAUNCH_END + "    return out.to(q.dtype)\n"))),
    # What the contract supports, read too narrowly.
    Buggy("bfloat16_left_out", kernel(
        "SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)",
        "SUPPORTED_DTYPES = (torch.float32, torch.float16)")),
    # Strides computed from the shapes: right for contiguous inputs only.
    Buggy("assumes_contiguous_inputs", (
        *kernel("        *q.stride(),\n", "        num_heads * head_dim, head_dim, 1,\n"),
        *kernel("        *k_cache.stride(),\n        *v_cache.stride(),\n",
                "        *(block_size * num_kv_heads * head_dim, num_kv_heads * head_dim,"
                " head_dim, 1) * 2,\n"))),
    Buggy("block_size_1_refused", kernel(
        "block_size == 0 or block_size & (block_size - 1)",
        "block_size < 8 or block_size & (block_size - 1)")),
    # The kernel rule, read by the grading process, refuses each of these before it runs.
    # Inside a kernel, torch, and a function of the file that is not a kernel.
    Buggy("kernel_calls_torch", scores_nothing=True, says=(NOT_RUN, "uses torch.sum inside"),
          edits=kernel("        l_i = l_i * alpha + tl.sum(p, axis=0)\n",
                       "        l_i = l_i * alpha + torch.sum(p)\n")),
    Buggy("kernel_calls_a_python_function", scores_nothing=True,
          says=(NOT_RUN, "calls _rescaled, not a kernel"), edits=(
        *kernel("@triton.jit\ndef _paged_attention_decode_kernel(",
                "def _rescaled(x, alpha):\n    return x * alpha\n\n\n"
                "@triton.jit\ndef _paged_attention_decode_kernel("),
        *kernel(ACCUMULATE, ACCUMULATE.replace("acc * alpha", "_rescaled(acc, alpha)")))),
    Buggy("pure_torch", replaced_by=FIXTURES / "kernels" / "pure_torch", scores_nothing=True,
          says=(NOT_RUN, "`k_cache[blocks]` gathers by a computed index")),
    # Torch attention and a launch of a kernel that does nothing.
    Buggy("torch_with_noop_launch", replaced_by=FIXTURES / "kernels" / "torch_with_noop_launch",
          says=(NOT_RUN, "`k_cache[blocks]` gathers by a computed index"), scores_nothing=True),
    # Torch attention, and at import the worker's launch counter and torch watcher replaced.
    Buggy("patches_the_watchers", replaced_by=FIXTURES / "kernels" / "patches_the_watchers",
          says=(NOT_RUN, "imports sys, outside the modules"), scores_nothing=True),
    # Attention in numpy in scheduler.py, imported by paged_attention.py beside a Triton launch.
    Buggy("numpy_in_another_file", replaced_by=FIXTURES / "kernels" / "numpy_in_another_file",
          says=(NOT_RUN, "imports .scheduler: paged_attention.py is graded alone"),
          scores_nothing=True),
]
# fmt: on
ANSWER_KEY = "answer_key"
# Torch attention with the dispatch modes switched off (`_disable_current_modes`) around it.
ESCAPE = "torch_escaping_the_dispatch_mode"
# The answer key's wrapper with the torch a wrapper may run around its kernel: copies, dtype
# moves, integer bookkeeping on seq_lens and block_tables, fills of the output.
BOOKKEEPING = "wrapper_bookkeeping"
BOOKKEEPING_EDITS = (
    *kernel(
        "    if out.numel() == 0:\n        return out\n",
        "    if out.numel() == 0:\n        return out\n"
        "    block_tables = block_tables.long().to(torch.int32).contiguous()\n"
        "    longest = int(seq_lens.max())\n"
        "    needed = (seq_lens + block_size - 1) // block_size\n"
        "    assert int(needed.max()) <= block_tables.shape[1] or longest == 0\n",
    ),
    *kernel(
        "        HEAD_DIM=triton.next_power_of_2(head_dim),\n    )\n    return out\n",
        "        HEAD_DIM=triton.next_power_of_2(head_dim),\n    )\n"
        "    out[seq_lens == 0] = 0.0\n"
        "    return out.masked_fill_((seq_lens == 0)[:, None, None], 0.0)\n",
    ),
)


@pytest.fixture(scope="module")
def graded(
    request: pytest.FixtureRequest, tmp_path_factory, shared_gradings: Path
) -> dict[str, Future[Graded]]:
    """Every selected buggy kernel graded (keyed by id; test_counterexamples.py reads some of
    the same gradings), and the answer key, the ESCAPE fixture and the BOOKKEEPING wrapper when
    their tests run (keyed so), two at a time."""
    root: Path = tmp_path_factory.mktemp("kernels")

    def job(buggy: Buggy):
        return lambda: grade_shared(
            shared_gradings, buggy.id, buggy.options, buggy.files, buggy.edits
        )

    jobs = {buggy.id: job(buggy) for buggy in selected(request, "buggy")}
    tests = {item.function for item in module_items(request)}
    if test_answer_key_gets_full_kernel_marks in tests:
        jobs[ANSWER_KEY] = lambda: grade(SOLUTIONS, "--parts", PART, out=root / ANSWER_KEY)
    if test_switching_the_dispatch_mode_off_is_flagged in tests:
        jobs[ESCAPE] = job(Buggy(ESCAPE, replaced_by=FIXTURES / "kernels" / ESCAPE))
    if test_a_wrapper_may_allocate_copy_and_count_around_its_kernel in tests:
        jobs[BOOKKEEPING] = job(Buggy(BOOKKEEPING, edits=BOOKKEEPING_EDITS))
    return concurrently(jobs)


@pytest.mark.parametrize("buggy", [param(buggy) for buggy in BUGGY])
def test_buggy_kernel_loses_points(buggy: Buggy, graded: dict[str, Future[Graded]]) -> None:
    result = graded[buggy.id].result()
    result.assert_clean()
    checks = result.part(PART)["checks"]
    caught = result.caught(PART)
    assert caught, f"no kernel check catches {buggy.id}\n{result.describe(PART)}"
    assert result.score(PART) < result.max_score(PART), result.describe(PART)
    missed = rules_missed(COVERAGE, buggy.id, caught)
    assert not missed, f"rules of docs/coverage.toml whose checks miss {buggy.id}: {missed}"
    if buggy.scores_nothing:
        assert result.score(PART) == 0, result.describe(PART)
    if buggy.says:
        silent = [
            check["id"]
            for check in checks
            if check["message"] != NEEDS_CUDA
            and (
                check["status"] != "failed"
                or not all(text in check["message"] for text in buggy.says)
            )
        ]
        assert not silent, f"checks that do not fail saying {buggy.says!r}\n{result.describe(PART)}"
    if buggy.wild:
        assert 0 < result.score(UNTOUCHED) == result.max_score(UNTOUCHED), (
            f"{buggy.id} cost points in part {UNTOUCHED}, which never imports its kernel\n"
            f"{result.describe(UNTOUCHED)}"
        )


def assert_full_marks(result: Graded) -> None:
    """Every kernel check passed, but those skipped for want of CUDA."""
    result.assert_clean()
    assert 0 < result.score(PART) == result.max_score(PART), result.describe(PART)
    unexplained = [
        check["id"]
        for check in result.part(PART)["checks"]
        if check["status"] != "passed" and check["message"] != NEEDS_CUDA
    ]
    assert not unexplained, result.describe(PART)
    if not torch.cuda.is_available():
        assert result.part(PART)["provisional"] == f"checks skipped ({NEEDS_CUDA})"


def test_answer_key_gets_full_kernel_marks(graded: dict[str, Future[Graded]]) -> None:
    assert_full_marks(graded[ANSWER_KEY].result())


def test_a_wrapper_may_allocate_copy_and_count_around_its_kernel(
    graded: dict[str, Future[Graded]],
) -> None:
    """The dispatch mode lets through what a wrapper needs besides its kernel (BOOKKEEPING)."""
    assert_full_marks(graded[BOOKKEEPING].result())


def test_switching_the_dispatch_mode_off_is_flagged(graded: dict[str, Future[Graded]]) -> None:
    """The run-time check cannot see torch work done with the dispatch modes off: the kernel
    rule refuses the file (the part scores 0), and the scan flags the switch for a reviewer."""
    result = graded[ESCAPE].result()
    result.assert_clean()
    assert result.score(PART) == 0, result.describe(PART)
    flags = [
        flag
        for flag in result.report["integrity"]
        if flag["source"] == "scan"
        and flag["file"] == PART_FILE
        and "_disable_current_modes" in flag["message"]
        and "dispatch mode" in flag["message"]
    ]
    assert flags, result.report["integrity"]
