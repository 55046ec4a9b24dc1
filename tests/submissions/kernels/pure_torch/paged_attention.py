"""A pure-torch answer to the contract's part 4: right, but no `@triton.jit` kernel does the
work."""

import torch


def paged_attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Each sequence's keys and values gathered through its block table, then softmax attention."""
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1:3]
    scale = head_dim**-0.5 if scale is None else float(scale)
    out = torch.zeros_like(q)
    for s in range(num_seqs):
        seq_len = int(seq_lens[s])
        if seq_len == 0:
            continue
        blocks = block_tables[s, : -(-seq_len // block_size)].long()
        keys = k_cache[blocks].flatten(0, 1)[:seq_len].float()  # [seq_len, kv_heads, head_dim]
        values = v_cache[blocks].flatten(0, 1)[:seq_len].float()
        group = num_heads // num_kv_heads
        keys = keys.repeat_interleave(group, dim=1)  # query head h reads kv head h // group
        values = values.repeat_interleave(group, dim=1)
        scores = torch.einsum("hd,thd->ht", q[s].float(), keys) * scale
        out[s] = torch.einsum("ht,thd->hd", scores.softmax(dim=-1), values).to(q.dtype)
    return out
