"""Paged-attention decode in Triton.

One program handles one (sequence, query head) pair. It walks the sequence's block table a block
at a time, loads that block's keys as a transposed `[HEAD_DIM, BLOCK_SIZE]` tile so the scores
fall out of a reduction over the head dimension, and folds the block into a running (online)
softmax: a running max, a running denominator and a running weighted sum of the values, all in
float32.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    tables_ptr,
    lens_ptr,
    scale,
    head_dim,
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
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM_P2: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // group_size

    dims = tl.arange(0, HEAD_DIM_P2)
    dim_ok = dims < head_dim
    rows = tl.arange(0, BLOCK_SIZE)

    seq_len = tl.load(lens_ptr + seq * stride_len).to(tl.int32)
    q_ptrs = q_ptr + seq * stride_qs + head * stride_qh + dims * stride_qd
    q = tl.load(q_ptrs, mask=dim_ok, other=0.0).to(tl.float32)

    k_head = k_ptr + kv_head * stride_kh
    v_head = v_ptr + kv_head * stride_vh
    table_row = tables_ptr + seq * stride_ts

    running_max = -float("inf")
    running_sum = 0.0
    acc = tl.zeros([HEAD_DIM_P2], dtype=tl.float32)

    for logical in range(0, tl.cdiv(seq_len, BLOCK_SIZE)):
        physical = tl.load(table_row + logical * stride_tb).to(tl.int64)
        token_ok = logical * BLOCK_SIZE + rows < seq_len

        # keys, transposed: element [d, t] is dimension d of token t of the block
        kt_ptrs = (
            k_head + physical * stride_kb + rows[None, :] * stride_kt + dims[:, None] * stride_kd
        )
        kt_mask = dim_ok[:, None] & token_ok[None, :]
        kt = tl.load(kt_ptrs, mask=kt_mask, other=0.0).to(tl.float32)

        scores = tl.sum(q[:, None] * kt, axis=0) * scale
        scores = tl.where(token_ok, scores, -float("inf"))

        new_max = tl.maximum(running_max, tl.max(scores, axis=0))
        rescale = tl.exp(running_max - new_max)
        weights = tl.exp(scores - new_max)

        v_ptrs = (
            v_head + physical * stride_vb + rows[:, None] * stride_vt + dims[None, :] * stride_vd
        )
        v_mask = token_ok[:, None] & dim_ok[None, :]
        v = tl.load(v_ptrs, mask=v_mask, other=0.0).to(tl.float32)

        acc = acc * rescale + tl.sum(weights[:, None] * v, axis=0)
        running_sum = running_sum * rescale + tl.sum(weights, axis=0)
        running_max = new_max

    denom = tl.where(running_sum > 0.0, running_sum, 1.0)
    result = acc / denom
    out_ptrs = out_ptr + seq * stride_os + head * stride_oh + dims * stride_od
    tl.store(out_ptrs, result.to(out_ptr.dtype.element_ty), mask=dim_ok)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache.

    `q` is `[num_seqs, num_heads, head_dim]`, the caches `[num_blocks, block_size, num_kv_heads,
    head_dim]`, `block_tables` int32 `[num_seqs, max_blocks]` and `seq_lens` int32 `[num_seqs]`.
    Returns `[num_seqs, num_heads, head_dim]` in `q`'s dtype.
    """
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    group_size = num_heads // num_kv_heads
    if scale is None:
        scale = head_dim**-0.5

    out = q.new_empty((num_seqs, num_heads, head_dim))
    _decode_kernel[(num_seqs, num_heads)](
        q,
        k_cache,
        v_cache,
        out,
        block_tables,
        seq_lens,
        float(scale),
        head_dim,
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
        BLOCK_SIZE=block_size,
        HEAD_DIM_P2=triton.next_power_of_2(head_dim),
    )
    return out
