"""The candidate's exercises: fill in the stubs, then run `make grade`."""
