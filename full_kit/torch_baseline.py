"""The plain-torch baseline `make gpu-check` times the kernels against: gather, then SDPA.

What a first implementation without a custom kernel does: copy every sequence's keys and values
out of the paged pool into a padded contiguous batch, then call
`torch.nn.functional.scaled_dot_product_attention` with a mask of the real tokens. Same
contract as exercises/README.md part 4 (it is not a submission: no Triton kernel).

- The padded length is the table's width times the block size (no device sync to find the
  longest sequence). Positions past a sequence's length are clamped to its last token, so the
  gather never reads a padding entry's block or a tail slot (their NaN would survive the mask:
  a masked weight of 0 times NaN is NaN); the mask then gives them no weight.
- GQA without copies: the query heads of a kv head are that head's "query positions",
  `q.view(num_seqs, num_kv_heads, group, head_dim)`, attending to the same gathered keys.
- An empty sequence has no token to attend to: its rows are set to zeros.
"""

import torch
import torch.nn.functional as F

from full_kit.decode_inputs import check_inputs


def gather_sdpa_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """`paged_attention_decode`'s result (exercises/README.md part 4) by a gather and one SDPA
    call. Raises ValueError as the kernels do (`full_kit.decode_inputs.check_inputs`)."""
    check_inputs(q, k_cache, v_cache, block_tables, seq_lens)
    num_seqs, num_heads, head_dim = q.shape
    _, block_size, num_kv_heads, _ = k_cache.shape
    group = num_heads // num_kv_heads
    lengths = seq_lens.long()[:, None]
    positions = torch.arange(block_tables.shape[1] * block_size, device=q.device)[None, :]
    clamped = torch.minimum(positions, (lengths - 1).clamp(min=0))
    blocks = block_tables.long().gather(1, clamped // block_size)
    slots = torch.where(lengths > 0, blocks * block_size + clamped % block_size, 0)
    keys, values = (
        cache.reshape(-1, num_kv_heads, head_dim)[slots].transpose(1, 2)
        for cache in (k_cache, v_cache)
    )  # [num_seqs, num_kv_heads, padded length, head_dim]
    mask = (positions < lengths)[:, None, None, :]
    queries = q.reshape(num_seqs, num_kv_heads, group, head_dim)
    out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=scale)
    out = out.reshape(num_seqs, num_heads, head_dim)
    return torch.where(lengths[:, :, None] > 0, out, 0).to(q.dtype)
