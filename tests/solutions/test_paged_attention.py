"""The paged-attention decode kernels against the float64 oracle (exercises/README.md part 4).

Both kernels run: the answer key's single-pass `solutions/paged_attention.py` and the split-KV
`full_kit/paged_attention_split.py` (small `blocks_per_split`, so that short test sequences
still span several splits). Natively on a CUDA device; without one, on CPU tensors under
Triton's interpreter, which costs milliseconds per loop iteration: every case is tiny.

The cases and the accuracy rule are `kernels/cases.py`'s (NaN in every slot a kernel must not
read; error relative per output row); rows of empty sequences must be exact zeros.
"""

import math
import os
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import pytest
import torch

if not torch.cuda.is_available():
    # Read when @triton.jit decorates the kernels, so before their modules are imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton", reason="Triton installs on Linux only")

from full_kit.paged_attention_split import SPLIT_TILE, paged_attention_decode_split
from kernels import cases
from kernels.cases import TOLERANCE, Case, relative_error
from kernels.reference import paged_attention_decode_reference
from solutions.paged_attention import paged_attention_decode

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
make_case = partial(cases.make_case, device=DEVICE)
DTYPES = list(TOLERANCE)
Kernel = Callable[..., torch.Tensor]
KERNELS: dict[str, Kernel] = {
    "single_pass": paged_attention_decode,
    "split_kv": partial(paged_attention_decode_split, blocks_per_split=2),
}
both_kernels = pytest.mark.parametrize("kernel", KERNELS.values(), ids=KERNELS)
# `(num_heads, num_kv_heads)`: query head h reads kv head h // (num_heads // num_kv_heads).
HEAD_LAYOUTS = {"mha": (4, 4), "gqa2": (4, 2), "gqa4": (8, 2), "mqa": (4, 1)}
# `(head_dim, block_size, dtype)`: every head dim and block size of exercises/README.md part 4, each
# head dim that needs lane masking (80, 96) in two dtypes, not the whole cross product.
SHAPES = [
    (32, 1, torch.float32),
    (64, 8, torch.bfloat16),
    (80, 16, torch.float16),
    (80, 1, torch.bfloat16),
    (96, 32, torch.float32),
    (96, 8, torch.float16),
    (128, 16, torch.bfloat16),
    (256, 32, torch.float16),
]


# --- checking outputs -----------------------------------------------------------------------


def assert_matches_reference(
    kernel: Kernel, case: Case, scale: float | None = None
) -> torch.Tensor:
    """The kernel's output has `q`'s shape and dtype, exact zeros for empty sequences, and is
    within the dtype's tolerance of the oracle elsewhere; returned for further checks."""
    out = kernel(*case.inputs, scale=scale)
    assert out.shape == case.q.shape
    assert out.dtype == case.q.dtype
    assert out.device == case.q.device
    assert not out.isnan().any(), "the kernel read a NaN slot, or divided 0 by 0"
    ref = paged_attention_decode_reference(*case.inputs, scale=scale)
    empty = case.seq_lens == 0
    assert torch.equal(out[empty], torch.zeros_like(out[empty]))
    if not empty.all():
        error = relative_error(out[~empty], ref[~empty])
        assert error <= TOLERANCE[case.q.dtype], f"relative error {error:.3g}"
    return out


# --- the cases ------------------------------------------------------------------------------


@both_kernels
@pytest.mark.parametrize(("num_heads", "num_kv_heads"), HEAD_LAYOUTS.values(), ids=HEAD_LAYOUTS)
def test_head_layouts(kernel: Kernel, num_heads: int, num_kv_heads: int) -> None:
    case = make_case([1, 9, 20], num_heads=num_heads, num_kv_heads=num_kv_heads)
    assert_matches_reference(kernel, case)


@both_kernels
def test_query_head_reads_kv_head_h_div_group(kernel: Kernel) -> None:
    """With every value of kv head `j` equal to `j + 1`, query head `h` outputs `h // 2 + 1`:
    `h // 2` differs from `h % 4` for most heads."""
    case = make_case([5, 12], num_heads=8, num_kv_heads=4)
    kv_index = torch.arange(1.0, 5.0, device=DEVICE).view(1, 1, -1, 1)
    case = replace(case, v_cache=torch.where(case.v_cache.isnan(), case.v_cache, kv_index))
    out = assert_matches_reference(kernel, case)
    expected = (torch.arange(8, device=DEVICE) // 2 + 1).float().view(1, -1, 1).expand_as(out)
    torch.testing.assert_close(out, expected)


@both_kernels
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dtypes(kernel: Kernel, dtype: torch.dtype) -> None:
    assert_matches_reference(kernel, make_case([3, 17, 40], head_dim=64, dtype=dtype))


@both_kernels
@pytest.mark.parametrize(("head_dim", "block_size", "dtype"), SHAPES, ids=str)
def test_head_dims_and_block_sizes(
    kernel: Kernel, head_dim: int, block_size: int, dtype: torch.dtype
) -> None:
    """Ragged lengths: two blocks and a partial third, exactly one block, a single token."""
    case = make_case(
        [2 * block_size + 3, block_size, 1],
        num_heads=2,
        num_kv_heads=1,
        head_dim=head_dim,
        block_size=block_size,
        dtype=dtype,
    )
    assert_matches_reference(kernel, case)


@both_kernels
def test_lengths_zero_and_one(kernel: Kernel) -> None:
    """Length 0 gives exact zeros although its table names only a NaN block; length 1 gives
    its value row exactly (one weight of exp(0) = 1, divided by 1)."""
    case = make_case([0, 1, 0, 6])
    out = assert_matches_reference(kernel, case)
    block = int(case.block_tables[1, 0])
    expected = case.v_cache[block, 0].repeat_interleave(2, dim=0)
    assert torch.equal(out[1], expected)


@both_kernels
def test_batches_with_no_token(kernel: Kernel) -> None:
    """All lengths 0, then no sequence at all: zeros, and an empty output."""
    assert_matches_reference(kernel, make_case([0, 0]))
    case = make_case([3])
    empty = replace(
        case, q=case.q[:0], block_tables=case.block_tables[:0], seq_lens=case.seq_lens[:0]
    )
    assert kernel(*empty.inputs).shape == (0, *case.q.shape[1:])


@both_kernels
def test_padding_entries_are_never_read(kernel: Kernel) -> None:
    """Wide tables whose padding entries all name the NaN block; lengths end mid-block."""
    case = make_case([5, 13], tables=[[3, 4, 4, 4], [1, 0, 4, 4]])
    assert case.k_cache[4].isnan().all()
    assert case.v_cache[2].isnan().all()  # a block no table names
    assert_matches_reference(kernel, case)


@both_kernels
def test_block_table_may_repeat_a_block(kernel: Kernel) -> None:
    """Sequence 0 reads block 1 for tokens 0-7 and again for 8-15, then block 0; sequence 1
    shares block 1 as its prefix. Block 2 is padding and NaN."""
    case = make_case([19, 10], tables=[[1, 1, 0, 2], [1, 3, 2, 2]])
    assert_matches_reference(kernel, case)


@both_kernels
def test_custom_scale(kernel: Kernel) -> None:
    case = make_case([7, 20], head_dim=96)
    out = assert_matches_reference(kernel, case, scale=0.37)
    assert not torch.allclose(out, kernel(*case.inputs))


@both_kernels
@pytest.mark.parametrize("shift", [1000.0, -1000.0])
def test_large_scores_stay_finite(kernel: Kernel, shift: float) -> None:
    """Scores of `shift` plus a unit normal: exp overflows, or underflows to 0/0, unless the
    running max is subtracted."""
    case = make_case([4, 19])
    q = torch.zeros_like(case.q)
    q[..., 0] = 1.0  # with scale 1, each score is the key's first lane
    k_cache = case.k_cache.clone()
    k_cache[..., 0] += shift
    case = replace(case, q=q, k_cache=k_cache)
    assert_matches_reference(kernel, case, scale=1.0)


@both_kernels
def test_strided_inputs(kernel: Kernel) -> None:
    """K and V as views into one `[num_blocks, 2, ...]` tensor, q a slice of a wider batch,
    the block table a column slice: the kernels follow strides, they do not copy."""
    case = make_case([6, 21])
    kv = torch.stack([case.k_cache, case.v_cache], dim=1)
    wide_q = torch.stack([case.q, torch.full_like(case.q, math.nan)], dim=2)
    wide_tables = torch.stack([case.block_tables, torch.full_like(case.block_tables, -1)], dim=2)
    strided = Case(wide_q[:, :, 0], kv[:, 0], kv[:, 1], wide_tables[..., 0], case.seq_lens)
    assert not strided.k_cache.is_contiguous()
    assert torch.equal(kernel(*strided.inputs), kernel(*case.inputs))


@pytest.mark.parametrize("blocks_per_split", [1, 3, None], ids=["one", "three", "default"])
def test_split_kv_any_split_size(blocks_per_split: int | None) -> None:
    """Splits of 1 and 3 blocks (the long sequence spans 6 and 2, the short one leaves empty
    splits behind it) and the default (a single split here)."""
    case = make_case([41, 2, 0], block_size=8)
    kernel = partial(paged_attention_decode_split, blocks_per_split=blocks_per_split)
    assert_matches_reference(kernel, case)


# --- bad inputs -----------------------------------------------------------------------------


def mutated(case: Case, **changes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return replace(case, **changes).inputs


BAD_INPUTS: dict[str, Callable[[Case], tuple[torch.Tensor, ...]]] = {
    "q_not_3d": lambda c: mutated(c, q=c.q[0]),
    "v_shape_differs": lambda c: mutated(c, v_cache=c.v_cache[:, :4]),
    "cache_head_dim_differs": lambda c: mutated(
        c, k_cache=c.k_cache[..., :16], v_cache=c.v_cache[..., :16]
    ),
    "heads_not_a_multiple": lambda c: mutated(c, q=c.q[:, :3]),
    "block_size_not_power_of_two": lambda c: mutated(
        c, k_cache=c.k_cache[:, :6], v_cache=c.v_cache[:, :6]
    ),
    "table_rows_differ": lambda c: mutated(c, block_tables=c.block_tables[:1]),
    "seq_lens_shape": lambda c: mutated(c, seq_lens=c.seq_lens[:1]),
    "float64": lambda c: mutated(
        c, q=c.q.double(), k_cache=c.k_cache.double(), v_cache=c.v_cache.double()
    ),
    "cache_dtype_differs": lambda c: mutated(c, k_cache=c.k_cache.half()),
    "int64_block_tables": lambda c: mutated(c, block_tables=c.block_tables.long()),
    "int64_seq_lens": lambda c: mutated(c, seq_lens=c.seq_lens.long()),
    "two_devices": lambda c: mutated(c, seq_lens=c.seq_lens.to("meta")),
}


@both_kernels
@pytest.mark.parametrize("bad", BAD_INPUTS.values(), ids=BAD_INPUTS)
def test_rejects_bad_inputs(kernel: Kernel, bad: Callable[[Case], tuple]) -> None:
    case = make_case([3, 9])
    with pytest.raises(ValueError):
        kernel(*bad(case))


def test_split_kv_merges_more_splits_than_one_tile() -> None:
    """One block per split and one token per block: 40 splits, merged `SPLIT_TILE` at a time,
    the last tile partly masked; the short sequence leaves the most splits empty."""
    case = make_case([2 * SPLIT_TILE + 8, 3], block_size=1, num_heads=2, num_kv_heads=1)
    kernel = partial(paged_attention_decode_split, blocks_per_split=1)
    assert_matches_reference(kernel, case)


def test_split_kv_rejects_a_split_of_no_block() -> None:
    with pytest.raises(ValueError):
        paged_attention_decode_split(*make_case([3]).inputs, blocks_per_split=0)
