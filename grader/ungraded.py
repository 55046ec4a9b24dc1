"""Why a check skipped here is not graded here. `grade.py` records each part's skipped points
by reason as `{"id", "reason", "points"}`; the pages word the id in their language
(`report/i18n.py`, the key `ungraded_<id>`), and the English `reason` is for readers of
`report.json` (and the pages' fallback for a report written before the ids).

A reason is known by how the skip message starts; any other is its own message, with no id.
"""

OTHER_PART = "other_part"  # a failure on another part's rule, charged there (`grade.py`)
NOT_TIMED = "not_timed"  # a timing of results that differ from the contract, charged by a check
REASONS = {  # id: (how a skip message for it starts, the English the report keeps)
    "full_kit": ("runs only in the full kit", "graded by the hiring team's kit"),
    "cuda": ("needs a CUDA device", "needs a CUDA device"),
    OTHER_PART: ("not graded here", "fails on another part's rule, which that part grades"),
    NOT_TIMED: ("not timed", "its results differ from the contract, which another check charges"),
}
SETTLED = (OTHER_PART, NOT_TIMED)  # charged by another check: no kit grades them, none is pending


def reason_of(message: str) -> tuple[str | None, str]:
    """The id (None where the kit does not know it) and the English reason of a check skipped
    with `message`."""
    for reason_id, (start, english) in REASONS.items():
        if message.startswith(start):
            return reason_id, english
    return None, message
