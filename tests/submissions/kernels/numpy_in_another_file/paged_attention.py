"""The contract's part 4 done in numpy by another file of the submission (`scheduler.py`), which
no torch dispatch mode sees, beside a Triton kernel that only marks its output. The kernel rule
refuses the file before it runs: it imports another file of the submission, and
`paged_attention.py` is graded alone."""

import torch
import triton
import triton.language as tl

from .scheduler import attention


@triton.jit
def _mark_kernel(out_ptr):
    """Stores one element: a launch for the count."""
    tl.store(out_ptr, tl.load(out_ptr))


def paged_attention_decode(q, k_cache, v_cache, block_tables, seq_lens, scale=None):
    """Attention computed by `scheduler.attention` in numpy, then one launch."""
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    out = torch.from_numpy(attention(q, k_cache, v_cache, block_tables, seq_lens, scale))
    out = out.to(q.dtype)
    _mark_kernel[(1,)](out)
    return out
