"""The static integrity scan: each snippet gives exactly the flags it should (line and what the
message says), ordinary code and the kit's own answers give none, and no source crashes it."""

from pathlib import Path

import pytest

from grader.scan import scan_files

ROOT = Path(__file__).resolve().parent.parent


def seen(source: str | bytes) -> list[tuple[int, str]]:
    """(line, message) of each flag the scan raises on one file."""
    data = source.encode() if isinstance(source, str) else source
    return [(flag["line"], flag["message"]) for flag in scan_files({"scheduler.py": data})]


FLAGGED = [
    # the kit's own packages, and ready-made kernels
    pytest.param("import grader.worker", [(1, "imports grader.worker (the kit's own code)")]),
    pytest.param("from kernels import paged", [(1, "imports kernels.paged (the kit's own")]),
    pytest.param("import solutions.block_allocator", [(1, "imports solutions.block_allocator")]),
    pytest.param("from exercises import scheduler", [(1, "imports exercises.scheduler")]),
    pytest.param("import tests.checks", [(1, "imports tests.checks")]),
    pytest.param(
        "import importlib\nimportlib.import_module('grader')",
        [(1, "imports importlib (introspection)"), (2, "imports grader (the kit's own code)")],
    ),
    pytest.param(
        "m = __import__('solutions.scheduler')",
        [(1, "imports solutions.scheduler (the kit's"), (1, "uses __import__")],
    ),
    pytest.param("import vllm", [(1, "imports vllm (a ready-made kernel)")]),
    pytest.param("from flash_attn import flash_attn_func", [(1, "imports flash_attn.")]),
    pytest.param("import flashinfer", [(1, "imports flashinfer")]),
    pytest.param("import xformers.ops as xops", [(1, "imports xformers.ops")]),
    # processes, threads, native code, signals, sockets
    pytest.param("import ctypes", [(1, "imports ctypes (runs native code)")]),
    pytest.param("import cffi", [(1, "imports cffi (runs native code)")]),
    pytest.param("import subprocess", [(1, "imports subprocess (can start processes)")]),
    pytest.param("from multiprocessing import Pool", [(1, "imports multiprocessing.Pool")]),
    pytest.param("import threading", [(1, "imports threading (can start threads)")]),
    pytest.param("import _thread", [(1, "imports _thread (can start threads)")]),
    pytest.param("from concurrent import futures", [(1, "imports concurrent.futures (can")]),
    pytest.param("import signal", [(1, "imports signal (handles signals)")]),
    pytest.param("import socket", [(1, "imports socket (opens connections)")]),
    pytest.param("import os\nos.system('ls')", [(2, "uses os.system (runs a shell command)")]),
    pytest.param("import os\nos.popen('ls')", [(2, "uses os.popen (runs a shell command)")]),
    pytest.param("import os\npid = os.fork()", [(2, "uses os.fork (can start processes)")]),
    pytest.param("import os\nos.execv('a', [])", [(2, "uses os.execv (can start processes)")]),
    pytest.param("import os\nos.spawnl(0, 'a')", [(2, "uses os.spawnl (can start processes)")]),
    pytest.param("import os\nos.kill(1, 9)", [(2, "uses os.kill (can end processes)")]),
    pytest.param("import os\nos._exit(0)", [(2, "uses os._exit (can end processes)")]),
    pytest.param("import sys\nsys.exit(0)", [(2, "uses sys.exit (can end processes)")]),
    # introspection
    pytest.param("import gc", [(1, "imports gc (introspection)")]),
    pytest.param("import inspect", [(1, "imports inspect (introspection)")]),
    pytest.param("import builtins", [(1, "imports builtins (introspection)")]),
    pytest.param("import importlib.util", [(1, "imports importlib.util (introspection)")]),
    pytest.param("import sys\nf = sys._getframe(1)", [(2, "uses sys._getframe (introspection)")]),
    pytest.param("import sys\nm = sys.modules['torch']", [(2, "uses sys.modules (intro")]),
    pytest.param("import sys\nsys.meta_path.insert(0, f)", [(2, "uses sys.meta_path")]),
    pytest.param("import sys\nsys.path.append('/x')", [(2, "uses sys.path (introspection)")]),
    pytest.param("x = __builtins__['len']", [(1, "uses __builtins__ (introspection)")]),
    # dynamic code and file access
    pytest.param("x = eval('1')", [(1, "uses eval (runs code from a string)")]),
    pytest.param("exec('x = 1')", [(1, "uses exec (runs code from a string)")]),
    pytest.param("c = compile('1', 'f', 'eval')", [(1, "uses compile (runs code from a")]),
    pytest.param("m = __import__('math')", [(1, "uses __import__ (imports by name)")]),
    pytest.param("run = eval", [(1, "uses eval")]),
    pytest.param("text = open('x').read()", [(1, "uses open (file access)")]),
    pytest.param("from pathlib import Path", [(1, "imports pathlib.Path (file access)")]),
    pytest.param("import shutil", [(1, "imports shutil (file access)")]),
    pytest.param("import os\nos.remove('x')", [(2, "uses os.remove (file access)")]),
    pytest.param("import os\nos.unlink('x')", [(2, "uses os.unlink (file access)")]),
    pytest.param("import os\nos.rename('x', 'y')", [(2, "uses os.rename (file access)")]),
    pytest.param("import os\nos.replace('x', 'y')", [(2, "uses os.replace (file access)")]),
    pytest.param("import os\nos.makedirs('x')", [(2, "uses os.makedirs (file access)")]),
    pytest.param("import os\nos.mkdir('x')", [(2, "uses os.mkdir (file access)")]),
    pytest.param("import os\nos.chdir('/')", [(2, "uses os.chdir (file access)")]),
    pytest.param("from os import system", [(1, "imports os.system (runs a shell command)")]),
    # patches to the libraries the grader checks with
    pytest.param("import torch\ntorch.equal = f", [(2, "assigns torch.equal (patches a library)")]),
    pytest.param("import torch\ntorch.Tensor.__eq__ = f", [(2, "assigns torch.Tensor.__eq__")]),
    pytest.param("import torch\ntorch.manual_seed += 1", [(2, "assigns torch.manual_seed")]),
    pytest.param("import torch\ntorch.x: int = 1", [(2, "assigns torch.x")]),
    pytest.param("import torch\ndel torch.equal", [(2, "deletes torch.equal (patches a library)")]),
    pytest.param("import torch\nsetattr(torch, 'equal', f)", [(2, "assigns torch.equal (patches")]),
    pytest.param("import torch\nsetattr(torch.Tensor, name, f)", [(2, "an attribute of torch.T")]),
    pytest.param("import torch\ndelattr(torch, 'equal')", [(2, "deletes torch.equal")]),
    pytest.param("import time\ntime.perf_counter = f", [(2, "assigns time.perf_counter")]),
    pytest.param("import builtins\nbuiltins.len = f", [(1, "imports builtins"), (2, "assigns b")]),
    pytest.param("__builtins__.len = f", [(1, "assigns builtins.len (patches a library)")]),
    pytest.param("import sys\nsys.stdout = f", [(2, "assigns sys.stdout")]),
    pytest.param("import os\nos.getpid = f", [(2, "assigns os.getpid")]),
    pytest.param("import pytest\npytest.approx = f", [(2, "assigns pytest.approx")]),
    pytest.param("import hypothesis\nhypothesis.given = f", [(2, "assigns hypothesis.given")]),
    pytest.param("import json\njson.dumps = f", [(2, "assigns json.dumps")]),
    pytest.param("import math\nmath.isclose = f", [(2, "assigns math.isclose")]),
    pytest.param("import random\nrandom.random = f", [(2, "assigns random.random")]),
    pytest.param("import torch\nfor torch.x in y:\n    pass", [(2, "assigns torch.x")]),
    pytest.param("import torch\ntorch.equal, x = f, 1", [(2, "assigns torch.equal")]),
    # aliases: the name a module was imported under is resolved
    pytest.param("import torch as t\nt.equal = f", [(2, "assigns torch.equal")]),
    pytest.param("import torch.testing\ntorch.equal = f", [(2, "assigns torch.equal (")]),
    pytest.param(
        "from torch import testing as tt\ntt.assert_close = f",
        [(2, "assigns torch.testing.assert_close (patches a library)")],
    ),
    pytest.param(
        "import torch.testing as tt\ntt.assert_close = f", [(2, "assigns torch.testing.")]
    ),
    pytest.param("from torch import Tensor\nTensor.__eq__ = f", [(2, "assigns torch.Tensor.__eq")]),
    pytest.param("import os as o\no.system('ls')", [(2, "uses os.system")]),
    pytest.param("import subprocess as sp", [(1, "imports subprocess (can start processes)")]),
    pytest.param("import torch as t\nsetattr(t, 'equal', f)", [(2, "assigns torch.equal")]),
    pytest.param(
        "import importlib as il\nil.import_module('tests')",
        [(1, "imports importlib"), (2, "imports tests")],
    ),
    # one flag per occurrence, on its own line
    pytest.param("x = eval('1')\n\ny = eval('2')", [(1, "uses eval"), (3, "uses eval")]),
    pytest.param(
        "import torch\n\ndef patch():\n    torch.equal = f\n    torch.allclose = f\n",
        [(4, "assigns torch.equal"), (5, "assigns torch.allclose")],
    ),
    pytest.param("from os import (\n    path,\n    system,\n)", [(3, "imports os.system")]),
    pytest.param("import math, \\\n    subprocess", [(2, "imports subprocess")]),
]


@pytest.mark.parametrize(("source", "expected"), FLAGGED)
def test_each_flag_is_seen_once_on_its_line(source: str, expected: list[tuple[int, str]]) -> None:
    flags = seen(source)
    assert [line for line, _ in flags] == [line for line, _ in expected], flags
    for (_, message), (_, text) in zip(flags, expected, strict=True):
        assert text in message


ORDINARY = [
    "import torch",
    "from collections import deque",
    "import heapq",
    "from .block_allocator import BlockAllocator",
    "from . import block_allocator",
    "from .threading import Worker  # the submission's own module",
    "open = False  # a name of its own, never read",
    "import math\nx = math.ceil(3 / 2) + math.inf",
    "import itertools",
    "from dataclasses import dataclass, field",
    "from typing import Any",
    "import triton\nimport triton.language as tl",
    "import torch\nsame = torch.equal(a, b)\nt = torch.Tensor.add",
    "import os\np = os.path.join('a', 'b')",
    "import time\nstart = time.perf_counter()",
    "import random\nrng = random.Random(0)",
    "import re\npattern = re.compile('x')",
    "model.eval()\nfn = torch.compile(f)\nself.open = True",
    "self.time = 0\nself.torch = None\nx.sys.path = []",
    "def evaluate(exec_time: float) -> None:\n    opened = exec_time",
]


@pytest.mark.parametrize("source", ORDINARY)
def test_ordinary_code_gives_no_flag(source: str) -> None:
    assert seen(source) == []


def test_the_kits_own_answers_and_stubs_give_no_flag() -> None:
    paths = [ROOT / "solutions" / "block_allocator.py", ROOT / "solutions" / "kv_cache_manager.py"]
    paths += sorted((ROOT / "exercises").glob("*.py"))
    files = {f"{path.parent.name}/{path.name}": path.read_bytes() for path in paths}
    assert len(files) >= 6
    assert scan_files(files) == []


def test_flags_are_whole_records_sorted_by_file_then_line() -> None:
    files = {
        "scheduler.py": b"import os\nos.system('ls')\n",
        "block_allocator.py": b"x = 1\nimport subprocess\nimport ctypes\n",
    }
    assert scan_files(files) == [
        {
            "source": "scan",
            "file": "block_allocator.py",
            "line": 2,
            "message": "imports subprocess (can start processes)",
        },
        {
            "source": "scan",
            "file": "block_allocator.py",
            "line": 3,
            "message": "imports ctypes (runs native code)",
        },
        {
            "source": "scan",
            "file": "scheduler.py",
            "line": 2,
            "message": "uses os.system (runs a shell command)",
        },
    ]


@pytest.mark.parametrize(
    ("source", "line", "text"),
    [
        pytest.param("def f(:\n    pass\n", 1, "does not parse: invalid syntax", id="syntax"),
        pytest.param(
            "x = 1\ny = 2\n    z = 3\n", 3, "does not parse: unexpected indent", id="indent"
        ),
        pytest.param(b"x = 1\x00\n", 1, "does not parse: ", id="null byte"),
        pytest.param(b"x = '\xff'\n", 1, "does not parse: ", id="not utf-8"),
    ],
)
def test_a_file_that_does_not_parse_gives_one_flag(
    source: str | bytes, line: int, text: str
) -> None:
    [(seen_line, message)] = seen(source)
    assert seen_line == line
    assert message.startswith(text)


def test_a_file_too_deep_to_walk_keeps_the_flags_seen_so_far_and_says_so() -> None:
    source = "import subprocess\nx = " + " + ".join(["1"] * 1500)
    assert seen(source) == [
        (1, "imports subprocess (can start processes)"),
        (1, "too deeply nested to scan (read it by hand)"),
    ]


def test_a_file_too_deep_to_parse_says_so() -> None:
    assert seen("x = " + "-" * 100_000 + "1") == [
        (1, "too deeply nested to scan (read it by hand)")
    ]


def test_the_scan_never_runs_the_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').close()\n"
    assert seen(source) == [(1, "uses open (file access)")]
    assert not marker.exists()
