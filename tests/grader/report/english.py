# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""Finding the English left in a Chinese report or page: words outside code, identifiers and the
candidate's own text.

A word is a run of ASCII letters (an apostrophe or a hyphen inside), between spaces and Chinese
text, with ASCII punctuation trimmed from its ends. Not English: anything with a digit, `_`, `.`,
`(` or `/` inside (code, numbers, paths), a single letter, an identifier (a capital after its first
letter: `ValueError`, `KVCacheManager`, `NaN`), a Python keyword (`True`, `for`), a name of the
contract's code (`exercises/*.py`) or of a part, and the technical terms Chinese text keeps in
English (`TERMS`). A page's words are its text (`html_text`), less its code and logs; a name of
the candidate's code (`names_in` it) is the candidate's text.
"""

import ast
import keyword
import re
from functools import cache
from html.parser import HTMLParser

from grader import KIT_ROOT
from grader.parts import PARTS

# Terms a Chinese engineer writes in English, the kit's Chinese text among them.
TERMS = frozenset(
    {
        *("token", "prefill", "decode", "kernel", "cache", "slot", "mapping", "gather", "fork"),
        *("tensor", "view", "transformer", "prompt", "id", "list", "int", "dtype", "cpu"),
        *("Triton", "CUDA", "Python", "PyTorch", "torch", "Hypothesis", "traceback", "Inf"),
        "Linux",
        *("cuda", "none"),  # a device's name, the value of `--isolation none`
        *("bubblewrap", "bwrap", "seccomp", "make", "simulate", "ms", "ns"),
        *("Ray", "nano-vllm"),  # grade-all's cluster (`--ray`); a known implementation's name
        *("Orca", "Max", "Oracle"),  # the vLLM paper's baselines: Orca (Max), (Pow2), (Oracle)
        *("python", "triton", "hypothesis", "pytest"),  # packages, as `compare` names them
        # the interviewer's debrief (full_kit/debriefs.toml): a kernel's and Python's terms
        *("softmax", "exp", "mask", "stride", "constexpr", "tile", "lane", "grid", "program"),
        *("load", "store", "query", "swap", "flash-decoding", "deque", "dict", "logits"),
        *("Nsight", "Compute", "Gemma"),  # NVIDIA's profiler, a model with its own scale
    }
)
EXERCISES = KIT_ROOT / "exercises"
RUN = re.compile(r"[!-~]+")  # printable ASCII without spaces
WORD = re.compile(r"[A-Za-z]+(?:['-][A-Za-z]+)*")
EDGES = "()[]{},.:;!?\"'`*|<>"
CODE_SPAN = re.compile(r"`[^`\n]*`")
# What follows these is an exception's own text: the candidate's, as its code raised it, or
# Python's, where the grader failed (with its traceback).
RAW_TEXT = re.compile(
    r"(实际抛出了 |# 抛出 |意外的异常：|无法导入 \S+：|评分器在这项检查中出错：|评分器出错："
    r"|评分器在其中一部分出错：|在你的代码中抛出：|它抛出了 )[^\n]*"
)
# The labels of `report.md`'s fences that hold the candidate's code: the line a failure raised
# at, and the lines of a file failures raised at (`markdown_kit_words`).
CANDIDATE_CODE = ("在你的代码中抛出：", "行抛出异常）")
NOT_READ = {"code", "pre", "style"}  # a page's elements whose text is code, a log or its style


@cache
def contract_names() -> frozenset[str]:
    """Every name in the contract's code: classes, functions, arguments, attributes."""
    return frozenset().union(*(names_in(path.read_text()) for path in EXERCISES.glob("*.py")))


def names_in(source: str | bytes) -> set[str]:
    """Every name in Python `source`: classes, functions, arguments, attributes."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def english_words(text: str) -> list[str]:
    """The English words of `text` (see the module's docstring), in order."""
    words = []
    for run in RUN.findall(CODE_SPAN.sub(" ", text)):
        word = run.strip(EDGES)
        if WORD.fullmatch(word) and len(word) > 1 and not is_name(word):
            words.append(word)
    return words


def is_name(word: str) -> bool:
    """An identifier, a name of the contract or of a part, or a technical term: not prose."""
    if any(char.isupper() for char in word[1:]) or keyword.iskeyword(word):
        return True
    if word in TERMS or word in PARTS:
        return True
    return word in contract_names()


def without_candidate_text(text: str) -> str:
    """`text` without the exceptions' own texts (`RAW_TEXT`: after "实际抛出了 ", a comment's
    "# 抛出 "...)."""
    return RAW_TEXT.sub(r"\1", text)


def comments_only(code: str) -> str:
    """Of Python code (a counterexample), only the comments its lines end with and the text of
    its asserts' messages."""
    kept = []
    for line in code.split("\n"):
        if line.lstrip().startswith("assert "):
            kept.append(assert_text(line.strip()))
        elif line.lstrip().startswith("#"):
            kept.append(line)
        elif "  # " in line:
            kept.append(f"# {line.partition('  # ')[2]}")
    return "\n".join(kept)


def assert_text(line: str) -> str:
    """The text of an `assert` statement's message: a string's, an f-string's own text."""
    try:
        message = ast.parse(line).body[0].msg
    except (SyntaxError, AttributeError):
        return ""
    if isinstance(message, ast.JoinedStr):
        return " ".join(part.value for part in message.values if isinstance(part, ast.Constant))
    return message.value if isinstance(message, ast.Constant) else ""


def markdown_kit_words(markdown: str, stop_at: str, exempt_fences: tuple[str, ...]) -> str:
    """The text of `report.md` that holds the kit's words, up to the section `stop_at` (the
    environment: versions, file names, digests): the Python fences' comments only, and no fence
    whose label (the line before it) is one of `exempt_fences` (Hypothesis' notes, tracebacks) or
    says where a failure was raised in the candidate's file (`CANDIDATE_CODE`: its line, or the
    file's lines it raised at)."""
    kept, fence, label = [], None, ""
    for line in markdown.split("\n"):
        if line == f"## {stop_at}":
            break
        if line.startswith("```"):
            if fence is None:
                fence = (line[3:], label in exempt_fences, [])
                continue
            language, exempt, body = fence
            fence = None
            if not exempt and not any(what in label for what in CANDIDATE_CODE):
                text = "\n".join(body)
                kept.append(comments_only(text) if language == "python" else text)
        elif fence is not None:
            fence[2].append(line)
        else:
            kept.append(line)
            label = line.strip() or label
    return without_candidate_text("\n".join(kept))


SUMMARY_LINE = re.compile(r"  \S")  # a line of the summary's own, not a counterexample's


def summary_kit_words(summary: str, counterexample_heading: str) -> str:
    """The summary's lines that hold the kit's words: the counterexample's (after
    `counterexample_heading`, the line that says where it runs, then its code at the margin, up to
    the summary's next line, indented by two) reduced to their comments."""
    kept, after = [], 0  # lines since the heading: where it runs, then the code
    for line in summary.split("\n"):
        if after == 2 and not SUMMARY_LINE.match(line):
            kept.append(comments_only(line))
            continue
        after = 1 if line.strip() == counterexample_heading else (1 + after if after == 1 else 0)
        kept.append(line)
    return without_candidate_text("\n".join(kept))


class PageText(HTMLParser):
    """The text of a page's elements, but what is inside `NOT_READ` ones."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.inside: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in NOT_READ:
            self.inside.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.inside and self.inside[-1] == tag:
            self.inside.pop()

    def handle_data(self, data: str) -> None:
        if not self.inside:
            self.texts.append(data)


def html_text(page: str) -> str:
    """What a person reads on an HTML page (its title, headings, table cells, the charts'
    labels), without its code, logs and style sheet (`NOT_READ`) and without the candidate's own
    text (`without_candidate_text`), one line per piece of text."""
    parser = PageText()
    parser.feed(page)
    parser.close()
    return without_candidate_text("\n".join(parser.texts))
