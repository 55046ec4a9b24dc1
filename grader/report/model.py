"""The report as every file holds it: `bounded`, a copy cleaned of what no file may carry and cut
to a bounded length.

Messages carry the candidate's exception text and file names: `bounded` first cleans every
string (`text.py`: no terminal escapes, no lone surrogates) and cuts it to a bounded length; then
each writer (`writers.py`) escapes them its own way.
"""

from grader.text import MESSAGE_CHARS, clean

# The most characters of one string in the files (`bounded`): of a message, which the candidate's
# exception text reaches (some room over `MESSAGE_CHARS`, which it was cut to where it entered);
# of any other string, a counterexample, a traceback or an entry of `errors` the longest; of a key.
LIMITS = {"message": 2 * MESSAGE_CHARS}
LONG_CHARS = 20_000
KEY_CHARS = 1_000
NOTE_CHARS = 100  # over a bound, a string is left whole: room for the note of a cut made before


def bounded(value: object, limit: int = LONG_CHARS) -> object:
    """A copy of `value` (a report, or any JSON-like part of one) cleaned as `text.clean_all`
    cleans it, each string also cut: a `message` (a check's, an integrity flag's, the engine
    check's) to `LIMITS["message"]` characters, any other string to `LONG_CHARS`, a key to
    `KEY_CHARS`. Cut as it is cleaned: a candidate's 100 MB string costs no more than a short one.
    A string up to `NOTE_CHARS` over its bound stays whole: `bounded` of a bounded report (one read
    back, as `compare.load` does) is the same report, and no string gets two notes.
    """
    if isinstance(value, str):
        return clean(value, None if len(value) <= limit + NOTE_CHARS else limit)
    if isinstance(value, dict):
        return {
            clean(str(key), KEY_CHARS): bounded(item, LIMITS.get(key, LONG_CHARS))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [bounded(item, limit) for item in value]
    return value
