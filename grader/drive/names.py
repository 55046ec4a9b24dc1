"""A drive's submissions and their names: each entry of FOLDER gets a report folder of its own.

A submission's `<name>`, its report folder and its name on the leaderboard, is chosen so that no
two submissions share a folder and none is one of the drive's own outputs (a submission named
`leaderboard.html.zip` must not become `OUT/leaderboard.html/`), comparing names as a case- and
normalisation-insensitive file system would (`unique_key`). Entries are taken in sorted order,
and each gets the first free name of: its name without the archive suffix (`a.zip` -> `a`); its
whole name (`a.zip`), which says which entry it was; its whole name and `-2`, `-3`, ... So `a/`,
`a.tgz` and `a.zip` are reported as `a`, `a.tgz` and `a.zip`, and `leaderboard.html.zip` as
`leaderboard.html.zip`.
"""

import itertools
import sys
import unicodedata
from pathlib import Path

from grader.intake import ARCHIVES
from grader.report.i18n import tr
from grader.text import clean

# What a drive writes in OUT beside the reports: the leaderboard, the item analysis, and the
# similar pairs' pages.
OWN_OUTPUTS = ("leaderboard.csv", "leaderboard.html", "items.csv", "items.html", "similarity")
REVIEWS = "reviews.toml"  # the reviewer's notes, in FOLDER beside the submissions


def submissions(folder: Path, out: Path, lang: str = "en") -> dict[str, Path]:
    """`name -> entry` for each submission in `folder`, each name a report folder of its own
    (`report_name`); `reviews.toml`, the reviewer's notes, is skipped, and other entries are
    named on stderr, in `lang`, and skipped."""
    found: dict[str, Path] = {}
    taken = {unique_key(own) for own in OWN_OUTPUTS}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or out.resolve().is_relative_to(entry.resolve()):
            continue  # hidden, or OUT itself (or the folder holding it)
        if entry.name == REVIEWS:
            continue  # the reviewer's notes (`command.reviews_path`), not a submission
        if not (entry.is_dir() or entry.name.endswith(ARCHIVES)):
            print(tr(lang, "drive_skipping", name=clean(entry.name, 200)), file=sys.stderr)
            continue
        name = report_name(entry.name, taken)
        taken.add(unique_key(name))
        found[name] = entry
    return found


def unique_key(name: str) -> str:
    """`name` as a case- and normalisation-insensitive file system (macOS, Windows) tells names
    apart: two names of one key would be one folder there."""
    return unicodedata.normalize("NFC", name).casefold()


def report_name(entry: str, taken: set[str]) -> str:
    """The first of these names whose `unique_key` is not in `taken`: the entry's name without
    its archive suffix, its whole name, its whole name and `-2`, `-3`, ..."""
    stem = next(entry.removesuffix(suffix) for suffix in (*ARCHIVES, "") if entry.endswith(suffix))
    candidates = itertools.chain(
        (stem, entry), (f"{entry}-{count}" for count in itertools.count(2))
    )
    return next(name for name in candidates if unique_key(name) not in taken)
