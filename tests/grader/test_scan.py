"""The static integrity scan: each snippet gives exactly the flags it should (line and what the
message says), ordinary code and the kit's own answers give none, and no source crashes it."""

from pathlib import Path

import pytest

from grader import KIT_ROOT
from grader.scan import CODE_CHARS, UNLISTED, decoded_code, scan_files, syntax_errors

ROOT = KIT_ROOT


def seen(source: str | bytes, file: str = "scheduler.py") -> list[tuple[int, str]]:
    """(line, message) of each flag the scan raises on one file, but those of an import outside
    the contract's list (`test_an_import_outside_the_contracts_list_is_a_flag` has them)."""
    data = source.encode() if isinstance(source, str) else source
    flags = scan_files({file: data})
    return [(flag["line"], flag["message"]) for flag in flags if UNLISTED not in flag["message"]]


FLAGGED = [
    # the kit's own packages, and ready-made kernels
    pytest.param("import grader.worker", [(1, "imports grader.worker (the kit's own code)")]),
    pytest.param("from kernels import paged", [(1, "imports kernels.paged (the kit's own")]),
    pytest.param("import full_kit.demo", [(1, "imports full_kit.demo (the kit's own code)")]),
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

# What a worker would need to leave its sandbox or read the grader: reaching modules by name,
# /proc and raw descriptors, new processes and sessions, loading code from a path, stack frames.
ESCAPES = [
    # from any file: the dispatch mode, Triton's launchers, the object graph, bytecode
    pytest.param(
        "from torch.utils import _python_dispatch as d\nd._disable_current_modes()",
        [(1, "imports torch.utils._python_dispatch ("), (2, "uses torch.utils._python_dispatch.")],
    ),
    pytest.param(
        "import triton\ntriton.runtime.jit.JITFunction.run = None",
        [(2, "uses triton.runtime.jit.JITFunction.run (Triton's launch machinery")],
    ),
    pytest.param(
        "x = object.__subclasses__()", [(1, "uses .__subclasses__ (walks the process's objects")]
    ),
    pytest.param("f = g.__globals__", [(1, "uses .__globals__ (walks the process's objects")]),
    pytest.param("import marshal", [(1, "imports marshal (reads or builds bytecode")]),
    # getattr, setattr, delattr on the modules that reach the system, by a literal or computed name
    pytest.param(
        "import os\ngetattr(os, 'kill')(1, 9)",
        [(2, "uses getattr on os.kill (dynamic attribute access: can end processes)")],
    ),
    pytest.param("import os as o\nf = getattr(o, 'kill')", [(2, "uses getattr on os.kill (")]),
    pytest.param(
        "import os\nf = getattr(os, name)",
        [(2, "uses getattr on an attribute of os (dynamic attribute access)")],
    ),
    pytest.param("import sys\nf = getattr(sys, '_getframe')", [(2, "on sys._getframe (dynamic")]),
    pytest.param("import sys as s\nf = getattr(s, 'mod' + 'ules')", [(2, "an attribute of sys")]),
    pytest.param(
        "import builtins as b\nf = getattr(b, name)",
        [(1, "imports builtins"), (2, "uses getattr on an attribute of builtins (dynamic")],
    ),
    pytest.param(
        "f = getattr(__builtins__, 'eval')",
        [(1, "uses getattr on builtins.eval (dynamic attribute access: runs code from a string)")],
    ),
    pytest.param(
        "import signal\nsetattr(signal, 'SIGTERM', 0)",
        [(1, "imports signal"), (2, "uses setattr on signal.SIGTERM (dynamic attribute access)")],
    ),
    pytest.param(
        "import subprocess as sp\nrun = getattr(sp, 'run')",
        [(1, "imports subprocess"), (2, "uses getattr on subprocess.run (dynamic attribute")],
    ),
    pytest.param("import os\ndelattr(os, 'kill')", [(2, "deletes os.kill (patches a library)")]),
    pytest.param("setattr(__builtins__, 'len', f)", [(1, "assigns builtins.len (patches a")]),
    # /proc, in any string that starts a path there
    pytest.param(
        "x = '/proc/self/mem'", [(1, "names '/proc/self/mem' (reads processes through /proc)")]
    ),
    pytest.param("x = b'/proc/self/maps'", [(1, "names b'/proc/self/maps' (reads processes")]),
    pytest.param("x = f'/proc/{pid}/environ'", [(1, "names '/proc/' (reads processes through")]),
    pytest.param("x = '/proc/' + str(pid)", [(1, "names '/proc/' (reads processes")]),
    pytest.param("x = f'{root}/proc/{pid}'", [(1, "names '/proc/' (reads processes")]),
    pytest.param("import os\np = os.path.join('/proc', pid)", [(2, "names '/proc' (reads")]),
    pytest.param(
        "maps = open('/proc/self/maps')",
        [(1, "uses open (file access)"), (1, "names '/proc/self/maps'")],
    ),
    # raw descriptors, processes, sessions, signals, special files
    pytest.param("import os\nfd = os.open('x', 0)", [(2, "uses os.open (file access)")]),
    pytest.param("import os\ndata = os.read(fd, 10)", [(2, "uses os.read (file access)")]),
    pytest.param("import os\nos.pread(fd, 10, 0)", [(2, "uses os.pread (file access)")]),
    pytest.param("import os\nos.write(fd, b'x')", [(2, "uses os.write (file access)")]),
    pytest.param("import os as o\no.read(fd, 10)", [(2, "uses os.read (file access)")]),
    pytest.param("from os import read", [(1, "imports os.read (file access)")]),
    pytest.param("import os\nos.forkpty()", [(2, "uses os.forkpty (can start processes)")]),
    pytest.param("import os\nos.vfork()", [(2, "uses os.vfork (can start processes)")]),
    pytest.param("import os\nos.setsid()", [(2, "uses os.setsid (leaves the worker's process")]),
    pytest.param("import os\nos.setpgid(0, 0)", [(2, "uses os.setpgid (leaves the worker's")]),
    pytest.param("import os\nos.posix_spawn(p, a, e)", [(2, "uses os.posix_spawn (can start")]),
    pytest.param("import os\nos.posix_spawnp(p, a, e)", [(2, "uses os.posix_spawnp (can")]),
    pytest.param("from os import posix_spawn", [(1, "imports os.posix_spawn (can start")]),
    pytest.param("import os\nos.mkfifo('p')", [(2, "uses os.mkfifo (makes a special file)")]),
    pytest.param("import os\nos.mknod('p')", [(2, "uses os.mknod (makes a special file)")]),
    pytest.param("import os\nos.killpg(0, 9)", [(2, "uses os.killpg (can end processes)")]),
    pytest.param("from os import kill", [(1, "imports os.kill (can end processes)")]),
    pytest.param(
        "import signal\nsignal.pthread_kill(t, 9)",
        [(1, "imports signal"), (2, "uses signal.pthread_kill (can end processes)")],
    ),
    pytest.param("from signal import pthread_kill", [(1, "imports signal.pthread_kill (can end")]),
    # code loaded from a path or by a computed name
    pytest.param("import runpy", [(1, "imports runpy (runs code from a file)")]),
    pytest.param("from runpy import run_path", [(1, "imports runpy.run_path (runs code from")]),
    pytest.param(
        "import runpy as r\nr.run_path('x.py')",
        [(1, "imports runpy"), (2, "uses runpy.run_path (runs code from a file)")],
    ),
    pytest.param(
        "import importlib.util\ns = importlib.util.spec_from_file_location('m', p)",
        [(1, "imports importlib.util"), (2, "uses importlib.util.spec_from_file_location (lo")],
    ),
    pytest.param(
        "from importlib.machinery import SourceFileLoader",
        [(1, "imports importlib.machinery.SourceFileLoader (loads code from a file)")],
    ),
    pytest.param(
        "import importlib.machinery as m\nm.SourcelessFileLoader('m', p)",
        [(1, "imports importlib.machinery"), (2, "uses importlib.machinery.SourcelessFileLoader")],
    ),
    pytest.param(
        "import importlib\nm = importlib.import_module(name)",
        [(1, "imports importlib"), (2, "uses importlib.import_module with a computed name")],
    ),
    pytest.param(
        "from importlib import import_module as im\nm = im(f'{x}')",
        [(1, "imports importlib.import_module"), (2, "importlib.import_module with a computed")],
    ),
    pytest.param(
        "import builtins\nm = builtins.__import__(name)",
        [(1, "imports builtins"), (2, "uses builtins.__import__ with a computed name")],
    ),
    pytest.param("m = __import__(name)", [(1, "uses __import__ (imports by name)")]),
    # stack frames and tracebacks: one flag for a whole chain
    pytest.param(
        "g = e.__traceback__.tb_frame.f_back.f_globals['grader']",
        [(1, "uses .__traceback__.tb_frame.f_back.f_globals (reads stack frames)")],
    ),
    pytest.param("t = tb.tb_next", [(1, "uses .tb_next (reads stack frames)")]),
    pytest.param("f = frame.f_back", [(1, "uses .f_back (reads stack frames)")]),
    pytest.param("g = frame.f_locals", [(1, "uses .f_locals (reads stack frames)")]),
    pytest.param("b = frame.f_builtins", [(1, "uses .f_builtins (reads stack frames)")]),
    pytest.param("c = frame.f_code", [(1, "uses .f_code (reads stack frames)")]),
    pytest.param("f = gen.gi_frame", [(1, "uses .gi_frame (reads stack frames)")]),
    pytest.param("f = coro.cr_frame", [(1, "uses .cr_frame (reads stack frames)")]),
    pytest.param(
        "import sys\ng = sys._getframe(1).f_globals",
        [(2, "uses .f_globals (reads stack frames)"), (2, "uses sys._getframe (introspection)")],
    ),
    pytest.param(
        "import inspect as i\nf = i.currentframe()",
        [(1, "imports inspect"), (2, "uses inspect.currentframe (introspection)")],
    ),
    pytest.param("from inspect import currentframe", [(1, "imports inspect.currentframe")]),
    # how the answer key, or the worker's own state, was searched for from inside a worker
    pytest.param(
        "import sys\nm = vars(sys)['modules']", [(2, "uses vars(sys) (dynamic attribute access)")]
    ),
    pytest.param("import os\nd = os.__dict__", [(2, "uses os.__dict__ (dynamic attribute")]),
    pytest.param("import _signal", [(1, "imports _signal (handles signals)")]),
    pytest.param("import zipimport", [(1, "imports zipimport (loads code from an archive)")]),
    pytest.param(
        "import types\nc = types.CodeType", [(2, "uses types.CodeType (builds code objects)")]
    ),
    pytest.param(
        "import gc\no = gc.get_objects()",
        [(1, "imports gc (introspection)"), (2, "uses gc.get_objects (walks the process's")],
    ),
    pytest.param("import io\nf = io.open(p)", [(2, "uses io.open (file access)")]),
    pytest.param(
        "b = m.__loader__.get_data(p)",
        [(1, "uses .get_data (reads module files through"), (1, "uses .__loader__ (reads")],
    ),
    pytest.param("s = __loader__", [(1, "uses __loader__ (reads module files through")]),
]


@pytest.mark.parametrize(("source", "expected"), FLAGGED + ESCAPES)
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
    # allocator and kernel code that merely looks like the escapes
    "name = 'free'\nfn = getattr(self, name)\nok = hasattr(self.allocator, 'free')",
    "import torch\nf = getattr(torch, name)\ny = torch.matmul(a, b)",
    "import os\nroot = getattr(os.path, 'sep')\nhas_fork = hasattr(os, 'fork')",
    "import os\npath = os.path.join('/process', 'procfs', '/procs')",
    "x = 'see /proc/meminfo'\ny = f'{base}/process/{pid}'",
    "allocator.free(ids)\nself.read(block)\nstream.write(out)",
    "self.frame = frame\nblock.f_next = None\nerror.traceback = tb",
    "import os\nn = os.cpu_count()\nb = os.path.basename(p)\nv = os.environ.get('X')",
]


@pytest.mark.parametrize("source", ORDINARY)
def test_ordinary_code_gives_no_flag(source: str) -> None:
    assert seen(source) == []


@pytest.mark.parametrize(
    ("source", "file", "unlisted"),
    [
        ("import torch\nfrom collections import deque\nimport heapq, math", "scheduler.py", []),
        ("from .threading import Worker\nfrom __future__ import annotations", "scheduler.py", []),
        ("import triton.language as tl\nimport numpy as np", "paged_attention.py", []),
        ("import numpy as np", "kv_cache_manager.py", ["numpy"]),
        ("import triton", "scheduler.py", ["triton"]),
        ("import time, os.path\nfrom random import Random", "block_allocator.py",
         ["time", "os.path", "random.Random"]),
    ],
)  # fmt: skip
def test_an_import_outside_the_contracts_list_is_a_flag(source, file, unlisted) -> None:
    flags = [flag["message"] for flag in scan_files({file: source.encode()})]
    assert [flag for flag in flags if UNLISTED in flag] == [
        f"imports {name} ({UNLISTED})" for name in unlisted
    ]


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("x = 1\nexec(code)", "line 2 reads exec"),
        ("import marshal as m\nf = m.loads(blob)", "line 2 reads marshal.loads"),
        ("from marshal import loads\nloads(blob)", "line 2 reads marshal.loads"),
        ("import builtins\nbuiltins.eval(text)", "line 2 reads builtins.eval"),
        ("from builtins import compile as c\nc(s, 'f', 'exec')", "line 2 reads builtins.compile"),
        ("def f():\n    return eval('1') + exec('2')", "line 2 reads eval"),
        ("class A:\n    eval('1')", "line 2 reads eval"),
        # read, not called; or called where another scope binds the name
        ("run = exec\nrun(code)", "line 1 reads exec"),
        ("list(map(exec, codes))", "line 1 reads exec"),
        ("def f(exec):\n    pass\nexec(code)", "line 3 reads exec"),
        # a module's binding of the name may not have run where it is read, or never runs
        ("def compile(x):\n    return x\ncompile(1)", "line 3 reads compile"),
        ("eval = print\neval('1')", "line 2 reads eval"),
        (
            "def run():\n    return eval('1')\nrun()\nif False:\n    eval = None",
            "line 2 reads eval",
        ),
        # a function's own names, and other libraries' methods of the same name, are not
        ("model.eval()\nfn = torch.compile(f)\np = re.compile('x')", None),
        ("def run(exec):\n    exec()", None),
        ("def outer():\n    exec = print\n    def inner():\n        exec(1)", None),
    ],
)
def test_a_file_that_runs_code_it_decodes_is_not_run(source: str, reason: str | None) -> None:
    reasons = decoded_code({"scheduler.py": source.encode(), "broken.py": b"def f(:"})
    if reason is None:
        assert reasons == {}
    else:
        assert reasons == {"scheduler.py": f"{reason}, which runs code decoded at run time"}


def test_a_file_too_deep_to_read_is_not_run() -> None:
    reasons = decoded_code({"scheduler.py": ("x = a" + ".b" * 5000).encode()})
    assert reasons == {"scheduler.py": "too deeply nested for the grader to read what it runs"}


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
            "line": 1,
            "message": f"imports os ({UNLISTED})",
        },
        {
            "source": "scan",
            "file": "scheduler.py",
            "line": 2,
            "message": "uses os.system (runs a shell command)",
        },
    ]


SYNTAX_ERRORS = [
    # source, then the error's line, column, the start of its message and the line's code
    pytest.param("def f(:\n    pass\n", 1, 7, "invalid syntax", "def f(:", id="syntax"),
    pytest.param("x = 1\ny = 2\n    z = 3\n", 3, 4, "unexpected indent", "    z = 3", id="indent"),
    pytest.param(b"x = 1\nab\x00\n", 2, 3, "source code", "ab\x00", id="null byte"),
    pytest.param(b"x = '\xff'\n", 1, 8, "(unicode error)", "x = '\ufffd'", id="not utf-8"),
    # Past the parser: Python's compiler refuses it, and so does an import.
    pytest.param("import os\nreturn os\n", 2, 1, "'return' outside function", "return os"),
]


@pytest.mark.parametrize(("source", "line", "column", "message", "code"), SYNTAX_ERRORS)
def test_a_file_that_does_not_compile_is_a_syntax_error_and_no_flag(
    source: str | bytes, line: int, column: int, message: str, code: str
) -> None:
    """A syntax error is the candidate's failure, not a lead for a reviewer: `syntax_errors`
    says where, with the offending line; the integrity scan says nothing of the file."""
    data = source.encode() if isinstance(source, str) else source
    assert seen(data) == []
    [error] = syntax_errors({"scheduler.py": data, "block_allocator.py": b"x = 1\n"})
    assert error["message"].startswith(message)
    assert error | {"message": message} == {
        "file": "scheduler.py",
        "line": line,
        "column": column,
        "message": message,
        "code": code,
    }


def test_a_syntax_error_keeps_a_bounded_line_and_a_column_only_within_it() -> None:
    [error] = syntax_errors({"scheduler.py": b"x = [" + b"1, " * 1000 + b"\n"})
    assert error["line"] == 1
    assert len(error["code"]) == CODE_CHARS
    assert error["column"] is None or error["column"] <= CODE_CHARS + 1


def test_files_that_compile_have_no_syntax_error_and_none_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nx = 'a' is 'a'\n"
    assert syntax_errors({"scheduler.py": source.encode()}) == []
    assert not marker.exists()


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


# -- the kernel file (`scan_kernel`): torch attention outside kernels, ways around the dispatch mode


def kernel_seen(source: str) -> list[tuple[int, str]]:
    """(line, message) of each flag the scan raises on `paged_attention.py`."""
    flags = scan_files({"paged_attention.py": source.encode()})
    return [(flag["line"], flag["message"]) for flag in flags]


OUTSIDE = "outside any @triton.jit kernel (attention computed by torch)"
SWITCHES_OFF = "can switch off the grader's torch dispatch mode"
LAUNCH_MACHINERY = "can hide torch work"

KERNEL_FLAGGED = [
    # attention computed by torch in the wrapper
    pytest.param("import torch\ns = torch.matmul(q, k)", [(2, f"uses torch.matmul {OUTSIDE}")]),
    pytest.param("import torch as t\ns = t.bmm(q, k)", [(2, "uses torch.bmm outside any")]),
    pytest.param("from torch import einsum\ns = einsum('d,td->t', q, k)", [(2, "torch.einsum")]),
    pytest.param("s = q @ k.T\nacc @= v", [(1, "uses the @ operator"), (2, "uses the @ operator")]),
    pytest.param("p = scores.softmax(dim=-1)", [(1, f"calls .softmax() {OUTSIDE}")]),
    pytest.param("p = (s - m).exp()", [(1, "calls .exp() outside any")]),
    pytest.param("import torch\np = torch.softmax(s, -1)", [(2, "uses torch.softmax")]),
    pytest.param(
        "import torch.nn.functional as F\no = F.scaled_dot_product_attention(q, k, v)",
        [(2, "uses torch.nn.functional.scaled_dot_product_attention outside any")],
    ),
    pytest.param(
        "import torch\np = torch.nn.functional.softmax(s, dim=-1)",
        [(2, "uses torch.nn.functional.softmax outside any")],
    ),
    pytest.param(
        "keys = k_cache[blocks]", [(1, f"indexes k_cache with a computed index {OUTSIDE}")]
    ),
    pytest.param("v = v_cache[table[s], :, h]", [(1, "indexes v_cache with a computed index")]),
    pytest.param("import torch\nf = getattr(torch, 'einsum')", [(2, "uses torch.einsum outside")]),
    pytest.param("import torch\nc = torch.compile(attention)", [(2, "uses torch.compile outside")]),
    pytest.param("import torch\ns = torch.ops.aten.mm(q, k)", [(2, "uses torch.ops.aten.mm")]),
    pytest.param(
        "import torch\nimport triton\n@triton.jit\ndef k(x):\n    y = torch.exp(x)",
        [(5, "uses torch.exp inside @triton.jit kernel k (runs only under Triton's interpreter")],
    ),
    # computing outside torch and Triton
    pytest.param("import numpy as np", [(1, "imports numpy (computes outside torch and Triton")]),
    pytest.param("k = k_cache.numpy()\nn = q.tolist()", [(1, "calls .numpy()"), (2, ".tolist()")]),
    # ways around the dispatch mode
    pytest.param(
        "import torch\nwith torch.utils._python_dispatch._disable_current_modes():\n    pass",
        [(2, f"uses torch.utils._python_dispatch._disable_current_modes ({SWITCHES_OFF})")],
    ),
    pytest.param(
        "from torch.utils._python_dispatch import _disable_current_modes as off\nwith off():\n"
        "    pass",
        [(1, "imports torch.utils._python_dispatch._disable"), (2, "_disable_current_modes")],
    ),
    pytest.param(
        "from torch.utils._python_dispatch import TorchDispatchMode\nclass M(TorchDispatchMode):"
        "\n    pass",
        [(1, "imports torch.utils._python_dispatch.TorchDispatchMode"), (2, SWITCHES_OFF)],
    ),
    pytest.param(
        "import torch\nmode = torch._C._pop_torch_dispatch_stack()",
        [(2, "uses torch._C._pop_torch_dispatch_stack")],
    ),
    pytest.param("import torch\ntorch._C._set_grad_enabled(False)", [(2, "torch internals")]),
    pytest.param(
        "from triton.runtime.jit import JITFunction\nJITFunction.run = run",
        [(1, "imports triton.runtime.jit.JITFunction"), (2, "assigns triton.runtime.jit.JITF")],
    ),
    pytest.param(
        "import triton\ntriton.runtime.interpreter.InterpretedFunction.run = run",
        [(2, "assigns triton.runtime.interpreter.InterpretedFunction.run (patches Triton")],
    ),
    pytest.param(
        "from triton.runtime import interpreter\nf = interpreter.GridExecutor",
        [(1, LAUNCH_MACHINERY), (2, "uses triton.runtime.interpreter.GridExecutor")],
    ),
    pytest.param(
        "import torch\nf = getattr(torch, name)",
        [(2, "uses getattr on an attribute of torch (a computed name")],
    ),
    pytest.param(
        "import torch\nm = getattr(torch.utils, '_python_dispatch')",
        [(2, f"names '_python_dispatch' ({SWITCHES_OFF})")],
    ),
]


@pytest.mark.parametrize(("source", "expected"), KERNEL_FLAGGED)
def test_each_kernel_flag_is_seen_once_on_its_line(
    source: str, expected: list[tuple[int, str]]
) -> None:
    flags = kernel_seen(source)
    assert [line for line, _ in flags] == [line for line, _ in expected], flags
    for (_, message), (_, text) in zip(flags, expected, strict=True):
        assert text in message


KERNEL_ORDINARY = [
    # a wrapper's allocation, views, bookkeeping and launch
    "import torch\nout = torch.empty_like(q, memory_format=torch.contiguous_format)",
    "n = int(seq_lens.max())\nt = block_tables.long()\nk = k_cache.view(-1, d)",
    "block_size, num_kv_heads = k_cache.shape[1:3]\nstrides = (*k_cache.stride(),)",
    "tail = k_cache[0]\nlast = v_cache[-1, :, 0]\nhead = k_cache[:, :n]\nall_ = v_cache[...]",
    "import math\nscale = 1.0 / math.sqrt(head_dim)\ne = math.exp(1.0)",
    "import triton\ngrid = (triton.cdiv(n, 16), triton.next_power_of_2(d))",
    "import torch\nx = getattr(torch, 'float16')\ny = torch.float32",
    # Triton's language inside a kernel: tl.exp, @, a cache pointer indexed by offsets
    "import triton\nimport triton.language as tl\n@triton.jit\ndef k(k_cache_ptr, offs):\n"
    "    x = tl.load(k_cache_ptr + offs)\n    y = tl.exp(x) @ x\n    z = x.exp()",
    "from triton import jit\n@jit\ndef k(x):\n    y = x @ x",
    "import triton\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    y = x @ x",
    "import triton\nfrom triton.runtime import driver\nprops = driver.active.utils",
    "def helper():\n    '''Docstrings may say dispatch, torch._C and JITFunction.'''",
]


@pytest.mark.parametrize("source", KERNEL_ORDINARY)
def test_ordinary_kernel_code_gives_no_flag(source: str) -> None:
    assert kernel_seen(source) == []


def test_the_kernel_flags_are_for_the_kernel_file_only() -> None:
    source = b"import torch\ns = torch.matmul(q, k)\nkeys = k_cache[blocks]\n"
    assert scan_files({"kv_cache_manager.py": source, "scheduler.py": source}) == []
    assert [flag["file"] for flag in scan_files({"paged_attention.py": source})] == [
        "paged_attention.py",
        "paged_attention.py",
    ]


def test_a_kernel_file_that_does_not_parse_gives_no_flag() -> None:
    assert kernel_seen("def f(:\n    x = q @ k\n") == []
