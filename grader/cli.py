"""The options of `python -m grader SUBMISSION` (`parser`): read by the command itself
(`__main__.py`), and by `grade-all` (`drive/command.py`), which passes them on to each grading and
checks them first with the same parser."""

import argparse
import math
from pathlib import Path

from grader import seal_key
from grader.parts import PARTS
from grader.sandbox import isolation
from grader.sandbox.process import Limits
from grader.scoring.profiles import PROFILES, RUNS_PER_SHRINK
from grader.scoring.rubric import parse_parts


def positive_number(text: str) -> float:
    """A limit: a finite number above 0 (argparse's error says so, and what was given)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number above 0")
    return value


def whole_number(text: str) -> int:
    """A number of steps: 0 or more, in ASCII digits."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number, 0 or more")
    return int(text)


def profile_shrinks() -> str:
    """Each profile's own number of shrinks, as `--help` says it: "25 for quick, ..."."""
    return ", ".join(f"{profile.shrinks} for {name}" for name, profile in PROFILES.items())


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(
        prog="python -m grader",
        description="Grade a submission (a folder, .zip or .tar.gz) and write its report.",
        epilog="Also: python -m grader grade-all FOLDER (a leaderboard of every submission in "
        "FOLDER), python -m grader compare A B (two reports side by side) and python -m grader "
        "similarity FOLDER (submissions that share code); --help on each.",
    )
    cli.add_argument("submission", type=Path, help="folder, .zip or .tar.gz")
    cli.add_argument("--out", type=Path,
                     help="report folder (default reports/<submission name>); one that holds "
                          "another input's report, or other files, is refused")  # fmt: skip
    cli.add_argument("--parts", type=parse_parts, default=tuple(PARTS),
                     help=f"comma-separated part ids (default all: {','.join(PARTS)})")  # fmt: skip
    cli.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                     help="quick for the candidate loop (about 12 s on 2 idle cores), full "
                          "for a hiring decision (about 45 s; a slow submission or a busy "
                          "machine takes longer)")  # fmt: skip
    cli.add_argument("--seed", type=int, help="a private seed: a fresh set of hidden examples")
    cli.add_argument("--shrinks", type=whole_number,
                     help="how many steps a failure is shrunk by, each to a smaller "
                          f"counterexample (default: the profile's, {profile_shrinks()}), "
                          f"running at most {RUNS_PER_SHRINK} examples per step in all: fewer "
                          "ends sooner, with the same verdicts unless shrinking meets a hang, a "
                          "crash or a spent budget")  # fmt: skip
    cli.add_argument("--lang", choices=("en", "zh"), default="en",
                     help="language of the candidate-facing text (summary and report)")  # fmt: skip
    cli.add_argument("--rubric", type=Path,
                     help="a TOML file of weights, points and severity factors "
                          "(default: parts.toml's)")  # fmt: skip
    cli.add_argument("--memory-limit-gb", type=positive_number,
                     default=Limits.memory_bytes / (1 << 30),
                     help="memory limit of each worker process (its address space; its data "
                          "size where it uses CUDA)")  # fmt: skip
    cli.add_argument("--call-timeout", type=positive_number, default=Limits.call_seconds,
                     help="seconds one call into the submission may take")  # fmt: skip
    cli.add_argument("--import-timeout", type=positive_number, default=Limits.import_seconds,
                     help="seconds importing one submission file may take")  # fmt: skip
    cli.add_argument("--isolation", choices=isolation.MODES, default="auto",
                     help="auto: each worker in a bubblewrap sandbox where one can be made, else "
                          "unisolated and marked so; bwrap: refuse to grade without it; none: "
                          "unisolated (not for a hiring decision)")  # fmt: skip
    cli.add_argument("--part-timeout", type=positive_number, default=Limits.part_seconds,
                     help="seconds one part's checks may take in all")  # fmt: skip
    cli.add_argument("--submission-timeout", type=positive_number,
                     help="seconds the whole grading of the submission may take (default: the "
                          "profile's, 300 for quick and 900 for full); checks left when it is "
                          "spent fail as timed out")  # fmt: skip
    cli.add_argument("--seal-key", type=Path, metavar="FILE",
                     help="the hiring team's key to seal the report with (default: "
                          f"{seal_key.DEFAULT_SHOWN}, made on first use)")  # fmt: skip
    return cli
