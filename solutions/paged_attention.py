"""Part 4 · paged-attention decode in Triton: one program per (sequence, query head).

At decode time each sequence brings one query vector per head and attends over every key and
value it has cached. Those live in a paged pool, so the kernel finds them through the
sequence's block table instead of a contiguous copy.

Memory layout
-------------
- `k_cache`, `v_cache`: `[num_blocks, block_size, num_kv_heads, head_dim]`. Token `t` of
  sequence `s` lives in physical block `block_tables[s, t // block_size]`, slot
  `t % block_size`. Any strides work: the kernel addresses every tensor through its strides.
- `block_tables[s, j]` for `j >= cdiv(seq_lens[s], block_size)` is padding: it may name any
  block (or garbage) and is never loaded.
- Slots past `seq_lens[s]` in the last block, and every block the sequence does not own, may
  hold anything (NaN included); they never reach the output.

Grid
----
`(num_seqs, num_heads)`: program `(s, h)` computes `out[s, h]` on its own, reading kv head
`h // (num_heads // num_kv_heads)`, so MHA, GQA and MQA are one code path. Under GQA the
query heads of a group each load their kv head's tiles (from L2 after the first); grouping
them into one program would save that traffic at the cost of a 2-D query tile. Decode is
memory-bound and this grid keeps the kernel simple; `full_kit/paged_attention_split.py` adds
parallelism along the sequence for long contexts and small batches.

Algorithm (the online softmax of FlashAttention)
------------------------------------------------
The program walks its sequence one block at a time. For block `j` it loads a
`[BLOCK_SIZE, HEAD_DIM]` tile of keys, scores it against the query, and updates three running
values, all in float32 whatever the input dtype:

    m   = max score so far
    l   = sum of exp(score - m) so far
    acc = sum of exp(score - m) * value so far     ([HEAD_DIM])

When a block raises the max from `m` to `m'`, the old `l` and `acc` are rescaled by
`exp(m - m')` before the block's terms are added. After the last block `out = acc / l`.
Invariant after each block: `acc / l` is the softmax-weighted mean of the values seen so far.

Masking
-------
- Head dims that are not a power of two (80, 96) are padded to the next one (`tl.arange`
  needs a power of two); the extra lanes load 0 and are never stored.
- Slots past `seq_len` in the last block are loaded as 0 by masked loads (never read, so a NaN
  there cannot leak: `0 * NaN` would be NaN) and their scores set to -inf, so `exp` gives 0.
- The loop runs `cdiv(seq_len, BLOCK_SIZE)` times, so padding table entries are never loaded.
- A sequence of length 0 runs no iteration and leaves `l == 0`: the final division is guarded
  and the output is zeros.

Contract (exercises/README.md part 4): float32, float16 or bfloat16; `head_dim` in {32, 64, 80, 96,
128, 256}; `block_size` in {1, 8, 16, 32}. The caller guarantees the data-dependent invariants the
wrapper does not check (it would have to synchronise with the device): `0 <= seq_lens[s] <=
max_blocks_per_seq * block_size`, and the first `cdiv(seq_lens[s], block_size)` entries of each
table are valid block ids.
"""

import torch
import triton
import triton.language as tl

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _paged_attention_decode_kernel(
    out_ptr,
    q_ptr,
    k_cache_ptr,
    v_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
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
    stride_bs,
    stride_bj,
    stride_os,
    stride_oh,
    stride_od,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    """`out[s, h] = softmax(q[s, h] . K^T * scale) @ V` over sequence `s`'s cached tokens."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // group_size

    dims = tl.arange(0, HEAD_DIM)  # HEAD_DIM is head_dim rounded up to a power of two
    dim_mask = dims < head_dim
    slots = tl.arange(0, BLOCK_SIZE)

    q = tl.load(q_ptr + seq * stride_qs + head * stride_qh + dims * stride_qd, mask=dim_mask)
    q = q.to(tl.float32)
    seq_len = tl.load(seq_lens_ptr + seq)

    # Per-block offsets that do not depend on the block: the slot rows and the head's lanes.
    k_tile = slots[:, None] * stride_kt + kv_head * stride_kh + dims[None, :] * stride_kd
    v_tile = slots[:, None] * stride_vt + kv_head * stride_vh + dims[None, :] * stride_vd

    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([HEAD_DIM], dtype=tl.float32)
    for j in range(tl.cdiv(seq_len, BLOCK_SIZE)):
        # int64: block * stride can pass 2**31 elements on a large pool.
        block = tl.load(block_tables_ptr + seq * stride_bs + j * stride_bj).to(tl.int64)
        token_mask = j * BLOCK_SIZE + slots < seq_len
        tile_mask = token_mask[:, None] & dim_mask[None, :]

        k = tl.load(k_cache_ptr + block * stride_kb + k_tile, mask=tile_mask, other=0.0)
        scores = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * scale
        scores = tl.where(token_mask, scores, float("-inf"))

        # Every block in the loop holds at least one token, so m_new is finite.
        m_new = tl.maximum(tl.max(scores, axis=0), m_i)
        alpha = tl.exp(m_i - m_new)  # rescales the old terms; 0 on the first block
        p = tl.exp(scores - m_new)  # 0 on the masked slots

        v = tl.load(v_cache_ptr + block * stride_vb + v_tile, mask=tile_mask, other=0.0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        l_i = l_i * alpha + tl.sum(p, axis=0)
        m_i = m_new

    out = acc / tl.where(l_i > 0, l_i, 1.0)  # l_i == 0 only for an empty sequence: zeros
    out_offsets = seq * stride_os + head * stride_oh + dims * stride_od
    tl.store(out_ptr + out_offsets, out.to(out_ptr.dtype.element_ty), mask=dim_mask)


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
    - `k_cache`, `v_cache`: `[num_blocks, block_size, num_kv_heads, head_dim]`, `q`'s dtype;
    - `block_tables`: int32 `[num_seqs, max_blocks_per_seq]`; entries past a sequence's last
      block are padding and are never read;
    - `seq_lens`: int32 `[num_seqs]`.

    Returns `[num_seqs, num_heads, head_dim]` in `q`'s dtype: for each sequence `s` and head
    `h`, softmax(q[s, h] . K^T * scale) @ V over the first `seq_lens[s]` cached tokens of kv
    head `h // (num_heads // num_kv_heads)`; zeros where `seq_lens[s] == 0`. `scale` defaults
    to `head_dim ** -0.5`. Raises ValueError on inconsistent shapes, dtypes or devices.
    """
    check_inputs(q, k_cache, v_cache, block_tables, seq_lens)
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1:3]
    scale = head_dim**-0.5 if scale is None else float(scale)

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    if out.numel() == 0:
        return out
    _paged_attention_decode_kernel[(num_seqs, num_heads)](
        out,
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        scale,
        head_dim,
        num_heads // num_kv_heads,
        *q.stride(),
        *k_cache.stride(),
        *v_cache.stride(),
        *block_tables.stride(),
        *out.stride(),
        BLOCK_SIZE=block_size,
        HEAD_DIM=triton.next_power_of_2(head_dim),
    )
    return out


def check_inputs(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
) -> None:
    """Raise ValueError unless the inputs have exercises/README.md part 4's shapes, dtypes and one
    device."""
    if q.dim() != 3:
        raise ValueError(f"q must be [num_seqs, num_heads, head_dim], got {tuple(q.shape)}")
    if k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(
            "k_cache and v_cache must both be [num_blocks, block_size, num_kv_heads, head_dim], "
            f"got {tuple(k_cache.shape)} and {tuple(v_cache.shape)}"
        )
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, cache_head_dim = k_cache.shape
    if cache_head_dim != head_dim:
        raise ValueError(f"q's head_dim is {head_dim}, the caches' is {cache_head_dim}")
    if head_dim == 0 or block_size == 0 or block_size & (block_size - 1):
        raise ValueError(
            f"need head_dim > 0 and a power-of-two block_size, got {head_dim} and {block_size}"
        )
    if num_kv_heads == 0 or num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    if block_tables.dim() != 2 or block_tables.shape[0] != num_seqs:
        raise ValueError(
            f"block_tables must be [{num_seqs}, max_blocks_per_seq], "
            f"got {tuple(block_tables.shape)}"
        )
    if seq_lens.shape != (num_seqs,):
        raise ValueError(f"seq_lens must be [{num_seqs}], got {tuple(seq_lens.shape)}")
    if q.dtype not in SUPPORTED_DTYPES or {k_cache.dtype, v_cache.dtype} != {q.dtype}:
        raise ValueError(
            "q, k_cache and v_cache must share one dtype of float32, float16, bfloat16; "
            f"got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}"
        )
    if block_tables.dtype != torch.int32 or seq_lens.dtype != torch.int32:
        raise ValueError(
            f"block_tables and seq_lens must be int32, got {block_tables.dtype}, {seq_lens.dtype}"
        )
    devices = {t.device for t in (q, k_cache, v_cache, block_tables, seq_lens)}
    if len(devices) != 1:
        raise ValueError(f"all inputs must be on one device, got {sorted(map(str, devices))}")
