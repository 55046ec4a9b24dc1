"""The grader: it reads a submission, runs each part's checks against it in isolated workers,
scores what it saw for itself, and writes the report (the README's "How the kit is built" shows
the folders)."""

from pathlib import Path

KIT_ROOT = Path(__file__).resolve().parent.parent  # holds grader/, kernels/, exercises/...
ANSWER_KEY = KIT_ROOT / "solutions"  # the full kit's answer key: the candidate kit has none
ANSWER_KEY_NAME = "answer key"  # the implementation its files make up, among known code
