"""`python -m grader similarity FOLDER`: flag submissions that share code, for a reviewer.

Prints the files that cannot be compared (they run code they decode at run time), then the
flagged pairs, and writes the pairs' pages under OUT/similarity/ (default
reports/similarity-<FOLDER name>). Exit status 0 whenever the report was written, pairs or not;
2 when it could not run.
"""

import argparse
import sys
from pathlib import Path

from grader.drive.names import submissions
from grader.similarity.drive import obfuscated, read_drive, similarity_report
from grader.similarity.pairs import DEFAULT_THRESHOLD
from grader.text import clean


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(
        prog="python -m grader similarity", description=__doc__.split("\n")[0]
    )
    cli.add_argument("folder", type=Path, help="a folder of submissions, as grade-all reads it")
    cli.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help="flag a file when a side's share of matched code reaches this",
    )
    cli.add_argument(
        "--max-df", type=int, help="ignore code held by more submissions (default: 5%%, 10 or more)"
    )
    cli.add_argument("--out", type=Path, help="report folder")
    args = cli.parse_args(argv)
    if not args.folder.is_dir():
        cli.error(f"{args.folder} is not a folder")
    out = args.out or Path("reports") / f"similarity-{args.folder.resolve().name}"
    intakes = read_drive(submissions(args.folder, out))
    for row in obfuscated(intakes):
        print(f"obfuscated: cannot be compared  {row['left']}  ({row['file']}: "
              f"{row['obfuscated']})")  # fmt: skip
    rows = similarity_report(intakes, out, threshold=args.threshold, max_df=args.max_df)
    for row in rows:
        files = ", ".join(shares.file for shares in row.files)
        print(
            f"{row.share_left:4.0%} {row.share_right:4.0%}  {clean(row.left, 80)}  ~  "
            f"{clean(row.right, 80)}{' (known)' if row.known else ''}  ({files}; {row.page})"
        )
    print(
        f"{len(rows)} similar pair(s) at threshold {args.threshold:.2f} among {len(intakes)} "
        f"submission(s); pages in {out / 'similarity'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
