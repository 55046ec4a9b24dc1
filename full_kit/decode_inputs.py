"""The input rules of a paged-attention decode (exercises/README.md part 4), for the full kit's
own implementations: the split-KV kernel and the torch baseline. The answer key keeps its own
copy of these rules, so that it stays standalone."""

import torch

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_inputs(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
) -> None:
    """Raise ValueError unless the inputs have part 4's shapes, dtypes and one device."""
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
