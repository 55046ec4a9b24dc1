"""The answer key: a self-contained submission (relative imports only, nothing from the kit)."""
