"""`grade-all --merge DIR... [--out OUT] [--allow-mixed] [--reviews FILE]`: one leaderboard of
reports graded elsewhere (a Slurm array, a CI matrix, several machines).

Each DIR is a report folder (it holds report.json) or a folder of them (a grade-all OUT). Every
report must pass `provenance.problems` with the hiring team's seal key (`--seal-key`, or the default
one: `seal_key.verifying_key`): sealed with that key, nothing changed after grading, its
submission's file hashes matching their checksum; and no two may be one report (`copies`). One that
does not is refused, always. Reports of different `provenance.settings` (kit version, profile, seed,
rubric, parts) are refused too, unless `--allow-mixed`: then each report whose settings differ from
the most common ones is marked on its row. The report folders are copied into OUT under unique
names, each the submission's name its report records (`sealed_name`: a report copied into another
candidate's folder keeps its own), their pages drawn again from the verified report.json
(`writers.write_pages`), and OUT gets the leaderboard, as grade-all writes it (no similar pairs: the
submissions are not here), with the reviewer's notes of `--reviews FILE` (`reviews.py`; none by
default), checked before anything is copied. Exit status 0 when the leaderboard was written, 2 when
something was refused. Its lines and pages are in the drive's `--lang`, and so are the pages of
each report it merges, whatever language that was graded in (its report.json, sealed, keeps that
one).
"""

import argparse
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

from grader import provenance, seal_key
from grader.drive import outputs
from grader.drive.names import OWN_OUTPUTS, report_name, unique_key
from grader.drive.progress import finished_line
from grader.report.compare import ReportError, read
from grader.report.i18n import tr
from grader.report.leaderboard import earlier
from grader.report.messages import text_in
from grader.report.model import bounded
from grader.report.reviews import ReviewsError, load_reviews
from grader.report.writers import write_pages
from grader.said import Said, message_of, said
from grader.text import clean


def report_folders(dirs: list[Path]) -> list[Path]:
    """The report folders `dirs` name: each a report folder itself, or the ones it holds."""
    found = []
    for folder in dirs:
        if (folder / "report.json").is_file():
            found.append(folder)
        elif folder.is_dir():
            found += sorted(sub for sub in folder.iterdir() if (sub / "report.json").is_file())
    return found


def copies(raws: dict[Path, dict]) -> list[tuple[Path, Said]]:
    """Each report that is another's copy (the same seal), with why it is refused: one grading,
    one row."""
    first: dict[str, Path] = {}
    refused = []
    for folder, raw in raws.items():
        seal = provenance.field(raw, "provenance").get("seal")
        if not isinstance(seal, str):
            continue  # unsealed: refused for that already
        if seal in first:
            refused.append((folder, said("a copy of the report in {first}", first=first[seal])))
        first.setdefault(seal, folder)
    return refused


def sealed_name(raw: dict, folder: Path) -> str:
    """The row's name: the submission's, as its sealed report says (a report copied into
    another candidate's folder keeps its own name), unless that cannot name a folder."""
    name = raw["submission"].get("name")
    names_a_folder = isinstance(name, str) and name not in ("", ".", "..")
    return name if names_a_folder and not {"/", "\0"} & set(name) else folder.name


# Each of `provenance.SETTINGS` as a difference names it, in any language.
SETTING_NAMES = {
    "kit": said("kit"),
    "profile": said("profile"),
    "seed": said("seed"),
    "rubric": said("rubric"),
    "parts": said("parts"),
}


def differences(settings: dict, usual: dict) -> list[Said]:
    """What `settings` have that `usual` do not, each e.g. "seed 8 (the rest: 7)"."""
    return [
        said(
            "{setting} {value} (the rest: {usual})",
            setting=SETTING_NAMES[key],
            value=settings[key],
            usual=usual[key],
        )
        for key in provenance.SETTINGS
        if settings[key] != usual[key]
    ]


def main(args: argparse.Namespace) -> int:
    lang = args.lang
    folders = report_folders(args.merge)
    if not folders:
        print(tr(lang, "merge_no_report", dirs=", ".join(map(str, args.merge))), file=sys.stderr)
        return 2
    try:
        key = seal_key.verifying_key(args.seal_key)
        reviews = load_reviews(args.reviews)
    except (seal_key.SealKeyError, ReviewsError) as error:
        print(tr(lang, "merge_error", error=text_in(lang, message_of(error))), file=sys.stderr)
        return 2
    raws, refused = {}, []
    for folder in folders:
        try:
            raws[folder] = read(folder)
        except (ReportError, OSError, ValueError) as error:
            refused.append((folder, message_of(error)))
            continue
        refused += [(folder, why) for why in provenance.problems(raws[folder], key)]
    refused += copies(raws)
    settings = {folder: provenance.settings(raw) for folder, raw in raws.items()}
    counts = Counter(json.dumps(value, sort_keys=True) for value in settings.values())
    usual = json.loads(counts.most_common(1)[0][0]) if counts else {}
    mixed = {
        folder: differences(value, usual) for folder, value in settings.items() if value != usual
    }
    if mixed and not args.allow_mixed:
        refused += [(folder, said("graded with other settings: {settings_list}", settings_list=why))
                    for folder, why in mixed.items()]  # fmt: skip
    if refused:
        lines = [tr(lang, "merge_refused_line", folder=folder, why=text_in(lang, why))
                 for folder, why in refused]  # fmt: skip
        lines += [tr(lang, "merge_allow_mixed")] if mixed and not args.allow_mixed else []
        print("\n  ".join([tr(lang, "merge_refused"), *map(clean, lines)]), file=sys.stderr)
        return 2
    outcomes, taken = [], {unique_key(own) for own in OWN_OUTPUTS}
    for folder in folders:
        name = report_name(sealed_name(raws[folder], folder), taken)
        taken.add(unique_key(name))
        target = args.out / name
        report = bounded(raws[folder])
        if target.resolve() != folder.resolve():
            shutil.copytree(folder, target, dirs_exist_ok=True)
        write_pages(report, target, lang)
        remarks = ()
        if folder in mixed:
            remarks = (said("mixed: {settings_list}", settings_list=mixed[folder]),)
        outcomes.append(earlier(name, str(folder), report, remarks))
        print(finished_line(lang, len(outcomes), len(folders), outcomes[-1]), file=sys.stderr)
    options = {"folder": ", ".join(map(str, args.merge)), **usual, "lang": lang}
    page = outputs.write_all(outcomes, args.out, options, reviews=reviews)
    print("\n" + tr(lang, "drive_leaderboard", page=page))
    outputs.warn_unmatched(outcomes, reviews, args.reviews, lang)
    return 0
