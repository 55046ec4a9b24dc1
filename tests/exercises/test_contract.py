"""The submission's contract, checked on whatever `exercises/` holds: the stubs as shipped, or a
candidate's finished files (the candidate kit's `make test` runs these too, before and after).

Every member the statement's tables name (exercises/README.md) is there, with the statement's
parameters: their names, order, kinds and defaults; annotations are free. A member that is still
a stub keeps its statement, a docstring, and raises NotImplementedError naming itself, which is
how the grader tells "not implemented" from a wrong answer. In the full kit the answer key keeps
the same contract (`tests/solutions/test_contract.py`, left out of the candidate kit).
"""

import ast
import importlib
import inspect
import re
import textwrap
from types import ModuleType

import pytest

from grader import KIT_ROOT

STATEMENT = KIT_ROOT / "exercises" / "README.md"

# Each member the statement names, as `Class.method` or `function`, and its parameters as a
# signature without annotations. Attributes the statement allows as properties (`num_free`,
# `free_blocks`) are not here: an attribute set in `__init__` fulfils them as well.
CONTRACT: dict[str, dict[str, str]] = {
    "block_allocator": {
        "BlockAllocator.__init__": "(self, num_blocks)",
        "BlockAllocator.allocate": "(self, n=1)",
        "BlockAllocator.free": "(self, block_ids)",
        "BlockAllocator.incref": "(self, block_id)",
        "BlockAllocator.ref_count": "(self, block_id)",
    },
    "kv_cache_manager": {
        "Request.__init__": "(self, request_id, prompt_len)",
        "KVCacheManager.__init__": "(self, num_blocks, block_size, head_dim)",
        "KVCacheManager.allocate_for_prefill": "(self, req)",
        "KVCacheManager.allocate_for_decode": "(self, req)",
        "KVCacheManager.free": "(self, req)",
        "KVCacheManager.get_physical_cache": "(self, req)",
        "KVCacheManager.slot_mapping": "(self, req)",
        "KVCacheManager.fork": "(self, parent, child_id)",
    },
    "paged_attention": {
        "paged_attention_decode": "(q, k_cache, v_cache, block_tables, seq_lens, scale=None)",
    },
    "scheduler": {
        "Scheduler.__init__": "(self, manager, max_num_seqs)",
        "Scheduler.add_request": "(self, request_id, prompt_len, max_new_tokens)",
        "Scheduler.step": "(self)",
        "Scheduler.has_unfinished": "(self)",
    },
}
MEMBERS = [(module, member) for module, members in CONTRACT.items() for member in members]


def load(package: str, module: str) -> ModuleType:
    """`package.module`; the kernel's file needs Triton, which installs on Linux only."""
    if module == "paged_attention":
        pytest.importorskip("triton", reason="Triton installs on Linux only")
    return importlib.import_module(f"{package}.{module}")


def member_of(module: ModuleType, dotted: str) -> object:
    """`Class.method` or `function` of `module`, as the class (or a base it inherits it from)
    holds it: no binding."""
    owner, _, name = dotted.rpartition(".")
    holder = getattr(module, owner) if owner else module
    try:
        return inspect.getattr_static(holder, name)
    except AttributeError:
        raise AssertionError(f"{dotted} is missing") from None


def bare_signature(function: object) -> str:
    """A callable's parameters as the contract writes them: names, kinds, defaults; no
    annotations."""
    signature = inspect.signature(function)
    parameters = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=parameters, return_annotation=signature.empty))


def still_a_stub(function: object) -> ast.Raise | None:
    """The `raise NotImplementedError(...)` that is all of a stub's body (after its docstring);
    None for a member that has been implemented."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    body = tree.body[0].body
    if ast.get_docstring(tree.body[0]) is not None:
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return None
    raised = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return body[0] if getattr(raised, "id", None) == "NotImplementedError" else None


@pytest.mark.parametrize(("module", "member"), MEMBERS)
def test_each_member_has_the_contracts_parameters(module: str, member: str) -> None:
    function = member_of(load("exercises", module), member)
    assert callable(function), f"{member} is not callable"
    assert bare_signature(function) == CONTRACT[module][member], member


@pytest.mark.parametrize(("module", "member"), MEMBERS)
def test_a_member_still_a_stub_keeps_its_statement_and_says_its_name(
    module: str, member: str
) -> None:
    """Checked on stubs only: an implemented member may say what it likes."""
    function = member_of(load("exercises", module), member)
    raised = still_a_stub(function)
    if raised is None:
        return
    assert inspect.getdoc(function), f"the stub {member} lost its statement (its docstring)"
    assert isinstance(raised.exc, ast.Call), f"{member} raises NotImplementedError unnamed"
    said = [arg.value for arg in raised.exc.args if isinstance(arg, ast.Constant)]
    assert said == [member], f"{member} raises NotImplementedError({said!r})"


def test_the_statement_names_every_member_of_the_contract() -> None:
    """This table and exercises/README.md's tables name the same members."""
    statement = STATEMENT.read_text(encoding="utf-8")
    for module, member in MEMBERS:
        name = member.rpartition(".")[2]
        shown = member.partition(".")[0] if name == "__init__" else name
        assert re.search(rf"[`.\n]{shown}\(", statement), member
        assert f"`{module}.py`" in statement, module
