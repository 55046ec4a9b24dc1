"""The case of `check_large_logits` holds what the check says it tests, at every dtype: scores of
several hundred of both signs, past float32's exp (about 88) in every row, and rows whose max rises
in a later block by more than that, so that a kernel without the running max, or one that keeps
its first block's, overflows; and no near tie between a row's two largest scores, where a correct
kernel's rounding would move its output most."""

import pytest
import torch

from kernels.cases import LARGE_LOGITS, LARGE_LOGITS_SCALE, TOLERANCE, make_case
from kernels.reference import gather_reference

EXP_OVERFLOW = 88.7  # exp(x) is inf in float32 past this


def row_scores(dtype: torch.dtype) -> list[torch.Tensor]:
    """Each (sequence, query head)'s scaled scores over its tokens, in float64, for the case at
    `dtype`: the reference's, from its own gather."""
    case = make_case(**LARGE_LOGITS, dtype=dtype)
    group = case.q.shape[1] // case.k_cache.shape[2]
    rows = []
    for seq, length in enumerate(case.seq_lens.tolist()):
        keys = gather_reference(case.k_cache, case.block_tables[seq].tolist(), length)
        keys = keys.repeat_interleave(group, dim=1)
        rows += list(LARGE_LOGITS_SCALE * torch.einsum("hd,thd->ht", case.q[seq].double(), keys))
    return rows


@pytest.mark.parametrize("dtype", TOLERANCE, ids=str)
def test_the_large_logits_overflow_exp_and_rise_in_a_later_block(dtype: torch.dtype) -> None:
    rows = row_scores(dtype)
    block_size = LARGE_LOGITS["block_size"]
    assert all(row.max() > EXP_OVERFLOW for row in rows)
    assert any(row.min() < -300 for row in rows)
    assert any(row.max() > 300 for row in rows)
    rises = [row for row in rows if row.max() - row[:block_size].max() > EXP_OVERFLOW]
    assert rises, "no row's max rises in a later block"
    gaps = [float(row.topk(2).values[0] - row.topk(2).values[1]) for row in rows]
    assert min(gaps) > 1.0, gaps
