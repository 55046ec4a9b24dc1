"""The kernel oracles: decode batches to check a kernel on (`cases`) and float64 references
(`reference`). Self-contained: they import nothing from grader/, solutions/, full_kit/ or
exercises/ (tests/kernels/test_imports.py checks)."""
