"""A drive (`python -m grader grade-all`): many submissions graded, then the drive's own files.

One direction of use, each module importing only those listed after it:

- `command.py`: the command, its options and the drive from start to end;
- `cluster.py` (a Ray task per grading, `--ray`) and `local.py` (a process per grading here): the
  ways to run a grading;
- `forking.py`: the local gradings forked from one warm process;
- `merge.py` (`--merge`: report folders graded elsewhere), `resume.py` (reports kept from an
  earlier run), `progress.py` (the running count);
- `outputs.py` (each report's standing, `standing.py`; the leaderboard and the item analysis),
  `names.py` (each submission's name and report folder).
"""
