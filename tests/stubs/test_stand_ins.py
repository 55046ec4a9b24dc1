"""The stand-ins of the kit's modules (`grader/sandbox/stand_ins/`) keep the contract's given
pieces exactly as the stubs give them, so that a candidate's code sees the same `Request` and
`OutOfBlocks` whether the kit's objects or its own serve it."""

import ast

import pytest

from grader import KIT_ROOT
from grader.sandbox.launch import STAND_INS

GIVEN = [("kv_cache_manager.py", "Request"), ("block_allocator.py", "OutOfBlocks")]


def class_tree(path, name: str) -> str:
    """The syntax tree of class `name` in the file at `path`, as text."""
    tree = ast.parse(path.read_text())
    (found,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name]
    return ast.dump(found)


@pytest.mark.parametrize(("file", "name"), GIVEN)
def test_a_stand_in_gives_what_the_stub_gives(file: str, name: str) -> None:
    assert class_tree(STAND_INS / file, name) == class_tree(KIT_ROOT / "exercises" / file, name)
