"""Split-KV paged-attention decode (flash-decoding) for long contexts and small batches.

Same contract as exercises/README.md part 4, plus `blocks_per_split`; `make gpu-check` times it
beside the answer key's single-pass kernel.

Motivation
----------
The answer key (`solutions/paged_attention.py`) runs one program per (sequence, query head),
each walking its whole sequence. With few sequences and long contexts that grid has too few
programs to fill a GPU, and each one loops for a long time. Flash-decoding also splits the
sequence: each split runs the online softmax over its own range of blocks, and a second kernel
merges the partial results. Both levels are the same computation, so both kernels fold their
tiles into the running softmax with one `@triton.jit` helper, `_online_softmax_update`.

The online softmax
------------------
To compute `softmax(scores) @ values` over scores that arrive a tile at a time, a program keeps
three running values, all float32 whatever the input dtype:

    m   = max score so far
    l   = sum of exp(score - m) so far
    acc = sum of exp(score - m) * value so far     ([HEAD_DIM])

When a tile raises the max from `m` to `m'`, the old `l` and `acc` are rescaled by `exp(m - m')`
before the tile's terms are added; `acc / l` is then the softmax-weighted mean of the values so
far, and `m + log(l)` the log of the softmax's denominator (its "LSE"). `_online_softmax_update`
folds one tile: `[N]` scores (-inf where masked; at least one finite) and `[N, HEAD_DIM]`
values.

- In a split, a tile is one cache block: `BLOCK_SIZE` keys scored against the query, and their
  values (`_attend_blocks`, the block loop). The split stores `out_i = acc / l` and its
  `lse_i = m + log(l)`.
- In the merge, a tile is `SPLIT_TILE` splits: the scores are their `lse_i`, the values their
  `out_i`. This gives

      out = sum_i exp(lse_i - M) * out_i / sum_i exp(lse_i - M),    M = max_i lse_i

  which is the softmax over all the sequence's tokens, because `exp(lse_i)` is split `i`'s
  share of the softmax's denominator.

Memory layout
-------------
As in the answer key: `k_cache`, `v_cache` `[num_blocks, block_size, num_kv_heads, head_dim]`
(any strides), token `t` of sequence `s` in block `block_tables[s, t // block_size]` at slot
`t % block_size`. Two contiguous float32 scratch buffers carry the splits' results from the
first kernel to the second:

    partial_out  [num_seqs, num_heads, num_splits, head_dim]   out_i of each split
    partial_lse  [num_seqs, num_heads, num_splits]             lse_i of each split

Grid
----
1. `_split_kernel`, grid `(num_seqs, num_heads, num_splits)` with
   `num_splits = cdiv(max_blocks_per_seq, blocks_per_split)`: program `(s, h, i)` covers the
   blocks `[i * blocks_per_split, (i + 1) * blocks_per_split)` clipped to the
   `cdiv(seq_lens[s], block_size)` blocks sequence `s` holds, reading kv head
   `h // (num_heads // num_kv_heads)`. A split past the sequence's end runs no iteration and
   stores zeros and `lse = -inf` (the softmax of nothing).
2. `_merge_kernel`, grid `(num_seqs, num_heads)`: program `(s, h)` reads only the splits that
   hold tokens of sequence `s`, so a tile of splits always has one finite `lse`.

Masking
-------
Head-dim lanes past `head_dim` (`HEAD_DIM` is it rounded up to a power of two: `tl.arange`
needs one) and slots past `seq_len` are masked loads (other=0) with scores of -inf, so `exp`
gives them no weight and a NaN in an unread slot never reaches the output; padding table
entries are never loaded; an empty sequence merges no split and gives zeros (the final
division is guarded).
"""

import torch
import triton
import triton.language as tl

from full_kit.decode_inputs import check_inputs

# Tokens per split by default, as vLLM's v2 paged attention: long enough to amortise the
# merge, short enough that a 4k-token context already fills 8 splits per head.
SPLIT_TOKENS = 512
SPLIT_TILE = 16  # splits the merge folds at once


@triton.jit
def _online_softmax_update(m_i, l_i, acc, scores, values):
    """`(m, l, acc)` with one tile folded in: `scores` `[N]` (-inf where masked, one finite at
    least, so the new max is finite) and float32 `values` `[N, HEAD_DIM]`."""
    m_new = tl.maximum(tl.max(scores, axis=0), m_i)
    alpha = tl.exp(m_i - m_new)  # rescales the old terms; 0 on the first tile
    p = tl.exp(scores - m_new)  # 0 where masked
    acc = acc * alpha + tl.sum(p[:, None] * values, axis=0)
    l_i = l_i * alpha + tl.sum(p, axis=0)
    return m_new, l_i, acc


@triton.jit
def _attend_blocks(
    q,
    k_cache_ptr,
    v_cache_ptr,
    k_tile,
    v_tile,
    table_ptr,
    stride_bj,
    stride_kb,
    stride_vb,
    seq_len,
    first_block,
    end_block,
    scale,
    dim_mask,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    """The online softmax `(m, l, acc)` of float32 `q` `[HEAD_DIM]` over the blocks
    `[first_block, end_block)` of one sequence (`seq_len` tokens, its block-table row at
    `table_ptr`). `k_tile`, `v_tile`: a block's `[BLOCK_SIZE, HEAD_DIM]` offsets of the kv head
    within the caches, whose block strides are `stride_kb`, `stride_vb`."""
    slots = tl.arange(0, BLOCK_SIZE)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for j in range(first_block, end_block):
        # int64: block * stride can pass 2**31 elements on a large pool.
        block = tl.load(table_ptr + j * stride_bj).to(tl.int64)
        token_mask = j * BLOCK_SIZE + slots < seq_len
        tile_mask = token_mask[:, None] & dim_mask[None, :]

        k = tl.load(k_cache_ptr + block * stride_kb + k_tile, mask=tile_mask, other=0.0)
        scores = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
        scores = tl.where(token_mask, scores, float("-inf"))  # every block holds a token
        v = tl.load(v_cache_ptr + block * stride_vb + v_tile, mask=tile_mask, other=0.0)
        m_i, l_i, acc = _online_softmax_update(m_i, l_i, acc, scores, v.to(tl.float32))
    return m_i, l_i, acc


@triton.jit
def _split_kernel(
    partial_out_ptr,
    partial_lse_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    scale,
    head_dim,
    group_size,
    blocks_per_split,
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
    stride_bs,
    stride_bj,
    stride_ps,
    stride_ph,
    stride_pi,
    stride_ls,
    stride_lh,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    """Split `i` of `(s, h)`: the normalised attention output over its blocks, and its LSE."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    split = tl.program_id(2)
    kv_head = head // group_size

    dims = tl.arange(0, HEAD_DIM)
    dim_mask = dims < head_dim
    slots = tl.arange(0, BLOCK_SIZE)
    q = tl.load(q_ptr + seq * stride_qs + head * stride_qh + dims * stride_qd, mask=dim_mask)
    seq_len = tl.load(seq_lens_ptr + seq)
    first_block = split * blocks_per_split
    end_block = tl.minimum(first_block + blocks_per_split, tl.cdiv(seq_len, BLOCK_SIZE))

    # A block's offsets that do not depend on which block it is: the slot rows, the head's lanes.
    k_tile = slots[:, None] * stride_kt + kv_head * stride_kh + dims[None, :] * stride_kd
    v_tile = slots[:, None] * stride_vt + kv_head * stride_vh + dims[None, :] * stride_vd
    m_i, l_i, acc = _attend_blocks(
        q.to(tl.float32),
        k_cache_ptr,
        v_cache_ptr,
        k_tile,
        v_tile,
        block_tables_ptr + seq * stride_bs,
        stride_bj,
        stride_kb,
        stride_vb,
        seq_len,
        first_block,
        end_block,
        scale,
        dim_mask,
        BLOCK_SIZE,
        HEAD_DIM,
    )

    # An empty split keeps m_i = -inf and l_i = 0: it stores zeros and lse = -inf.
    l_safe = tl.where(l_i > 0, l_i, 1.0)
    out_offsets = seq * stride_ps + head * stride_ph + split * stride_pi + dims
    tl.store(partial_out_ptr + out_offsets, acc / l_safe, mask=dim_mask)
    tl.store(partial_lse_ptr + seq * stride_ls + head * stride_lh + split, m_i + tl.log(l_safe))


@triton.jit
def _merge_kernel(
    out_ptr,
    partial_out_ptr,
    partial_lse_ptr,
    seq_lens_ptr,
    head_dim,
    blocks_per_split,
    stride_ps,
    stride_ph,
    stride_pi,
    stride_ls,
    stride_lh,
    stride_os,
    stride_oh,
    stride_od,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    SPLIT_TILE: tl.constexpr,
):
    """`out[s, h]`: the LSE-weighted mean of the partial outputs of the non-empty splits."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.arange(0, HEAD_DIM)
    dim_mask = dims < head_dim
    tile = tl.arange(0, SPLIT_TILE)

    seq_len = tl.load(seq_lens_ptr + seq)
    num_splits = tl.cdiv(tl.cdiv(seq_len, BLOCK_SIZE), blocks_per_split)  # those with a token
    partial_rows = partial_out_ptr + seq * stride_ps + head * stride_ph + dims[None, :]
    lse_row = partial_lse_ptr + seq * stride_ls + head * stride_lh

    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for first in range(0, num_splits, SPLIT_TILE):
        # Split `first` holds a token, so the tile has one finite lse; the rest are masked.
        splits = first + tile
        split_mask = splits < num_splits
        lse = tl.load(lse_row + splits, mask=split_mask, other=float("-inf"))
        tile_mask = split_mask[:, None] & dim_mask[None, :]
        partial = tl.load(partial_rows + splits[:, None] * stride_pi, mask=tile_mask, other=0.0)
        m_i, l_i, acc = _online_softmax_update(m_i, l_i, acc, lse, partial)

    out = acc / tl.where(l_i > 0, l_i, 1.0)  # l_i == 0 only for an empty sequence: zeros
    out_offsets = seq * stride_os + head * stride_oh + dims * stride_od
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=dim_mask)


def paged_attention_decode_split(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
    blocks_per_split: int | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache, split along the sequence.

    Arguments, result and errors as `paged_attention_decode` (exercises/README.md part 4).
    `blocks_per_split` is how many cache blocks one program of the first kernel walks;
    it defaults to `SPLIT_TOKENS` tokens' worth (at least one block). Raises ValueError when
    it is below 1.
    """
    check_inputs(q, k_cache, v_cache, block_tables, seq_lens)
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1:3]
    scale = head_dim**-0.5 if scale is None else float(scale)
    if blocks_per_split is None:
        blocks_per_split = max(1, SPLIT_TOKENS // block_size)
    if blocks_per_split < 1:
        raise ValueError(f"blocks_per_split must be >= 1, got {blocks_per_split}")

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    num_splits = triton.cdiv(block_tables.shape[1], blocks_per_split)
    if out.numel() == 0 or num_splits == 0:
        return out.zero_()
    # Contiguous scratch: the kernels address their last dimension with unit stride.
    partial_out = q.new_empty(num_seqs, num_heads, num_splits, head_dim, dtype=torch.float32)
    partial_lse = q.new_empty(num_seqs, num_heads, num_splits, dtype=torch.float32)
    meta = {"BLOCK_SIZE": block_size, "HEAD_DIM": triton.next_power_of_2(head_dim)}

    _split_kernel[(num_seqs, num_heads, num_splits)](
        partial_out,
        partial_lse,
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        scale,
        head_dim,
        num_heads // num_kv_heads,
        blocks_per_split,
        *q.stride(),
        *k_cache.stride(),
        *v_cache.stride(),
        *block_tables.stride(),
        *partial_out.stride()[:3],
        *partial_lse.stride()[:2],
        **meta,
    )
    _merge_kernel[(num_seqs, num_heads)](
        out,
        partial_out,
        partial_lse,
        seq_lens,
        head_dim,
        blocks_per_split,
        *partial_out.stride()[:3],
        *partial_lse.stride()[:2],
        *out.stride(),
        **meta,
        SPLIT_TILE=SPLIT_TILE,
    )
    return out
