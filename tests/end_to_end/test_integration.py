"""The tiny serving engine (`grader/sandbox/tools/engine.py`) and the grader's integration check
around it.

The answer key's parts serve the check trace, preemptions included, with every request's
tokens equal to dense decoding alone; a broken paged path shows up as mismatched tokens, a
kernel that changes its block tables or lengths in place stops the engine; and
`run_integration` skips an incomplete submission (`full_kit/test_shipped_kits.py` sees it pass the
answer key and fail the stubs, through the grader's command).
"""

import importlib.util
import os
from types import ModuleType, SimpleNamespace

import pytest
import torch

from grader import KIT_ROOT

if not torch.cuda.is_available():
    # Read when @triton.jit decorates the kernel, so before its module is imported.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from grader.grade import device_environment
from grader.integration import run_integration, verify
from grader.sandbox.process import Limits
from grader.sandbox.tools import engine

ROOT = KIT_ROOT
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="Triton installs on Linux only"
)
# Three requests of one or two blocks, enough for a broken paged path to change tokens.
SMALL = engine.EngineTrace(
    num_blocks=5, block_size=8, max_num_seqs=3, requests=((0, 5, 8), (0, 9, 6), (1, 3, 7))
)


@pytest.fixture(scope="module")
def parts() -> tuple[ModuleType, ModuleType, ModuleType]:
    pytest.importorskip("triton", reason="Triton installs on Linux only")
    from solutions import kv_cache_manager, paged_attention, scheduler

    return kv_cache_manager, scheduler, paged_attention


@pytest.fixture(scope="module")
def served(parts) -> dict:
    """The answer key's figures on the grader's trace."""
    return engine.serve(*parts, "check")


def files_of(folder: str) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in (ROOT / folder).glob("*.py")}


def test_the_answer_key_serves_the_check_trace_as_dense_decoding_alone(served):
    assert served["mismatches"] == 0, served["first_mismatch"]
    assert served["passed"]
    assert served["preemptions"] >= 1
    assert served["recomputed_tokens"] > 0
    assert served["tokens"] == sum(n for _, _, n in engine.TRACES["check"].requests)
    assert served["peak_blocks"] == served["pool_blocks"]
    assert served["max_logit_error"] < engine.NEAR_TIE / 10


def test_a_kernel_that_skips_the_last_block_is_caught(parts):
    kv_cache_manager, scheduler, paged_attention = parts

    def skip_last_block(q, k_cache, v_cache, block_tables, seq_lens, scale=None):
        block_size = k_cache.shape[1]
        full_blocks = seq_lens - ((seq_lens - 1) % block_size + 1)
        return paged_attention.paged_attention_decode(
            q, k_cache, v_cache, block_tables, full_blocks.to(torch.int32), scale
        )

    broken = SimpleNamespace(paged_attention_decode=skip_last_block)
    figures = engine.serve(kv_cache_manager, scheduler, broken, SMALL)
    assert not figures["passed"]
    assert figures["mismatches"] > 0
    assert figures["first_mismatch"]["expected"] != figures["first_mismatch"]["got"]


@pytest.mark.parametrize("argument", ["block_tables", "seq_lens"])
def test_a_kernel_that_changes_an_argument_in_place_is_caught(parts, argument: str):
    """An engine passes one step's block tables and lengths to the kernel of every layer; the
    check's model has one, so the engine looks at them after each launch."""
    kv_cache_manager, scheduler, paged_attention = parts

    def changes_its_argument(q, k_cache, v_cache, block_tables, seq_lens, scale=None):
        out = paged_attention.paged_attention_decode(
            q, k_cache, v_cache, block_tables, seq_lens, scale
        )
        {"block_tables": block_tables, "seq_lens": seq_lens}[argument].sub_(1)
        return out

    broken = SimpleNamespace(paged_attention_decode=changes_its_argument)
    with pytest.raises(engine.EngineError, match=f"changed its {argument} in place"):
        engine.serve(kv_cache_manager, scheduler, broken, SMALL)


def test_a_slot_mapping_off_by_one_is_caught(parts):
    kv_cache_manager, scheduler, paged_attention = parts

    class OffByOne(kv_cache_manager.KVCacheManager):
        """Token `i` stored in the slot of token `i - 1` (token 0 keeps its own)."""

        def slot_mapping(self, req):
            slots = super().slot_mapping(req)
            return torch.cat([slots[:1], slots[:-1]])

    broken = SimpleNamespace(KVCacheManager=OffByOne, Request=kv_cache_manager.Request)
    figures = engine.serve(broken, scheduler, paged_attention, SMALL)
    assert not figures["passed"]
    assert figures["mismatches"] > 0


def test_the_grader_makes_its_own_verdict_from_the_reported_tokens(served):
    assert verify("check", served)["mismatches"] == 0
    tampered = [list(tokens) for tokens in served["generated"]]
    tampered[2][3] = (tampered[2][3] + 1) % engine.ModelConfig().vocab_size
    verdict = verify("check", served | {"generated": tampered})
    assert verdict["mismatches"] >= 1
    assert (verdict["first_mismatch"]["request"], verdict["first_mismatch"]["token_index"]) == (
        2,
        3,
    )
    with pytest.raises(engine.EngineError, match="max_new_tokens valid tokens"):
        verify("check", served | {"generated": tampered[:-1]})


def test_the_integration_check_skips_a_submission_without_a_scheduler():
    files = files_of("solutions")
    del files["scheduler.py"]
    result = run_integration(files, Limits(), device_environment())
    assert result == {
        "status": "skipped",
        "message": "needs scheduler.py, which the submission lacks",
        "figures": {},
    }
