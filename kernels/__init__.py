"""The kit's kernel-side code: float64 oracles, the split-KV kernel, GPU timing, the demo engine."""
