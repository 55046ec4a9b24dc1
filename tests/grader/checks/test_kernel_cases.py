"""The case of `check_large_logits` holds what its docstring says it tests: scores of several
hundred of both signs, and rows whose max rises in a later block, by more than float32's exp can
take (about 88), so that a kernel without the running max overflows and one that rescales its
sums wrongly is far off."""

import torch

from kernels.cases import LARGE_LOGITS, LARGE_LOGITS_SCALE, make_case

EXP_OVERFLOW = 88.7  # exp(x) is inf in float32 past this


def row_scores(case) -> list[torch.Tensor]:
    """Each (sequence, query head)'s scaled scores over its tokens, in float64."""
    q, k = case.q.double(), case.k_cache.double()
    group = q.shape[1] // k.shape[2]
    rows = []
    for seq, length in enumerate(case.seq_lens.tolist()):
        keys = torch.cat([k[block] for block in case.block_tables[seq].tolist()])[:length]
        for head in range(q.shape[1]):
            rows.append(LARGE_LOGITS_SCALE * keys[:, head // group] @ q[seq, head])
    return rows


def test_the_large_logits_overflow_exp_and_rise_in_a_later_block() -> None:
    case = make_case(**LARGE_LOGITS)
    block_size = LARGE_LOGITS["block_size"]
    rows = row_scores(case)
    assert all(row.max() > EXP_OVERFLOW for row in rows)
    assert any(row.min() < -300 for row in rows)
    assert any(row.max() > 300 for row in rows)
    rises = [row for row in rows if row.max() - row[:block_size].max() > EXP_OVERFLOW]
    assert rises, "no row's max rises in a later block"
