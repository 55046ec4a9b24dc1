"""Float64 oracles for the gather (part 3) and for paged-attention decode (part 4).

Written for clarity, not speed: the grader trusts these to decide what is right, so each one
follows exercises/README.md's definition as literally as it can. They read a block table only up to
the blocks the sequence's length needs, so padding entries past the last block are never touched.
"""

from collections.abc import Sequence

import torch


def token_slots(block_table: Sequence[int], seq_len: int, block_size: int) -> torch.Tensor:
    """`LongTensor[seq_len]`: token `i` lives in block `block_table[i // block_size]` at
    offset `i % block_size`, i.e. at flat slot `block * block_size + offset`.

    One token at a time, as exercises/README.md states it: the candidate bundle ships this oracle,
    so it must not show part 3's vectorised answer."""
    slots = [
        int(block_table[i // block_size]) * block_size + i % block_size for i in range(seq_len)
    ]
    return torch.tensor(slots, dtype=torch.long)


def cdiv(a: int, b: int) -> int:
    """The number of size-`b` blocks that `a` tokens fill (the ceiling of `a / b`)."""
    return (a + b - 1) // b


def gather_reference(cache: torch.Tensor, block_table: Sequence[int], seq_len: int) -> torch.Tensor:
    """`[seq_len, *cache.shape[2:]]` in float64: a sequence's cache rows in logical order.

    `cache` is `[num_blocks, block_size, ...]` (the manager's `[.., head_dim]` pool, or a
    kernel's `[.., num_kv_heads, head_dim]` K or V cache).
    """
    num_blocks, block_size = cache.shape[:2]
    needed = cdiv(seq_len, block_size)
    if len(block_table) < needed:
        raise ValueError(f"{seq_len} tokens need {needed} blocks, the table has {len(block_table)}")
    slots = token_slots(block_table[:needed], seq_len, block_size)
    return cache.reshape(num_blocks * block_size, *cache.shape[2:])[slots].double()


def paged_attention_decode_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """`[num_seqs, num_heads, head_dim]` in float64: one decode step of paged attention.

    For each sequence `s` and query head `h`: softmax(q[s, h] . K^T * scale) @ V over the
    sequence's first `seq_lens[s]` tokens, where query head `h` reads kv head
    `h // (num_heads // num_kv_heads)` (MHA, GQA and MQA alike). A sequence of length 0 gives
    zeros. Shapes as in exercises/README.md part 4.
    """
    num_seqs, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    if num_heads % num_kv_heads:
        raise ValueError(f"num_heads {num_heads} is not a multiple of num_kv_heads {num_kv_heads}")
    group = num_heads // num_kv_heads
    scale = head_dim**-0.5 if scale is None else scale
    out = torch.zeros(num_seqs, num_heads, head_dim, dtype=torch.float64, device=q.device)
    for s in range(num_seqs):
        seq_len = int(seq_lens[s])
        if seq_len == 0:
            continue
        table = block_tables[s].tolist()
        keys = gather_reference(k_cache, table, seq_len).repeat_interleave(group, dim=1)
        values = gather_reference(v_cache, table, seq_len).repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,thd->ht", q[s].double(), keys) * scale
        out[s] = torch.einsum("ht,thd->hd", scores.softmax(dim=-1), values)
    return out
