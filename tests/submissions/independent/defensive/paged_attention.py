"""Paged-attention decode in Triton.

One program handles one (sequence, query head) pair. It walks the sequence's keys and values
a tile of TILE_TOKENS consecutive token positions at a time (one or more cache blocks: the
block id of every position is read from the block table, masked to the positions the sequence
really holds), and folds each tile into a streaming softmax kept in float32: a running maximum,
a running normaliser and a running weighted sum of values. The masks of a tile are built once
and shared by the key load, the value load and the scores. Everything outside the kernel is
validation, allocation and launch bookkeeping.
"""

import torch
import triton
import triton.language as tl

_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _tile_masks(tile_start, seq_len, dims, head_dim, TILE_TOKENS: tl.constexpr):
    """Token positions of a tile, which of them are real, and the 2-D mask of the tile."""
    positions = tile_start + tl.arange(0, TILE_TOKENS)
    token_ok = positions < seq_len
    tile_ok = token_ok[:, None] & (dims < head_dim)[None, :]
    return positions, token_ok, tile_ok


@triton.jit
def _tile_blocks(table_row_ptr, stride_table_col, positions, token_ok, BLOCK_SIZE: tl.constexpr):
    """Physical block and slot within it of each position of a tile (0 where masked)."""
    logical = positions // BLOCK_SIZE
    physical = tl.load(table_row_ptr + logical * stride_table_col, mask=token_ok, other=0)
    within = positions % BLOCK_SIZE
    return physical.to(tl.int64), within.to(tl.int64)


@triton.jit
def _load_tile(base_ptr, rows, dims, stride_dim, tile_ok):
    """A [TILE_TOKENS, HEAD_DIM_P2] float32 tile, zero where masked."""
    ptrs = base_ptr + rows[:, None] + dims[None, :] * stride_dim
    return tl.load(ptrs, mask=tile_ok, other=0.0).to(tl.float32)


@triton.jit
def _fold_tile(q, keys, values, token_ok, scale, run_max, run_sum, acc):
    """Fold one tile into the streaming softmax state (max, normaliser, weighted values)."""
    scores = tl.sum(keys * q[None, :], axis=1) * scale
    scores = tl.where(token_ok, scores, float("-inf"))
    new_max = tl.maximum(run_max, tl.max(scores, axis=0))
    rescale = tl.exp(run_max - new_max)
    weights = tl.exp(scores - new_max)
    weights = tl.where(token_ok, weights, 0.0)
    run_sum = run_sum * rescale + tl.sum(weights, axis=0)
    acc = acc * rescale + tl.sum(weights[:, None] * values, axis=0)
    return new_max, run_sum, acc


@triton.jit
def _paged_decode_kernel(
    out_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    table_ptr,
    lens_ptr,
    scale,
    head_dim,
    group_size,
    stride_q_seq,
    stride_q_head,
    stride_q_dim,
    stride_k_block,
    stride_k_token,
    stride_k_head,
    stride_k_dim,
    stride_v_block,
    stride_v_token,
    stride_v_head,
    stride_v_dim,
    stride_table_seq,
    stride_table_col,
    stride_lens,
    stride_o_seq,
    stride_o_head,
    stride_o_dim,
    BLOCK_SIZE: tl.constexpr,
    TILE_TOKENS: tl.constexpr,
    HEAD_DIM_P2: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // group_size
    seq_len = tl.load(lens_ptr + seq.to(tl.int64) * stride_lens).to(tl.int32)

    dims = tl.arange(0, HEAD_DIM_P2)
    dim_ok = dims < head_dim

    q_row = q_ptr + seq.to(tl.int64) * stride_q_seq + head.to(tl.int64) * stride_q_head
    q = tl.load(q_row + dims * stride_q_dim, mask=dim_ok, other=0.0).to(tl.float32)

    k_base = k_ptr + kv_head.to(tl.int64) * stride_k_head
    v_base = v_ptr + kv_head.to(tl.int64) * stride_v_head
    table_row = table_ptr + seq.to(tl.int64) * stride_table_seq

    run_max = tl.full((), float("-inf"), tl.float32)
    run_sum = tl.full((), 0.0, tl.float32)
    acc = tl.zeros((HEAD_DIM_P2,), dtype=tl.float32)

    for tile_start in range(0, seq_len, TILE_TOKENS):
        positions, token_ok, tile_ok = _tile_masks(tile_start, seq_len, dims, head_dim, TILE_TOKENS)
        physical, within = _tile_blocks(
            table_row, stride_table_col, positions, token_ok, BLOCK_SIZE
        )
        k_rows = physical * stride_k_block + within * stride_k_token
        v_rows = physical * stride_v_block + within * stride_v_token
        keys = _load_tile(k_base, k_rows, dims, stride_k_dim, tile_ok)
        values = _load_tile(v_base, v_rows, dims, stride_v_dim, tile_ok)
        run_max, run_sum, acc = _fold_tile(q, keys, values, token_ok, scale, run_max, run_sum, acc)

    safe_sum = tl.where(run_sum > 0.0, run_sum, 1.0)
    result = tl.where(run_sum > 0.0, acc / safe_sum, 0.0)
    o_row = out_ptr + seq.to(tl.int64) * stride_o_seq + head.to(tl.int64) * stride_o_head
    tl.store(o_row + dims * stride_o_dim, result.to(out_ptr.dtype.element_ty), mask=dim_ok)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One decode step of attention over a paged KV cache.

    - `q`: `[num_seqs, num_heads, head_dim]`;
    - `k_cache`, `v_cache`: `[num_blocks, block_size, num_kv_heads, head_dim]`;
    - `block_tables`: int32 `[num_seqs, max_blocks_per_seq]`; entries past a sequence's last
      block are padding and are never read;
    - `seq_lens`: int32 `[num_seqs]`.

    Returns `[num_seqs, num_heads, head_dim]` in `q`'s dtype.
    """
    _check(len(q.shape) == 3, f"q must be [num_seqs, num_heads, head_dim], got {tuple(q.shape)}")
    _check(len(k_cache.shape) == 4, f"k_cache must be 4-D, got {tuple(k_cache.shape)}")
    _check(
        tuple(v_cache.shape) == tuple(k_cache.shape),
        f"v_cache shape {tuple(v_cache.shape)} differs from k_cache {tuple(k_cache.shape)}",
    )
    num_seqs, num_heads, head_dim = q.shape
    _num_blocks, block_size, num_kv_heads, kv_head_dim = k_cache.shape
    _check(kv_head_dim == head_dim, f"cache head_dim {kv_head_dim} != query head_dim {head_dim}")
    _check(num_kv_heads >= 1, "the cache needs at least one kv head")
    _check(
        num_heads % num_kv_heads == 0,
        f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}",
    )
    _check(block_size >= 1, f"block_size must be >= 1, got {block_size}")
    _check(q.dtype in _SUPPORTED_DTYPES, f"unsupported dtype {q.dtype}")
    _check(
        k_cache.dtype == q.dtype and v_cache.dtype == q.dtype,
        f"q, k_cache and v_cache must share a dtype ({q.dtype}, {k_cache.dtype}, {v_cache.dtype})",
    )
    _check(
        len(block_tables.shape) == 2, f"block_tables must be 2-D, got {tuple(block_tables.shape)}"
    )
    _check(
        block_tables.shape[0] == num_seqs,
        f"block_tables has {block_tables.shape[0]} rows for {num_seqs} sequences",
    )
    _check(len(seq_lens.shape) == 1, f"seq_lens must be 1-D, got {tuple(seq_lens.shape)}")
    _check(
        seq_lens.shape[0] == num_seqs,
        f"seq_lens has {seq_lens.shape[0]} entries for {num_seqs} sequences",
    )

    if scale is None:
        scale = head_dim**-0.5
    scale = float(scale)

    out = q.new_empty((num_seqs, num_heads, head_dim))
    if num_seqs == 0 or num_heads == 0:
        return out

    head_dim_p2 = triton.next_power_of_2(head_dim)
    tile_tokens = max(block_size, 32 if head_dim_p2 <= 128 else 16)
    tile_tokens = triton.next_power_of_2(tile_tokens)
    group_size = num_heads // num_kv_heads

    grid = (num_seqs, num_heads)
    _paged_decode_kernel[grid](
        out,
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        scale,
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
        block_tables.stride(0),
        block_tables.stride(1),
        seq_lens.stride(0),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        BLOCK_SIZE=block_size,
        TILE_TOKENS=tile_tokens,
        HEAD_DIM_P2=head_dim_p2,
    )
    return out
