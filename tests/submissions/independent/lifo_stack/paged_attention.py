"""Paged-attention decode in Triton: one program per (sequence, query head).

Each program walks its sequence's block table one KV block per loop iteration, loading a
`[BLOCK_SIZE, HEAD_DIM_P]` tile of keys and values, and folds it into an online softmax
(running max, running denominator, running weighted sum of values), all in float32.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    out_ptr,
    scale,
    group_size,
    head_dim,
    q_s_seq,
    q_s_head,
    q_s_dim,
    k_s_blk,
    k_s_tok,
    k_s_head,
    k_s_dim,
    v_s_blk,
    v_s_tok,
    v_s_head,
    v_s_dim,
    t_s_seq,
    t_s_col,
    o_s_seq,
    o_s_head,
    o_s_dim,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM_P: tl.constexpr,
):
    """Attention of one query head of one sequence over its paged keys and values."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // group_size

    dims = tl.arange(0, HEAD_DIM_P)
    dim_ok = dims < head_dim
    toks = tl.arange(0, BLOCK_SIZE)

    q_row = tl.load(
        q_ptr + seq * q_s_seq + head * q_s_head + dims * q_s_dim, mask=dim_ok, other=0.0
    ).to(tl.float32)

    length = tl.load(lens_ptr + seq)
    n_blocks = (length + BLOCK_SIZE - 1) // BLOCK_SIZE

    run_max = tl.full((), float("-inf"), tl.float32)
    run_sum = tl.full((), 0.0, tl.float32)
    acc = tl.zeros((HEAD_DIM_P,), dtype=tl.float32)

    for j in range(0, n_blocks):
        phys = tl.load(table_ptr + seq * t_s_seq + j * t_s_col).to(tl.int64)
        tok_ok = (j * BLOCK_SIZE + toks) < length
        tile_ok = tok_ok[:, None] & dim_ok[None, :]

        k_offs = (
            phys * k_s_blk + toks[:, None] * k_s_tok + kv_head * k_s_head + dims[None, :] * k_s_dim
        )
        k_tile = tl.load(k_ptr + k_offs, mask=tile_ok, other=0.0).to(tl.float32)
        scores = tl.sum(k_tile * q_row[None, :], axis=1) * scale
        scores = tl.where(tok_ok, scores, float("-inf"))

        new_max = tl.maximum(run_max, tl.max(scores, axis=0))
        shrink = tl.exp(run_max - new_max)
        weights = tl.exp(scores - new_max)

        v_offs = (
            phys * v_s_blk + toks[:, None] * v_s_tok + kv_head * v_s_head + dims[None, :] * v_s_dim
        )
        v_tile = tl.load(v_ptr + v_offs, mask=tile_ok, other=0.0).to(tl.float32)

        acc = acc * shrink + tl.sum(weights[:, None] * v_tile, axis=0)
        run_sum = run_sum * shrink + tl.sum(weights, axis=0)
        run_max = new_max

    denom = tl.where(run_sum > 0.0, run_sum, 1.0)
    result = acc / denom
    tl.store(
        out_ptr + seq * o_s_seq + head * o_s_head + dims * o_s_dim,
        result.to(out_ptr.dtype.element_ty),
        mask=dim_ok,
    )


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache.

    `q` is `[num_seqs, num_heads, head_dim]`, the caches `[num_blocks, block_size,
    num_kv_heads, head_dim]`, `block_tables` int32 `[num_seqs, max_blocks]` and `seq_lens`
    int32 `[num_seqs]`. Returns `[num_seqs, num_heads, head_dim]` in `q`'s dtype.
    """
    num_seqs, num_heads, head_dim = q.shape
    block_size = k_cache.shape[1]
    num_kv_heads = k_cache.shape[2]
    group_size = num_heads // num_kv_heads
    softmax_scale = float(head_dim) ** -0.5 if scale is None else float(scale)

    out = q.new_empty((num_seqs, num_heads, head_dim))
    if num_seqs == 0 or num_heads == 0:
        return out

    q_st = q.stride()
    k_st = k_cache.stride()
    v_st = v_cache.stride()
    t_st = block_tables.stride()
    o_st = out.stride()

    grid = (num_seqs, num_heads)
    _decode_kernel[grid](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        out,
        softmax_scale,
        group_size,
        head_dim,
        q_st[0],
        q_st[1],
        q_st[2],
        k_st[0],
        k_st[1],
        k_st[2],
        k_st[3],
        v_st[0],
        v_st[1],
        v_st[2],
        v_st[3],
        t_st[0],
        t_st[1],
        o_st[0],
        o_st[1],
        o_st[2],
        BLOCK_SIZE=block_size,
        HEAD_DIM_P=triton.next_power_of_2(head_dim),
    )
    return out
