"""The prefix-caching engine (`grader/sandbox/tools/prefix_engine.py`) and the grader's check
around it (`grader.integration.run_prefix_integration`, part 7).

The answer key's cache serves the check trace with every chosen token equal to dense decoding
alone and fewer prompt tokens computed than served, evictions included; a cache whose block key
ignores its parent (an unchained hash) serves one prompt's KV to another and fails on mismatched
tokens; a cache that shares its blocks but says none of its tokens are cached fails too; and the
verdict is made from the reported tokens, which the grader checks itself.
"""

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from grader import KIT_ROOT
from grader.grade import device_environment
from grader.integration import run_prefix_integration, verify_prefix
from grader.report.i18n import tr
from grader.report.summary import summary_lines
from grader.sandbox.process import Limits
from grader.sandbox.tools import engine, prefix_engine
from tests.grader.report.test_writers import new_sections_report, written

ANSWER_KEY = (KIT_ROOT / "solutions" / "prefix_cache.py").read_text()
CHAINED_HASH = "self.hash = hash((None if parent is None else parent.hash, tokens))"
CHAINED_EQUALITY = "            mine, theirs = mine.parent, theirs.parent\n"


def edited(old: str, new: str) -> str:
    """The answer key with `old`, which occurs once, replaced by `new`."""
    assert ANSWER_KEY.count(old) == 1, old
    return ANSWER_KEY.replace(old, new)


UNCHAINED = edited(CHAINED_HASH, "self.hash = hash(tokens)").replace(
    CHAINED_EQUALITY, "            return True\n"
)
SAYS_NONE_CACHED = edited("        return len(hits) * size\n", "        return 0\n")


def module_of(source: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # for its dataclasses
    exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    return module


def checked(source: str) -> dict:
    files = {"prefix_cache.py": source.encode()}
    return run_prefix_integration(files, Limits(), device_environment("caching"))


@pytest.fixture(scope="module")
def answer_key() -> dict:
    """The check's outcome on the answer key, through a sandboxed worker."""
    return checked(ANSWER_KEY)


@pytest.fixture(scope="module")
def served() -> dict:
    """The answer key's report on the check trace, served in this process."""
    return prefix_engine.serve(module_of(ANSWER_KEY, "answer_key_prefix_cache"), "check")


def test_the_answer_key_reuses_cached_prefixes_and_gets_every_token_right(answer_key):
    result = answer_key
    figures = result["figures"]
    assert result["status"] == "passed", result["message"]
    assert figures["mismatches"] == 0, figures["first_mismatch"]
    assert 0 < figures["prompt_tokens_computed"] < figures["prompt_tokens"]
    # each computed prompt position, and each generated token fed back (the last one is not)
    positions = figures["prompt_tokens_computed"] + figures["tokens"] - figures["requests"]
    assert figures["positions_checked"] == positions
    assert (
        f"{figures['prompt_tokens_computed']} of their {figures['prompt_tokens']} prompt tokens "
        "computed" in result["message"]
    )


def test_the_trace_evicts_blocks_that_a_later_prompt_would_have_reused(served):
    roomy = dataclasses.replace(prefix_engine.TRACES["check"], num_blocks=1000)
    unlimited = prefix_engine.serve(module_of(ANSWER_KEY, "roomy_prefix_cache"), roomy)
    assert unlimited["prompt_tokens"] == served["prompt_tokens"]
    assert unlimited["prompt_tokens_computed"] < served["prompt_tokens_computed"]
    tight = dataclasses.replace(prefix_engine.TRACES["check"], num_blocks=30)
    with pytest.raises(RuntimeError, match="OOM"):  # the pool is about as small as it can be
        prefix_engine.serve(module_of(ANSWER_KEY, "tight_prefix_cache"), tight)


def test_an_unchained_block_key_serves_another_prompts_kv_and_fails():
    result = checked(UNCHAINED)
    assert result["status"] == "failed"
    assert result["figures"]["mismatches"] > 0
    assert "tokens the engine chose differ from decoding each request alone" in result["message"]
    first = result["figures"]["first_mismatch"]
    assert first["expected"] != first["got"]


def test_a_cache_that_says_nothing_is_cached_fails_with_every_prompt_token_computed():
    result = checked(SAYS_NONE_CACHED)
    figures = result["figures"]
    assert result["status"] == "failed"
    assert figures["mismatches"] == 0
    assert figures["prompt_tokens_computed"] == figures["prompt_tokens"]
    assert result["message"].endswith(
        "the cache held none of them, though the prompts share prefixes"
    )


def test_the_grader_makes_its_own_verdict_from_the_reported_tokens(served):
    assert verify_prefix("check", served)["mismatches"] == 0
    tampered = [list(tokens) for tokens in served["predicted"]]
    request = next(i for i, tokens in enumerate(tampered) if len(tokens) > 3)
    tampered[request][3] = (tampered[request][3] + 1) % prefix_engine.MODEL.vocab_size
    verdict = verify_prefix("check", served | {"predicted": tampered})
    assert verdict["mismatches"] >= 1
    first = verdict["first_mismatch"]
    assert (first["request"], first["position"]) == (request, served["cached"][request] + 3)
    more_cached = [served["cached"][0] + 4, *served["cached"][1:]]  # the predictions say less
    with pytest.raises(engine.EngineError, match="each prompt position it computed"):
        verify_prefix("check", served | {"cached": more_cached})
    with pytest.raises(engine.EngineError, match="multiple of the block size"):
        verify_prefix("check", served | {"cached": [count + 1 for count in served["cached"]]})
    with pytest.raises(engine.EngineError, match="max_new_tokens valid tokens"):
        verify_prefix("check", served | {"generated": served["generated"][:-1]})


def test_the_check_skips_a_submission_without_a_prefix_cache():
    result = run_prefix_integration({}, Limits(), device_environment("caching"))
    assert result == {
        "status": "skipped",
        "message": "needs prefix_cache.py, which the submission lacks",
        "figures": {},
    }


def test_the_reports_show_the_check_beside_the_engine_check(answer_key, tmp_path: Path):
    made = new_sections_report() | {"prefix_integration": answer_key}
    files = written(made, tmp_path)
    html = files["report.html"]
    assert html.index('<section id="integration">') < html.index(
        '<section id="prefix_integration">'
    )
    section = html.split('<section id="prefix_integration">')[1].split("</section>")[0]
    assert "End-to-end prefix-caching check (not scored)" in section
    assert '<span class="tag passed">passed</span>9 requests sharing prefixes' in section
    assert "<dt><code>prompt_tokens_computed</code></dt>" in section
    heading = "## End-to-end prefix-caching check (not scored)\n\n"
    markdown = files["report.md"].split(heading)[1].split("\n## ")[0]
    assert markdown.startswith("**passed**: `9 requests sharing prefixes")
    checked_line = f"- `positions_checked`: `{answer_key['figures']['positions_checked']}`"
    assert markdown.splitlines()[2:4] == [checked_line, "- `mismatches`: `0`"]
    summary = "\n".join(summary_lines(made, tmp_path))
    assert "End-to-end prefix-caching check (not scored): passed. 9 requests" in summary
    chinese = written(made | {"language": "zh"}, tmp_path / "zh")
    heading = tr("zh", "prefix_integration_heading")
    assert f"<h2>{heading}</h2>" in chinese["report.html"]
    assert f"## {heading}\n" in chinese["report.md"]
