"""Paged-attention decode: one Triton program per (sequence, query head), online softmax."""

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_kernel(
    q_ptr, k_ptr, v_ptr, bt_ptr, lens_ptr, out_ptr,
    sq_s, sq_h, sq_d,
    sk_b, sk_t, sk_h, sk_d,
    sv_b, sv_t, sv_h, sv_d,
    sbt_s, sbt_b, s_len,
    scale, num_heads, group, block_size, head_dim,
    TILE: tl.constexpr, D: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    s = pid // num_heads
    h = pid % num_heads
    kvh = h // group
    d = tl.arange(0, D)
    dmask = d < head_dim
    q = tl.load(q_ptr + s * sq_s + h * sq_h + d * sq_d, mask=dmask, other=0.0).to(tl.float32)
    n = tl.load(lens_ptr + s * s_len)
    m = tl.full([], float("-inf"), tl.float32)
    total = tl.zeros([], tl.float32)
    acc = tl.zeros([D], tl.float32)
    for start in range(0, n, TILE):
        t = start + tl.arange(0, TILE)
        tmask = t < n
        blk = tl.load(bt_ptr + s * sbt_s + (t // block_size) * sbt_b, mask=tmask, other=0)
        blk = blk.to(tl.int64)
        off = t % block_size
        mask2 = tmask[:, None] & dmask[None, :]
        k_off = blk * sk_b + off * sk_t + kvh * sk_h
        k = tl.load(k_ptr + k_off[:, None] + d[None, :] * sk_d, mask=mask2, other=0.0)
        scores = tl.sum(k.to(tl.float32) * q[None, :], 1) * scale
        scores = tl.where(tmask, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, 0))
        alpha = tl.exp(m - m_new)
        p = tl.exp(scores - m_new)
        v_off = blk * sv_b + off * sv_t + kvh * sv_h
        v = tl.load(v_ptr + v_off[:, None] + d[None, :] * sv_d, mask=mask2, other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
        total = total * alpha + tl.sum(p, 0)
        m = m_new
    out = acc / tl.where(total > 0, total, 1.0)
    tl.store(out_ptr + pid * head_dim + d, out.to(out_ptr.dtype.element_ty), mask=dmask)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
    if scale is None:
        scale = head_dim**-0.5
    out = q.new_empty((num_seqs, num_heads, head_dim))
    _decode_kernel[(num_seqs * num_heads,)](
        q, k_cache, v_cache, block_tables, seq_lens, out,
        *q.stride(), *k_cache.stride(), *v_cache.stride(),
        *block_tables.stride(), seq_lens.stride(0),
        scale, num_heads, num_heads // num_kv_heads, block_size, head_dim,
        TILE=max(16, block_size), D=triton.next_power_of_2(head_dim),
    )  # fmt: skip
    return out
