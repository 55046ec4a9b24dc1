"""`python -m full_kit.demo` (`make demo`): the engine serves a trace on the answer key's parts.

`grader/sandbox/tools/engine.py` (the tiny transformer, the serving loop and the check against
dense decoding) runs `DEMO_TRACE` with the answer key's `kv_cache_manager`, `scheduler` and
`paged_attention`, natively on CUDA, else under Triton's interpreter on CPU, and prints the
throughput, the memory held against a contiguous reservation, the preemptions and the check.
Exit status 0 when every request got the tokens it gets when decoded alone, else 1.
"""

import os
import sys

import torch

from grader.integration import mismatch_at
from grader.sandbox.tools.engine import EngineTrace, serve

# 12 requests arriving over time; 10 blocks cannot hold all 6 seats' requests at their full
# length, so some are preempted.
DEMO_TRACE = EngineTrace(
    num_blocks=10,
    block_size=16,
    max_num_seqs=6,
    requests=tuple((2 * i, 6 + (7 * i) % 19, 8 + (5 * i) % 17) for i in range(12)),
)


def main() -> int:
    """Serve `DEMO_TRACE` on the answer key and print what it took; 0 when the check passed."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # read when the kernel is decorated
    from solutions import kv_cache_manager, paged_attention, scheduler

    trace = DEMO_TRACE
    where = "CUDA" if torch.cuda.is_available() else "CPU, under Triton's interpreter"
    print(
        f"Serving {len(trace.requests)} requests with a tiny transformer on the answer key's "
        f"parts ({where}): {trace.max_num_seqs} seats, {trace.num_blocks} blocks of "
        f"{trace.block_size} tokens."
    )
    f = serve(kv_cache_manager, scheduler, paged_attention, trace, progress=print)
    kib = 1 / 1024
    print(
        f"\nThroughput   {f['tokens']} tokens in {f['steps']} steps: {f['tokens_per_step']} "
        f"tokens/step, {f['tokens_per_second']} tokens/s ({f['seconds']:.1f} s)"
    )
    print(
        f"Memory       peak {f['peak_blocks']}/{f['pool_blocks']} blocks: "
        f"{f['peak_kv_bytes'] * kib:.0f} KiB of K/V held for "
        f"{f['peak_cached_kv_bytes'] * kib:.0f} KiB of tokens, in a "
        f"{f['pool_kv_bytes'] * kib:.0f} KiB pool; reserving each running request's full "
        f"length contiguously: {f['contiguous_kv_bytes'] * kib:.0f} KiB"
    )
    print(f"Preemptions  {f['preemptions']}, {f['recomputed_tokens']} tokens recomputed")
    print(
        f"Check        {f['mismatches']} mismatches against dense decoding alone, "
        f"{f['near_ties']} near-ties excused; largest logit difference "
        f"{f['max_logit_error']:.1e}, smallest top-2 margin {f['min_margin']}"
    )
    if f["passed"]:
        print("PASS: every request got the tokens it gets when decoded alone.")
        return 0
    print(f"FAIL: first mismatch at {mismatch_at(f['first_mismatch'])}.")
    return 1


if __name__ == "__main__":
    sys.exit(main())
