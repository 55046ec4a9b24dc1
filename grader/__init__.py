"""The grading engine (placeholder: the grader is built in a later version of the kit)."""
