"""Paged-attention decode in Triton.

Launch grid: axis 0 walks the query heads, axis 1 the sequences, one program per pair. A program
streams its sequence's cached tokens in tiles of TILE tokens (a whole number of blocks); each
token finds its physical block through the block table, so the cache is never copied. The
softmax runs online in base 2: the query is pre-multiplied by `scale * log2(e)`, which makes
`exp2(score - max)` equal to `exp(scale * q.k - max')`.
"""

import torch
import triton
import triton.language as tl

_LOG2_E = 1.4426950408889634


@triton.jit
def _decode_kernel(
    out_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    tables_ptr,
    lens_ptr,
    qk_scale,
    group,
    q_s0,
    q_s1,
    q_s2,
    k_s0,
    k_s1,
    k_s2,
    k_s3,
    v_s0,
    v_s1,
    v_s2,
    v_s3,
    t_s0,
    t_s1,
    len_s0,
    o_s0,
    o_s1,
    o_s2,
    HEAD_DIM: tl.constexpr,
    DIM_LANES: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    TILE: tl.constexpr,
):
    head = tl.program_id(0)
    seq = tl.program_id(1)
    kv_head = head // group  # consecutive query heads share one kv head

    lanes = tl.arange(0, DIM_LANES)
    lane_ok = lanes < HEAD_DIM  # lanes past head_dim are padding: never loaded or stored

    q = tl.load(q_ptr + seq * q_s0 + head * q_s1 + lanes * q_s2, mask=lane_ok, other=0.0)
    q = q.to(tl.float32) * qk_scale  # scores now come out in log2 units

    n_tokens = tl.load(lens_ptr + seq * len_s0)
    table_row = tables_ptr + seq * t_s0
    k_base = k_ptr + kv_head * k_s2
    v_base = v_ptr + kv_head * v_s2

    # Running state: best = max score seen, total = sum of exp2(score - best),
    # acc = sum of exp2(score - best) * v. Empty so far: best = -inf, the others 0.
    best = tl.max(tl.full([TILE], float("-inf"), tl.float32), axis=0)
    total = tl.sum(tl.zeros([TILE], tl.float32), axis=0)
    acc = tl.zeros([DIM_LANES], tl.float32)

    for start in range(0, n_tokens, TILE):
        tok = start + tl.arange(0, TILE)
        live = tok < n_tokens  # tokens past seq_len: no table entry, no cache row is read
        block = tl.load(table_row + (tok // BLOCK_SIZE) * t_s1, mask=live, other=0)
        block = block.to(tl.int64)
        within = tok % BLOCK_SIZE
        tile_ok = live[:, None] & lane_ok[None, :]

        k_addr = k_base + block[:, None] * k_s0 + within[:, None] * k_s1 + lanes[None, :] * k_s3
        k = tl.load(k_addr, mask=tile_ok, other=0.0).to(tl.float32)
        score = tl.sum(k * q[None, :], axis=1)
        score = tl.where(live, score, float("-inf"))

        # The first tile always has a live token, so new_best is finite from here on.
        new_best = tl.maximum(best, tl.max(score, axis=0))
        shrink = tl.exp2(best - new_best)
        weight = tl.exp2(score - new_best)

        v_addr = v_base + block[:, None] * v_s0 + within[:, None] * v_s1 + lanes[None, :] * v_s3
        v = tl.load(v_addr, mask=tile_ok, other=0.0).to(tl.float32)

        total = total * shrink + tl.sum(weight, axis=0)
        acc = acc * shrink + tl.sum(weight[:, None] * v, axis=0)
        best = new_best

    # An empty sequence leaves total == 0 and acc == 0: divide by 1 to return zeros.
    denom = tl.where(total > 0.0, total, 1.0)
    result = acc / denom
    o_addr = out_ptr + seq * o_s0 + head * o_s1 + lanes * o_s2
    tl.store(o_addr, result.to(out_ptr.dtype.element_ty), mask=lane_ok)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache.

    Shapes: q `[num_seqs, num_heads, head_dim]`, k_cache and v_cache
    `[num_blocks, block_size, num_kv_heads, head_dim]`, block_tables int32
    `[num_seqs, max_blocks_per_seq]`, seq_lens int32 `[num_seqs]`. Returns
    `[num_seqs, num_heads, head_dim]` in q's dtype.
    """
    num_seqs, num_heads, head_dim = q.shape
    block_size = k_cache.shape[1]
    num_kv_heads = k_cache.shape[2]
    if num_kv_heads < 1 or num_heads % num_kv_heads != 0:
        raise ValueError(f"{num_heads} query heads cannot share {num_kv_heads} kv heads")
    if scale is None:
        scale = head_dim**-0.5

    out = q.new_empty((num_seqs, num_heads, head_dim))
    if num_seqs == 0 or num_heads == 0:
        return out

    dim_lanes = triton.next_power_of_2(head_dim)
    # Roughly 4K elements per K/V tile, never fewer tokens than one block.
    tile = max(block_size, min(64, 4096 // dim_lanes))

    grid = (num_heads, num_seqs)
    _decode_kernel[grid](
        out,
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        float(scale) * _LOG2_E,
        num_heads // num_kv_heads,
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
        HEAD_DIM=head_dim,
        DIM_LANES=dim_lanes,
        BLOCK_SIZE=block_size,
        TILE=tile,
    )
    return out
