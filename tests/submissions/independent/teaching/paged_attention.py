"""A Triton paged-attention decode kernel (part 4), written as a worked example.

What one decode step computes: every sequence brings one new query vector per head, and that
query attends over all the keys and values the sequence has cached so far:

    output[s, h] = softmax(q[s, h] . K^T * scale) @ V      (over the first seq_lens[s] tokens)

The twist is that K and V are not contiguous. They live in a paged pool,
`[num_blocks, block_size, num_kv_heads, head_dim]`, and `block_tables[s, j]` says which physical
block holds logical block `j` of sequence `s`. The kernel therefore walks the sequence block by
block, looking each block up in the table.

How the work is split (the "grid"): one Triton program per (sequence, query head). Each program
owns one query vector and produces one output vector. With grouped-query attention several query
heads read the same kv head: query head `h` uses kv head `h // (num_heads // num_kv_heads)`.

How a program keeps the softmax stable without seeing all scores at once ("online softmax"):
it carries three running quantities from block to block,

    running_max      the largest score seen so far,
    running_sum      sum of exp(score - running_max) over the tokens seen so far,
    weighted_values  sum of exp(score - running_max) * value over the tokens seen so far,

and when a new block raises the maximum, the two sums are multiplied by
exp(old_max - new_max), which re-expresses them relative to the new maximum. At the end,
`weighted_values / running_sum` is exactly the softmax-weighted average of the values. Because
every exponent is `score - (a max at least as large as the score)`, nothing ever overflows, even
when scores are in the hundreds.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(
    output_ptr,
    query_ptr,
    key_cache_ptr,
    value_cache_ptr,
    block_tables_ptr,
    seq_lens_ptr,
    scale,
    output_stride_seq,
    output_stride_head,
    output_stride_dim,
    query_stride_seq,
    query_stride_head,
    query_stride_dim,
    key_stride_block,
    key_stride_slot,
    key_stride_head,
    key_stride_dim,
    value_stride_block,
    value_stride_slot,
    value_stride_head,
    value_stride_dim,
    table_stride_seq,
    table_stride_entry,
    seq_lens_stride,
    query_heads_per_kv_head,
    head_dim,
    BLOCK_SIZE: tl.constexpr,
    HEAD_DIM_PADDED: tl.constexpr,
):
    # --- Which (sequence, query head) is this program responsible for? ---------------------
    seq_index = tl.program_id(0)
    query_head_index = tl.program_id(1)
    kv_head_index = query_head_index // query_heads_per_kv_head

    # --- Index vectors ----------------------------------------------------------------------
    # `tl.arange` needs a power-of-two length, so head dims like 80 or 96 are padded up to the
    # next power of two and the extra lanes are switched off by `dim_is_real`.
    dim_offsets = tl.arange(0, HEAD_DIM_PADDED)
    dim_is_real = dim_offsets < head_dim
    slot_offsets = tl.arange(0, BLOCK_SIZE)

    # --- Load this program's query vector, in float32 ---------------------------------------
    query_address = (
        query_ptr
        + seq_index * query_stride_seq
        + query_head_index * query_stride_head
        + dim_offsets * query_stride_dim
    )
    query = tl.load(query_address, mask=dim_is_real, other=0.0).to(tl.float32)

    # --- How many tokens, and so how many blocks, does this sequence have? -----------------
    seq_len = tl.load(seq_lens_ptr + seq_index * seq_lens_stride)
    num_logical_blocks = tl.cdiv(seq_len, BLOCK_SIZE)

    # --- The three running quantities of the online softmax ---------------------------------
    running_max = tl.full([], float("-inf"), tl.float32)
    running_sum = tl.full([], 0.0, tl.float32)
    weighted_values = tl.zeros([HEAD_DIM_PADDED], dtype=tl.float32)

    # --- Walk the sequence one block at a time ----------------------------------------------
    # The loop stops at the sequence's last block, so padding entries of the block table past
    # it are never read.
    for logical_block in range(0, num_logical_blocks):
        # (a) Look up where this logical block lives. int64 keeps `block * stride` from
        #     overflowing on large pools.
        physical_block = tl.load(
            block_tables_ptr + seq_index * table_stride_seq + logical_block * table_stride_entry
        ).to(tl.int64)

        # (b) Which slots of the block hold real tokens? Only the last block can be partly
        #     filled; its tail holds garbage (possibly NaN), which the masks never load.
        token_positions = logical_block * BLOCK_SIZE + slot_offsets
        token_is_real = token_positions < seq_len
        tile_mask = token_is_real[:, None] & dim_is_real[None, :]

        # (c) Load the [BLOCK_SIZE, HEAD_DIM] tile of keys and score every token.
        key_addresses = (
            key_cache_ptr
            + physical_block * key_stride_block
            + slot_offsets[:, None] * key_stride_slot
            + kv_head_index * key_stride_head
            + dim_offsets[None, :] * key_stride_dim
        )
        keys = tl.load(key_addresses, mask=tile_mask, other=0.0).to(tl.float32)
        scores = tl.sum(keys * query[None, :], axis=1) * scale
        scores = tl.where(token_is_real, scores, float("-inf"))

        # (d) STEP 1 - the maximum. The new running max is the larger of the old one and the
        #     best score in this block. (At least one token of the block is real, so it is
        #     finite.)
        block_max = tl.max(scores, axis=0)
        new_max = tl.maximum(running_max, block_max)

        # (e) STEP 2 - rescale. The sums so far were measured against the old max; multiply
        #     them by exp(old_max - new_max) to measure them against the new one. On the first
        #     block the old max is -inf, the factor is 0, and the (zero) sums stay zero.
        rescale_factor = tl.exp(running_max - new_max)
        running_sum = running_sum * rescale_factor
        weighted_values = weighted_values * rescale_factor

        # (f) STEP 3 - sum. Exponentiate this block's scores against the new max (masked slots
        #     give exp(-inf) = 0) and add them, and the values they weight, to the sums.
        probabilities = tl.exp(scores - new_max)
        running_sum = running_sum + tl.sum(probabilities, axis=0)

        value_addresses = (
            value_cache_ptr
            + physical_block * value_stride_block
            + slot_offsets[:, None] * value_stride_slot
            + kv_head_index * value_stride_head
            + dim_offsets[None, :] * value_stride_dim
        )
        values = tl.load(value_addresses, mask=tile_mask, other=0.0).to(tl.float32)
        weighted_values = weighted_values + tl.sum(probabilities[:, None] * values, axis=0)

        # (g) Remember the max for the next block.
        running_max = new_max

    # --- Normalise and store ------------------------------------------------------------------
    # An empty sequence never entered the loop: its sums are 0 and 0/0 would be NaN. Dividing
    # by 1 instead leaves the all-zero result the contract asks for.
    safe_denominator = tl.where(running_sum > 0.0, running_sum, 1.0)
    attention_output = weighted_values / safe_denominator

    output_address = (
        output_ptr
        + seq_index * output_stride_seq
        + query_head_index * output_stride_head
        + dim_offsets * output_stride_dim
    )
    tl.store(
        output_address,
        attention_output.to(output_ptr.dtype.element_ty),
        mask=dim_is_real,
    )


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
    - `block_tables`: int32 `[num_seqs, max_blocks_per_seq]` (padding past a sequence's last
      block is never read);
    - `seq_lens`: int32 `[num_seqs]`.

    Returns `[num_seqs, num_heads, head_dim]` in `q`'s dtype. This wrapper only reads shapes and
    strides, allocates the output and launches the kernel; all the arithmetic is in the kernel.
    Every tensor is addressed through its strides, so views and slices need no copy.
    """
    # Step 1: read the sizes from the shapes.
    num_seqs, num_heads, head_dim = q.shape
    block_size = k_cache.shape[1]
    num_kv_heads = k_cache.shape[2]
    query_heads_per_kv_head = num_heads // num_kv_heads

    # Step 2: the default scale is 1/sqrt(head_dim).
    softmax_scale = head_dim**-0.5 if scale is None else float(scale)

    # Step 3: a fresh, contiguous output in q's dtype.
    output = q.new_empty((num_seqs, num_heads, head_dim))
    if num_seqs == 0 or num_heads == 0:
        return output

    # Step 4: one program per (sequence, query head).
    grid = (num_seqs, num_heads)
    _paged_decode_kernel[grid](
        output,
        q,
        k_cache,
        v_cache,
        block_tables,
        seq_lens,
        softmax_scale,
        output.stride(0),
        output.stride(1),
        output.stride(2),
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
        query_heads_per_kv_head,
        head_dim,
        BLOCK_SIZE=block_size,
        HEAD_DIM_PADDED=triton.next_power_of_2(head_dim),
    )
    return output
