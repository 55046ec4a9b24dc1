"""Paged-attention decode as a two-pass Triton kernel.

One program handles one (sequence, query head) pair. It walks the sequence's blocks twice: the
first walk only computes scores to find their global maximum, the second recomputes them,
exponentiates against that fixed maximum and accumulates both the softmax denominator and the
weighted values. No rescaling is needed because the maximum is known before any `exp`.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _block_scores(
    q_row,
    k_ptr,
    block_id,
    kv_head,
    first_token,
    seq_len,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_kd,
    scale,
    token_offsets,
    dim_offsets,
    dim_mask,
):
    """Scaled scores of one block of keys; slots at or past `seq_len` get -inf."""
    live = (first_token + token_offsets) < seq_len
    addr = (
        k_ptr
        + block_id * stride_kb
        + kv_head * stride_kh
        + token_offsets[:, None] * stride_kt
        + dim_offsets[None, :] * stride_kd
    )
    keys = tl.load(addr, mask=live[:, None] & dim_mask[None, :], other=0.0).to(tl.float32)
    scores = tl.sum(keys * q_row[None, :], axis=1) * scale
    return tl.where(live, scores, float("-inf")), live


@triton.jit
def _paged_decode_two_pass(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    tables_ptr,
    lens_ptr,
    scale,
    group_size,
    stride_qs,
    stride_qh,
    stride_qd,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_kd,
    stride_vb,
    stride_vt,
    stride_vh,
    stride_vd,
    stride_os,
    stride_oh,
    stride_od,
    stride_ts,
    stride_tb,
    stride_len,
    HEAD_DIM: tl.constexpr,
    DIM_LANES: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // group_size

    dim_offsets = tl.arange(0, DIM_LANES)
    dim_mask = dim_offsets < HEAD_DIM
    token_offsets = tl.arange(0, BLOCK_SIZE)

    seq_len = tl.load(lens_ptr + seq * stride_len)
    num_blocks = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE
    table_row = tables_ptr + seq.to(tl.int64) * stride_ts

    q_addr = q_ptr + seq.to(tl.int64) * stride_qs + head * stride_qh + dim_offsets * stride_qd
    q_row = tl.load(q_addr, mask=dim_mask, other=0.0).to(tl.float32)

    # Pass 1: the largest score over the whole sequence, kept lane-wise then reduced.
    lane_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    for j in range(0, num_blocks):
        block_id = tl.load(table_row + j * stride_tb).to(tl.int64)
        scores, _ = _block_scores(
            q_row,
            k_ptr,
            block_id,
            kv_head,
            j * BLOCK_SIZE,
            seq_len,
            stride_kb,
            stride_kt,
            stride_kh,
            stride_kd,
            scale,
            token_offsets,
            dim_offsets,
            dim_mask,
        )
        lane_max = tl.maximum(lane_max, scores)
    top = tl.max(lane_max, axis=0)

    # Pass 2: exponentials against that maximum, their sum, and the weighted values.
    lane_sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    weighted = tl.zeros([DIM_LANES], dtype=tl.float32)
    for j in range(0, num_blocks):
        block_id = tl.load(table_row + j * stride_tb).to(tl.int64)
        scores, live = _block_scores(
            q_row,
            k_ptr,
            block_id,
            kv_head,
            j * BLOCK_SIZE,
            seq_len,
            stride_kb,
            stride_kt,
            stride_kh,
            stride_kd,
            scale,
            token_offsets,
            dim_offsets,
            dim_mask,
        )
        probs = tl.where(live, tl.exp(scores - top), 0.0)
        lane_sum += probs
        v_addr = (
            v_ptr
            + block_id * stride_vb
            + kv_head * stride_vh
            + token_offsets[:, None] * stride_vt
            + dim_offsets[None, :] * stride_vd
        )
        values = tl.load(v_addr, mask=live[:, None] & dim_mask[None, :], other=0.0)
        weighted += tl.sum(probs[:, None] * values.to(tl.float32), axis=0)

    total = tl.sum(lane_sum, axis=0)
    result = tl.where(total > 0.0, weighted / tl.maximum(total, 1e-30), 0.0)
    o_addr = out_ptr + seq.to(tl.int64) * stride_os + head * stride_oh + dim_offsets * stride_od
    tl.store(o_addr, result.to(out_ptr.dtype.element_ty), mask=dim_mask)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache (see the module docstring)."""
    num_seqs, num_heads, head_dim = q.shape
    block_size = k_cache.shape[1]
    num_kv_heads = k_cache.shape[2]
    if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"{num_heads} query heads do not split over {num_kv_heads} kv heads")
    group_size = num_heads // num_kv_heads
    if scale is None:
        scale = head_dim**-0.5
    out = q.new_empty((num_seqs, num_heads, head_dim))
    if num_seqs == 0 or num_heads == 0:
        return out
    _paged_decode_two_pass[(num_seqs, num_heads)](
        q,
        k_cache,
        v_cache,
        out,
        block_tables,
        seq_lens,
        float(scale),
        group_size,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k_cache.stride(0),
        k_cache.stride(1),
        k_cache.stride(2),
        k_cache.stride(3),
        v_cache.stride(0),
        v_cache.stride(1),
        v_cache.stride(2),
        v_cache.stride(3),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        block_tables.stride(0),
        block_tables.stride(1),
        seq_lens.stride(0),
        HEAD_DIM=head_dim,
        DIM_LANES=triton.next_power_of_2(head_dim),
        BLOCK_SIZE=block_size,
    )
    return out
