"""The kit's kernel-side code: float64 oracles now; GPU timing helpers and fast kernels later."""
