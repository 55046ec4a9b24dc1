"""Paged-attention decode in Triton.

Each program handles one (sequence, query head). It walks the sequence's tokens in tiles of
`TILE_N` tokens, a width chosen independently of the cache's block size: each token's
physical block comes from the block table at `token // BLOCK_SIZE`, its row at
`token % BLOCK_SIZE`. Softmax is computed online (running max, running normaliser, running
weighted sum of values), all in float32.
"""

import torch
import triton
import triton.language as tl

TILE_N = 32


@triton.jit
def _paged_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    out_ptr,
    scale,
    q_stride_s,
    q_stride_h,
    q_stride_d,
    k_stride_b,
    k_stride_t,
    k_stride_h,
    k_stride_d,
    v_stride_b,
    v_stride_t,
    v_stride_h,
    v_stride_d,
    table_stride_s,
    table_stride_b,
    lens_stride,
    out_stride_s,
    out_stride_h,
    out_stride_d,
    head_dim,
    group,
    BLOCK_SIZE: tl.constexpr,
    TILE: tl.constexpr,
    DIM: tl.constexpr,
):
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    kv_head = head // group

    dims = tl.arange(0, DIM)
    dim_ok = dims < head_dim
    q = tl.load(q_ptr + seq * q_stride_s + head * q_stride_h + dims * q_stride_d, mask=dim_ok)
    q = q.to(tl.float32)

    length = tl.load(lens_ptr + seq * lens_stride)
    lanes = tl.arange(0, TILE)

    best = tl.full([TILE], float("-inf"), tl.float32).max(axis=0)
    norm = tl.zeros([TILE], tl.float32).sum(axis=0)
    acc = tl.zeros([DIM], tl.float32)

    for start in range(0, length, TILE):
        tok = start + lanes
        live = tok < length
        block = tl.load(
            table_ptr + seq * table_stride_s + (tok // BLOCK_SIZE) * table_stride_b,
            mask=live,
            other=0,
        ).to(tl.int64)
        row = (tok % BLOCK_SIZE).to(tl.int64)
        tile_ok = live[:, None] & dim_ok[None, :]

        k_off = block * k_stride_b + row * k_stride_t + kv_head * k_stride_h
        keys = tl.load(k_ptr + k_off[:, None] + dims[None, :] * k_stride_d, mask=tile_ok, other=0.0)
        logits = tl.sum(keys.to(tl.float32) * q[None, :], axis=1) * scale
        logits = tl.where(live, logits, float("-inf"))

        new_best = tl.maximum(best, tl.max(logits, axis=0))
        shrink = tl.exp(best - new_best)
        weights = tl.exp(logits - new_best)

        v_off = block * v_stride_b + row * v_stride_t + kv_head * v_stride_h
        vals = tl.load(v_ptr + v_off[:, None] + dims[None, :] * v_stride_d, mask=tile_ok, other=0.0)
        acc = acc * shrink + tl.sum(weights[:, None] * vals.to(tl.float32), axis=0)
        norm = norm * shrink + tl.sum(weights, axis=0)
        best = new_best

    denom = tl.where(norm > 0.0, norm, 1.0)
    result = acc / denom
    out_addr = out_ptr + seq * out_stride_s + head * out_stride_h + dims * out_stride_d
    tl.store(out_addr, result.to(out_ptr.dtype.element_ty), mask=dim_ok)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache; see the module docstring."""
    num_seqs, num_heads, head_dim = q.shape
    block_size = k_cache.shape[1]
    num_kv_heads = k_cache.shape[2]
    group = num_heads // num_kv_heads
    if scale is None:
        scale = head_dim**-0.5
    out = q.new_empty((num_seqs, num_heads, head_dim))
    _paged_decode_kernel[(num_seqs, num_heads)](
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        out,
        float(scale),
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
        head_dim,
        group,
        BLOCK_SIZE=block_size,
        TILE=TILE_N,
        DIM=triton.next_power_of_2(head_dim),
    )
    return out
