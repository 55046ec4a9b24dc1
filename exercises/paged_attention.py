"""Part 4 · a Triton paged-attention decode kernel (30 points).

At decode time each sequence brings one new query token per head, and attends over all the
keys and values it has cached so far. Those live in the paged pool of parts 2 and 3: the kernel
must find them through each sequence's block table, never through a contiguous copy.

What to write: `paged_attention_decode` below, whose work is done by a `@triton.jit` kernel that
you write in this file. Outside its kernels the file may only allocate, view, copy, fill and
convert tensors, do integer bookkeeping and launch its kernels (the kernel rule,
exercises/README.md part 4): a file that breaks it, a pure-torch answer among them, is not run
and scores 0 for this part. The file is graded alone: it imports none of your other files. On a
CUDA device it runs natively; without one the grader runs it under Triton's interpreter
(`TRITON_INTERPRET=1`) on CPU tensors, so you can develop on a laptop. The interpreter is slow
(milliseconds per loop iteration of a program): test on small shapes.

Accuracy is measured against a float64 reference, relatively: 1e-4 for float32, 2e-3 for
float16, 1.6e-2 for bfloat16. Accumulate in float32 whatever the input dtype.

Hints (the shape of one answer, not the only one):
- One program per (sequence, query head) is the simplest grid: `grid = (num_seqs, num_heads)`.
  Query head `h` reads kv head `h // (num_heads // num_kv_heads)`: with GQA several query heads
  share one kv head (MQA is the case `num_kv_heads == 1`). Not `h % num_kv_heads`.
- Walk the sequence one block at a time: load the block id from the block table, then a
  `[BLOCK_SIZE, HEAD_DIM]` tile of keys, the scores `q . k * scale`, and keep a running max,
  a running sum of exponentials and a running weighted sum of values (the online softmax of
  FlashAttention), rescaling the last two whenever the max grows.
- Mask the tail: the last block may be partly filled, and the slots past `seq_len` hold garbage
  (NaN, in the grader). Never read block-table entries past the sequence's last block.
- `tl.arange` needs a power of two: for head dims 80 and 96, use the next power of two and mask
  the extra lanes on every load and store.
- `scale` defaults to `head_dim ** -0.5`; a sequence with `seq_len == 0` gives zeros (not NaN:
  0/0 is NaN, guard the final division).
"""

import torch
import triton  # noqa: F401  (you will need it: @triton.jit, triton.next_power_of_2)
import triton.language as tl  # noqa: F401


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
      block are padding and must not be read;
    - `seq_lens`: int32 `[num_seqs]`.

    Returns `[num_seqs, num_heads, head_dim]` in `q`'s dtype: for each sequence `s` and head
    `h`, softmax(q[s, h] . K^T * scale) @ V over the first `seq_lens[s]` cached tokens.
    Dtypes float32, float16, bfloat16; `head_dim` in {32, 64, 80, 96, 128, 256};
    `block_size` in {1, 8, 16, 32}.
    """
    raise NotImplementedError("paged_attention_decode")
