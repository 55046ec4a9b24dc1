"""The file rule (`grader/file_rule.py`): what it lets a file do, and each way it refuses one."""

import pytest

from grader.file_rule import (
    BY_NAME,
    DUNDERS,
    HIDDEN,
    NAME_DUNDERS,
    NAMED,
    PLACES,
    REFUSED,
    SUBMODULES,
    breaks,
    first_break,
)
from grader.scan import ALLOWED_IMPORTS
from tests.grading import EXERCISES

# Code an honest file may hold: each of these keeps the rule.
KEPT = {
    "every listed module": (
        "from __future__ import annotations\nimport abc, bisect, collections, dataclasses, enum\n"
        "import functools, heapq, itertools, math, numbers, operator, typing, torch\n"
        "x = math.inf, heapq.heappush, itertools.count, torch.float32, typing.Iterable\n"
    ),
    "submodules and aliases": (
        "import collections.abc\nimport torch.nn.functional as F\nfrom torch import nn\n"
        "from collections import abc, deque\nx = F.pad, nn.Module, collections.abc.Iterable\n"
    ),
    "relative imports": "from .block_allocator import BlockAllocator\nfrom . import scheduler\n",
    "getattr with a literal name": (
        "import torch\n\ndef f(x):\n    return getattr(x, 'block_table'), getattr(torch, 'long')\n"
    ),
    "setattr with a literal name": "def f(x):\n    setattr(x, 'seq_len', 3)\n",
    "a dataclass and its fields": (
        "import dataclasses\nfrom dataclasses import dataclass, field\n\n"
        "@dataclasses.dataclass(frozen=True)\nclass A:\n"
        "    a: int = dataclasses.field(default=0)\n\n"
        "@dataclass\nclass B(A):\n    b: list = field(default_factory=list)\n"
    ),
    "bases: a class statement's, a library's, a builtin's": (
        "import abc\nimport typing\nimport torch\nfrom collections.abc import Collection\n\n"
        "T = typing.TypeVar('T')\n\nclass A(abc.ABC):\n    pass\n\n"
        "class B(A, typing.Generic[T]):\n    pass\n\nclass C(torch.nn.Module):\n    pass\n\n"
        "class OOM(RuntimeError):\n    pass\n\nclass D(Collection[int]):\n    pass\n"
    ),
    "type of one argument": "def f(x):\n    return type(x).__name__, type(x) is int\n",
    "type as a name, a class test and an annotation": (
        "import dataclasses\n\n@dataclasses.dataclass\nclass Step:\n    type: str = 'decode'\n\n"
        "def f(c: type['Step'], d: type = int) -> bool:\n    return isinstance(c, type)\n"
    ),
    "a class body's aliases of its special methods": (
        "class A:\n    def __str__(self):\n        return 'a'\n\n    __repr__ = __str__\n"
    ),
    "a class's name": (
        "class A:\n    def __repr__(self):\n"
        "        return f'{type(self).__name__}({self.__class__.__qualname__})'\n"
    ),
    "a function's own names that are builtins' too": (
        "def f():\n    vars = [1]\n    return vars\n\ndef g(getattr):\n    return getattr(1)\n"
    ),
    "annotations as strings": (
        "import torch\nimport typing\n\n"
        "def f(x: 'torch.Tensor', b: typing.Literal['torch', 'locals']) -> 'list[int]':\n"
        "    y: 'int' = 1\n"
    ),
    "plain strings": "MESSAGES = ['OOM: out of blocks', 'torch', 'getattr', '__import__']\n",
    "an enum's members and an exception's cause": (
        "import enum\n\nclass P(enum.Enum):\n    LIFO = 1\n\n"
        "def f(name, error):\n    return P.__members__[name], error.__cause__\n"
    ),
    "a frozen dataclass's own setattr": (
        "import dataclasses\n\n@dataclasses.dataclass(frozen=True)\nclass R:\n    a: int\n\n"
        "    def __post_init__(self):\n        object.__setattr__(self, 'a', 1)\n"
    ),
    "__name__ and __all__": "__all__ = ['A']\nif __name__ == '__main__':\n    pass\n",
    "hasattr with any name": "def f(x, name):\n    return hasattr(x, name)\n",
}
# Code the rule refuses, and what it says.
REFUSALS = {
    "an unlisted module": (
        "import os\n",
        "line 1 imports os, a module outside the contract's list",
    ),
    "from an unlisted module": (
        "from sys import modules\n",
        "imports sys, a module outside",
    ),
    "a private module": (
        "import torch._dynamo\n",
        "imports torch._dynamo, a private module",
    ),
    "an unlisted submodule": (
        "import torch.package\n",
        "imports torch.package, a submodule outside the contract's list: torch.nn",
    ),
    "the bytecode replay": (
        "import zipimport\ncode = zipimport.marshal.loads(b'')\n",
        "imports zipimport, a module outside",
    ),
    "a module through another": (
        "import dataclasses\nmodules = dataclasses.sys.modules\n",
        "line 2 reads dataclasses.sys, which is the module sys, a module outside",
    ),
    "typing.sys": (
        "import typing\nm = typing.sys\n",
        "reads typing.sys, which is the module sys",
    ),
    "enum.sys imported": (
        "from enum import sys\n",
        "reads enum.sys, which is the module sys",
    ),
    "torch.os": (
        "import torch\nm = torch.os\n",
        "reads torch.os, which is the module os",
    ),
    "a private name": (
        "import torch\nc = torch._C\n",
        "reads torch._C, not a public name",
    ),
    "a module's dunder": (
        "import math\nd = math.__dict__\n",
        "reads .__dict__, a special attribute the rule does not list",
    ),
    "torch.load": (
        "import torch\nf = torch.load\n",
        "reads torch.load, which loads or builds",
    ),
    "a module as a value": (
        "import dataclasses as d\nm = d\n",
        "line 2 uses the module d as a",
    ),
    "a module passed": (
        "import math\nprint(math)\n",
        "uses the module math as a value",
    ),
    "a submodule as a value": (
        "import torch\nF = torch.nn.functional\n",
        "uses the module torch.nn.functional",
    ),
    "a submodule by getattr": (
        "import torch\nF = getattr(torch, 'nn')\n",
        "uses the module torch.nn as",
    ),
    "a read on the way to a change": (
        "import dataclasses\ndataclasses.sys.modules['x'].y = 1\n",
        "reads dataclasses.sys, which is the module sys",
    ),
    "a library's class patched": (
        "import torch\ntorch.Tensor.add = max\n",
        "changes torch.Tensor.add, a library's",
    ),
    "a library's class patched by setattr": (
        "import torch\nsetattr(torch.Tensor, 'add', max)\n",
        "changes torch.Tensor.add, a library's",
    ),
    "a namespace by __dict__": (
        "d = object.__dict__\n",
        "reads .__dict__, a special attribute the rule does not list",
    ),
    "a namespace by __getstate__": (
        "d = object.__getstate__(type)\n",
        "reads .__getstate__",
    ),
    "attrgetter": (
        "import operator\ng = operator.attrgetter('a')\n",
        "reads operator.attrgetter, which reaches attributes by names given as data",
    ),
    "wraps imported": ("from functools import wraps\n", "reads functools.wraps, which reaches"),
    "the fields dataclasses builds code from": (
        "import dataclasses\nf = dataclasses.fields\n",
        "reads dataclasses.fields, which hands out the fields dataclasses builds code from",
    ),
    "a class from a namespace": (
        "C = type('C', (), {'x': 1})\n",
        "calls type() with other than one argument",
    ),
    "type as a value": ("T = type\n", "reads type other than as type(x)"),
    "a metaclass by name": (
        "import abc\nM = abc.ABCMeta\n",
        "which makes classes from a namespace",
    ),
    "a metaclass by keywords": (
        "class C(**{'metaclass': object}):\n    pass\n",
        "defines a class with a metaclass",
    ),
    "a base a call made": (
        "import abc\n\nclass M(type(abc.ABC)):\n    pass\n",
        "line 3 derives a class from type(abc.ABC), not a class statement's or a library's",
    ),
    "a base bound otherwise": (
        "class A:\n    pass\n\nA = 1\n\nclass B(A):\n    pass\n",
        "derives a class from A, not a class statement's",
    ),
    "a dataclass made by a call": (
        "import dataclasses\n\nclass A:\n    a: int\n\nB = dataclasses.dataclass(A)\n",
        "uses dataclasses.dataclass other than as a class statement's decorator",
    ),
    "a field kept": (
        "import dataclasses\nf = dataclasses.field(default=0)\n",
        "uses dataclasses.field other than as a field in a dataclass's body",
    ),
    "a field in a class no dataclass decorates": (
        "from dataclasses import field\n\nclass A:\n    a: int = field(default=0)\n",
        "line 4 uses dataclasses.field other than as a field",
    ),
    "an import in a class body's block": (
        "class Hold:\n    if True:\n        import dataclasses\n",
        "line 3 imports a module in a class body",
    ),
    "a star import": ("from .block_allocator import *\n", "imports * from block_allocator"),
    "an import from outside the folder": (
        "from .. import grader\n",
        "imports from outside the submission's folder",
    ),
    "a library's item changed": (
        "import functools\nfunctools.WRAPPER_ASSIGNMENTS[0] = 1\n",
        "changes functools.WRAPPER_ASSIGNMENTS[0], a library's",
    ),
    "a dataclass by getattr": (
        "import dataclasses\nd = getattr(dataclasses, 'dataclass')\n",
        "uses dataclasses.dataclass other than as a class statement's decorator",
    ),
    "a field's function kept in a dataclass": (
        "from dataclasses import dataclass, field\n\n@dataclass\nclass A:\n    f: object = field\n",
        "uses dataclasses.field other than as a field in a dataclass's body",
    ),
    "type subscripted outside an annotation": (
        "T = type[int]\n",
        "reads type other than as type(x)",
    ),
    "an import in a class body": (
        "class X:\n    import dataclasses\n",
        "line 2 imports a module in a class body",
    ),
    "a hidden attribute in a match pattern": (
        "def f(g):\n    match g:\n        case object(__globals__=x):\n            return x\n",
        "reads .__globals__, a special attribute the rule does not list",
    ),
    "a setter with a computed name": (
        "def f(x, n):\n    object.__setattr__(x, n, 1)\n",
        "calls .__setattr__ with a computed name",
    ),
    "a setter with a hidden name": (
        "def f(c):\n    type.__setattr__(c, '__annotations__', {})\n",
        "reads .__annotations__, a special attribute the rule does not list",
    ),
    "a library's class changed by its setter": (
        "import torch\nobject.__setattr__(torch.Tensor, 'add', max)\n",
        "changes torch.Tensor.add, a library's",
    ),
    "a class changed": (
        "def f(t, C):\n    t.__class__ = C\n",
        "line 2 changes t.__class__, an object's class",
    ),
    "a submodule the grader has not loaded": (
        "import torch.nn.attention.flex_attention as fa\nw = fa.warnings\n",
        "reads torch.nn.attention.flex_attention.warnings, which is the module warnings",
    ),
    "a metaclass": (
        "import abc\n\nclass C(metaclass=abc.ABC):\n    pass\n",
        "line 3 defines a class with a metaclass",
    ),
    "a class derived from type": (
        "class M(type):\n    pass\n",
        "line 1 derives a class from type, not a class statement's or a library's",
    ),
    "a class body's annotations": (
        "class C:\n    x: int\n    __annotations__['y'] = int\n",
        "line 3 uses __annotations__, a special name the rule does not list",
    ),
    "a forward reference": (
        "import typing\nr = typing.ForwardRef('x')\n",
        "reads typing.ForwardRef, which compiles strings as code",
    ),
    "a builtin whose module binding never runs": (
        "def f(x, n):\n    return getattr(x, n)\n\nif False:\n    getattr = None\n",
        "line 2 calls getattr with a computed name",
    ),
    "a module patched": (
        "import torch\ntorch.equal = max\n",
        "changes torch.equal, a library's",
    ),
    "a module patched by setattr": (
        "import torch\nsetattr(torch, 'equal', max)\n",
        "changes torch.equal, a library's",
    ),
    "a library's star import": ("from typing import *\n", "imports * from typing"),
    "getattr on a module": (
        "import dataclasses\nm = getattr(dataclasses, 'sys')\n",
        "reads dataclasses.sys, which is the module sys",
    ),
    "getattr with a computed name": (
        "def f(x, n):\n    return getattr(x, n)\n",
        "line 2 calls getattr with a computed name",
    ),
    "getattr passed": (
        "import functools\ng = functools.partial(getattr)\n",
        "reads getattr other",
    ),
    "a function's globals": (
        "def f(g):\n    return g.__globals__\n",
        "reads .__globals__, a special attribute",
    ),
    "the subclasses": (
        "s = object.__subclasses__()\n",
        "reads .__subclasses__, a special attribute",
    ),
    "a builtin's module": (
        "b = print.__self__\n",
        "reads .__self__, a special attribute the rule does not list",
    ),
    "a forward reference's code": (
        "def f(r):\n    return r.__forward_code__\n",
        "reads .__forward_code__",
    ),
    "a function's builtins": (
        "def f(g):\n    return g.__builtins__\n",
        "reads .__builtins__",
    ),
    "a frame": (
        "def f(e):\n    return e.__traceback__\n",
        "reads .__traceback__, a special attribute",
    ),
    "a hidden name by getattr": (
        "def f(g):\n    return getattr(g, '__globals__')\n",
        "reads .__globals__, a special attribute the rule does not list",
    ),
    "vars": ("v = vars()\n", "line 1 reads vars, which finds names at run time"),
    "globals": ("def f():\n    return globals()\n", "reads globals, which finds names"),
    "__import__": (
        "m = __import__('os')\n",
        "reads __import__, which finds names at run time",
    ),
    "an evaluator of annotations": (
        "import typing\nh = typing.get_type_hints\n",
        "reads typing.get_type_hints, which evaluates annotations as code",
    ),
    "one imported": (
        "from functools import singledispatch\n",
        "reads functools.singledispatch, which evaluates annotations",
    ),
}


@pytest.mark.parametrize("case", KEPT)
def test_honest_code_keeps_the_rule(case: str) -> None:
    assert first_break("scheduler.py", KEPT[case].encode()) is None


@pytest.mark.parametrize("case", REFUSALS)
def test_each_way_out_is_refused_and_named(case: str) -> None:
    source, says = REFUSALS[case]
    broken = first_break("scheduler.py", source.encode())
    assert broken is not None, case
    assert says in broken, broken


def test_triton_is_the_kernel_files_alone() -> None:
    source = b"import triton\nimport triton.language as tl\nx = tl.program_id, triton.cdiv\n"
    assert first_break("paged_attention.py", source) is None
    assert "imports triton, a module outside" in first_break("scheduler.py", source)
    runtime = b"import triton.runtime\n"
    assert "a submodule outside the contract's list: triton.language" in first_break(
        "paged_attention.py", runtime
    )


def test_a_builtin_read_as_itself_anywhere_is_held_everywhere() -> None:
    """A parameter named `getattr` in one function does not make another's read of the builtin
    the file's own: every read of the name is held to the rule (the first one breaks it); a
    function's own binding alone is its own."""
    source = b"def f(getattr):\n    return getattr\n\ndef g(x, n):\n    return getattr(x, n)\n"
    broken = first_break("scheduler.py", source)
    assert broken == "line 2 reads getattr other than called with a literal name", broken
    assert first_break("scheduler.py", b"def f(getattr):\n    return getattr\n") is None


def test_a_file_too_deep_to_read_is_not_run() -> None:
    broken = first_break("scheduler.py", ("x = a" + ".b" * 5000).encode())
    assert broken is not None
    assert "too deeply nested" in broken, broken


def test_the_contract_names_what_the_rule_lists() -> None:
    """Each name the rule allows or refuses by a list is in the imports' and the file rule's
    sentences of `exercises/README.md`, in English and in Chinese: a candidate reads the whole
    rule."""
    contract = (EXERCISES / "README.md").read_text()
    sections = [
        ("- Imports: the standard", "- A file that runs code"),
        ("- 导入：", "- 在运行时解码"),  # noqa: RUF001
    ]
    listed = [
        *DUNDERS, *HIDDEN, *NAME_DUNDERS, *BY_NAME, *NAMED, *REFUSED, *PLACES,
        *ALLOWED_IMPORTS,
        *(module for modules in SUBMODULES.values() for module in modules),
    ]  # fmt: skip
    for start, end in sections:
        text = contract[contract.index(start) : contract.index(end)]
        assert not [name for name in listed if f"`{name}`" not in text], start


def test_a_class_another_file_defines_is_a_base_here_too() -> None:
    files = {
        "prefix_cache.py": b"from . import block_allocator\n\n"
        b"class Mine(block_allocator.BlockAllocator):\n    pass\n",
        "block_allocator.py": b"class BlockAllocator:\n    pass\n\nOther = type(1)\n",
        "kv_cache_manager.py": b"from .block_allocator import BlockAllocator\n\n"
        b"class Mine(BlockAllocator):\n    pass\n",
        "scheduler.py": b"from .block_allocator import Other\n\nclass Mine(Other):\n    pass\n",
    }
    assert breaks(files) == {
        "scheduler.py": "line 3 derives a class from Other, not a class statement's or a library's"
    }


def test_a_module_another_file_imported_is_a_module_here_too() -> None:
    """`from .block_allocator import d`, where block_allocator.py imported dataclasses as d, is
    dataclasses: its reads are held as any module's, through any chain of relative imports."""
    files = {
        "block_allocator.py": b"import dataclasses as d\n",
        "kv_cache_manager.py": b"from .block_allocator import d\nx = d.sys\n",
        "scheduler.py": b"from .kv_cache_manager import d as e\ny = e\n",
        "prefix_cache.py": b"from . import block_allocator as b\nz = b.d.asdict, b.d\n",
    }
    assert breaks(files) == {
        "kv_cache_manager.py": "line 2 reads dataclasses.sys, which is the module sys, a module "
        f"outside the contract's list: {', '.join(sorted(ALLOWED_IMPORTS))}",
        "scheduler.py": "line 2 uses the module e as a value, not as module.name",
        "prefix_cache.py": "line 2 uses the module dataclasses as a value, not as module.name",
    }
