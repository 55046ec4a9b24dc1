"""Paged-attention decode in Triton.

One program per (sequence, query head). Each trip of its loop covers BLOCKS_PER_ITER logical
blocks: it loads that many physical block ids from the block table as one vector, builds a
[BLOCKS_PER_ITER, BLOCK_SIZE, HEAD_DIM] tile of keys and of values through them, and folds the
tile into a running max / running sum / running weighted sum (online softmax, all in float32).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    len_ptr,
    out_ptr,
    scale,
    group,
    head_dim,
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
    stride_bts,
    stride_btb,
    stride_len,
    stride_os,
    stride_oh,
    stride_od,
    BLOCK_SIZE: tl.constexpr,
    BLOCKS_PER_ITER: tl.constexpr,
    HEAD_DIM_P2: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // group

    seq_len = tl.load(len_ptr + seq * stride_len)
    num_blocks = (seq_len + BLOCK_SIZE - 1) // BLOCK_SIZE

    d = tl.arange(0, HEAD_DIM_P2)
    d_ok = d < head_dim
    slot = tl.arange(0, BLOCK_SIZE)
    blk = tl.arange(0, BLOCKS_PER_ITER)

    q = tl.load(q_ptr + seq * stride_qs + head * stride_qh + d * stride_qd, mask=d_ok, other=0.0)
    q = q.to(tl.float32) * scale
    q3 = q[None, None, :]

    d3 = d[None, None, :]
    d_ok3 = d_ok[None, None, :]
    k_head = k_ptr + kv_head * stride_kh
    v_head = v_ptr + kv_head * stride_vh

    m_run = float("-inf")
    l_run = 0.0
    acc = tl.zeros([HEAD_DIM_P2], dtype=tl.float32)

    first = 0
    while first < num_blocks:
        logical = first + blk
        blk_ok = logical < num_blocks
        # One vector of physical block ids; entries past the last block are never read.
        phys = tl.load(bt_ptr + seq * stride_bts + logical * stride_btb, mask=blk_ok, other=0)
        phys = phys.to(tl.int64)

        pos = logical[:, None] * BLOCK_SIZE + slot[None, :]
        tok_ok = pos < seq_len
        tok_ok3 = tok_ok[:, :, None] & d_ok3

        k_off = phys[:, None, None] * stride_kb + slot[None, :, None] * stride_kt
        k = tl.load(k_head + k_off + d3 * stride_kd, mask=tok_ok3, other=0.0).to(tl.float32)
        s = tl.sum(k * q3, axis=2)
        s = tl.where(tok_ok, s, float("-inf"))

        m_tile = tl.max(tl.max(s, axis=1), axis=0)
        m_new = tl.maximum(m_run, m_tile)
        alpha = tl.exp(m_run - m_new)
        p = tl.exp(s - m_new)
        p = tl.where(tok_ok, p, 0.0)

        v_off = phys[:, None, None] * stride_vb + slot[None, :, None] * stride_vt
        v = tl.load(v_head + v_off + d3 * stride_vd, mask=tok_ok3, other=0.0).to(tl.float32)
        pv = tl.sum(tl.sum(p[:, :, None] * v, axis=1), axis=0)

        l_run = l_run * alpha + tl.sum(tl.sum(p, axis=1), axis=0)
        acc = acc * alpha + pv
        m_run = m_new
        first += BLOCKS_PER_ITER

    denom = tl.where(l_run > 0.0, l_run, 1.0)
    result = acc / denom
    o_ptrs = out_ptr + seq * stride_os + head * stride_oh + d * stride_od
    tl.store(o_ptrs, result.to(out_ptr.dtype.element_ty), mask=d_ok)


def _blocks_per_iter(block_size: int, head_dim_p2: int) -> int:
    """How many blocks one loop trip covers: about 64 tokens (32 for the widest heads)."""
    target = 64 if head_dim_p2 <= 128 else 32
    n = target // block_size
    if n < 2:
        n = 2
    if n > 16:
        n = 16
    return n


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
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    group = num_heads // num_kv_heads
    if scale is None:
        scale = head_dim**-0.5

    out = q.new_empty((num_seqs, num_heads, head_dim))
    if num_seqs == 0 or num_heads == 0:
        return out

    head_dim_p2 = triton.next_power_of_2(head_dim)
    per_iter = _blocks_per_iter(block_size, head_dim_p2)
    warps = 4 if head_dim_p2 * block_size * per_iter <= 8192 else 8

    _paged_decode_kernel[(num_seqs, num_heads)](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        out,
        float(scale),
        group,
        head_dim,
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
        block_tables.stride(0),
        block_tables.stride(1),
        seq_lens.stride(0),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        BLOCK_SIZE=block_size,
        BLOCKS_PER_ITER=per_iter,
        HEAD_DIM_P2=head_dim_p2,
        num_warps=warps,
    )
    return out
