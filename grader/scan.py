"""The static integrity scan: what in a submission's source a human reviewer should look at.

`scan_files` parses each file with `ast`; it never imports or runs the code. Each flag says what
was seen and where, `{"source": "scan", "file", "line", "message"}`: imports of the kit, of a
ready-made attention library or of any module the contract does not list (`ALLOWED_IMPORTS`),
processes, threads, signals, native code, introspection, dynamic code (`runpy`, `zipimport`,
loading a module from a path or a computed name, building code objects), file access (also by
descriptor or through `io`, and any string naming a `/proc` path), a module's loader
(`__loader__`, `get_data`), `getattr`/`setattr`/`delattr`/`vars`/`__dict__` on `os`, `sys`,
`builtins`, `signal` or `subprocess`, stack frames and tracebacks (`f_back`, `tb_frame`, ...),
the object graph (`gc.get_objects`, `__subclasses__`...), and assignments that patch the
libraries the grader checks with. A worker is isolated by the
operating system; the scan only points a reviewer at code that tries to leave it or to read the
grader. Flags are leads, not a verdict: they never change the score, and a file without flags is
not thereby trusted.

A file Python cannot compile is not a flag but the candidate's failure: it never runs, and every
check that imports it fails on it. `syntax_errors` says where, once per file, for the report.
Likewise a file that runs code it decodes at run time (`decoded_code`): the grader never runs it
(`grade.runnable`).

`paged_attention.py` is also read by `scan_kernel`: torch computing attention outside any
`@triton.jit` function (the worker's dispatch mode fails such a call at run time), and the ways
around that dispatch mode it cannot see: torch's dispatch internals, patches of Triton's launch
machinery, torch reached by a computed name, torch inside a kernel (run as Python by Triton's
interpreter), and numpy. These are a reviewer's leads too: the kernel's verdict is the kernel rule
(`kernel_rule.py`), which the grading process holds the same file to before any worker runs it.
"""

import ast
import contextlib
import symtable
import warnings
from fnmatch import fnmatchcase

from grader.said import Said, said

# Modules flagged when imported (with any submodule), and why.
MODULES = {
    **dict.fromkeys(
        ["grader", "kernels", "full_kit", "solutions", "exercises", "tests"],
        said("the kit's own code"),
    ),
    **dict.fromkeys(["vllm", "flash_attn", "flashinfer", "xformers"], said("a ready-made kernel")),
    **dict.fromkeys(["ctypes", "cffi"], said("runs native code")),
    **dict.fromkeys(["subprocess", "multiprocessing"], said("can start processes")),
    **dict.fromkeys(["threading", "_thread", "concurrent"], said("can start threads")),
    **dict.fromkeys(["signal", "_signal"], said("handles signals")),
    "mmap": said("maps memory outside the worker's memory limit"),
    "socket": said("opens connections"),
    **dict.fromkeys(["gc", "inspect", "builtins", "importlib"], said("introspection")),
    "__main__": said("reaches the worker's own code"),
    **dict.fromkeys(["pathlib", "shutil"], said("file access")),
    "runpy": said("runs code from a file"),
    **dict.fromkeys(["marshal", "dis"], said("reads or builds bytecode")),
    "zipimport": said("loads code from an archive"),
}
# The modules the contract lets a file import (exercises/README.md, Rules), by their top-level
# name: any other import is a flag. `KERNEL_IMPORTS` only in the kernel's file, where `scan_kernel`
# flags numpy for what it does there (it computes where the dispatch mode does not see).
ALLOWED_IMPORTS = frozenset({
    "__future__", "abc", "bisect", "collections", "dataclasses", "enum", "functools", "heapq",
    "itertools", "math", "numbers", "operator", "typing", "torch",
})  # fmt: skip
KERNEL_IMPORTS = frozenset({"triton", "numpy"})
UNLISTED = said("outside the modules the contract lists")
# Attributes flagged when used or imported (fnmatch patterns of dotted names), and why.
ATTRIBUTES = {
    **dict.fromkeys(["os.system", "os.popen"], said("runs a shell command")),
    **dict.fromkeys(
        ["os.fork*", "os.vfork", "os.exec*", "os.*spawn*"], said("can start processes")
    ),
    **dict.fromkeys(["os.setsid", "os.setpg*"], said("leaves the worker's process group")),
    **dict.fromkeys(["os.kill*", "signal.pthread_kill"], said("can end processes")),
    **dict.fromkeys(["os._exit", "sys.exit"], said("can end processes")),
    **dict.fromkeys(
        ["sys._getframe", "sys.modules", "sys.meta_path", "sys.path"], said("introspection")
    ),
    "inspect.currentframe": said("introspection"),
    **dict.fromkeys(["os.remove", "os.unlink", "os.rename", "os.replace"], said("file access")),
    **dict.fromkeys(["os.makedirs", "os.mkdir", "os.chdir"], said("file access")),
    **dict.fromkeys(
        ["os.open", "os.read", "os.pread", "os.write", "os.pwrite"], said("file access")
    ),
    **dict.fromkeys(["os.mkfifo", "os.mknod"], said("makes a special file")),
    **dict.fromkeys(["io.open", "io.FileIO", "_io.*"], said("file access")),
    **dict.fromkeys(["types.CodeType", "types.FunctionType"], said("builds code objects")),
    **dict.fromkeys(
        ["gc.get_objects", "gc.get_referrers", "gc.get_referents"],
        said("walks the process's objects: the kit's tools"),
    ),
    "runpy.*": said("runs code from a file"),
    **dict.fromkeys(
        ["importlib.util.spec_from_file_location", "importlib.machinery.*FileLoader"],
        said("loads code from a file"),
    ),
}
# Built-in names flagged when read, and why.
NAMES = {
    **dict.fromkeys(["eval", "exec", "compile"], said("runs code from a string")),
    "__import__": said("imports by name"),
    "open": said("file access"),
    "__builtins__": said("introspection"),
    "__loader__": said("reads module files through their loader"),
}
# Modules whose attributes (or their submodules' attributes) a submission must not assign: the
# libraries the grader checks with, and the standard modules it and they rely on.
PATCHED = {
    "torch", "pytest", "hypothesis", "builtins", "sys", "os", "time", "json", "math", "random"
}  # fmt: skip
DYNAMIC_IMPORTS = {"__import__", "builtins.__import__", "importlib.import_module"}
DYNAMIC = said("dynamic attribute access")
# Modules whose attributes are flagged when reached by name: `getattr(os, "kill")`.
BY_NAME = {"os", "sys", "builtins", "signal", "subprocess"}
BY_NAME_DICTS = {f"{module}.__dict__" for module in BY_NAME}  # `sys.__dict__`: the same
# Attributes of stack frames, tracebacks, generators and coroutines that reach the caller's frames.
FRAMES = {
    "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "gi_frame", "cr_frame", "__traceback__",
}  # fmt: skip
# Attributes that walk the object graph to any class or function in the process: a kit tool's
# state (`object.__subclasses__()`), a function's globals or code.
OBJECT_GRAPH = {
    "__subclasses__", "__globals__", "__closure__", "__code__", "__mro__", "__bases__",
    "__base__", "__self__", "__func__",
}  # fmt: skip
# Attributes that read a module's files through its loader.
LOADER = {"__loader__", "__spec__", "get_data", "get_code", "get_source"}


def scan_files(files: dict[str, bytes]) -> list[dict]:
    """The flags of every file (and `scan_kernel`'s of the kernel file), sorted by file then
    line."""
    flags = [flag for name, source in files.items() for flag in scan_file(name, source)]
    flags += [
        flag
        for name, source in files.items()
        if name.rsplit("/", 1)[-1] == KERNEL_FILE
        for flag in scan_kernel(name, source)
    ]
    return sorted(flags, key=lambda flag: (flag["file"], flag["line"]))


def scan_file(name: str, source: bytes) -> list[dict]:
    """The flags of one file; none for a file that does not parse (`syntax_errors` has it)."""
    scanner = Scanner(name)
    try:
        scanner.visit(ast.parse(source, filename=name))
    except (SyntaxError, ValueError):  # ValueError: null bytes, in some Python versions
        return []
    except (RecursionError, MemoryError):  # MemoryError: the parser's own nesting limit
        return [
            *scanner.flags,
            make_flag(name, 1, said("too deeply nested to scan (read it by hand)")),
        ]
    return scanner.flags


# What runs code a file decodes at run time: a file that reads one is not run (`decoded_code`).
TOO_DEEP = said("too deeply nested for the grader to read what it runs")  # why a file is not run
DECODING_BUILTINS = frozenset({"exec", "eval", "compile"})
DECODING_ATTRIBUTES = frozenset({
    "builtins.exec", "builtins.eval", "builtins.compile", "marshal.loads", "marshal.load",
})  # fmt: skip


def decoded_code(files: dict[str, bytes]) -> dict[str, str]:
    """Why each file that runs code it decodes at run time is not run, by file name: the first
    line that reads the builtin `exec`, `eval` or `compile` (called or not; a name a function
    binds itself is its own, `builtin_reads`), or `marshal.loads` and the like
    (`DECODING_ATTRIBUTES`).
    Parsed, never run; a file that does not parse has none (`syntax_errors` has it), and one too
    deeply nested to read is not run either."""
    reasons = {}
    for name, source in sorted(files.items()):
        try:
            found = first_decoding_read(name, source)
        except (SyntaxError, ValueError):
            continue
        except (RecursionError, MemoryError):
            reasons[name] = TOO_DEEP
            continue
        if found:
            line, what = found
            reasons[name] = said(
                "line {line} reads {name}, which runs code decoded at run time",
                line=line,
                name=what,
            )
    return reasons


def first_decoding_read(name: str, source: bytes) -> tuple[int, str] | None:
    """(line, name) of the file's first read of what runs decoded code; None if it has none."""
    tree = ast.parse(source, filename=name)
    table = symtable.symtable(source.decode("utf-8", "replace"), name, "exec")
    builtins_read = builtin_reads(table)
    walker = Walker(name, {"__builtins__": "builtins"} | import_aliases(tree))
    reads = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name | ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        if (what := walker.dotted(node)) in DECODING_ATTRIBUTES:
            reads.append((node.lineno, what))
        elif isinstance(node, ast.Name) and node.id in builtins_read:
            reads.append((node.lineno, node.id))
    return min(reads) if reads else None


def builtin_reads(
    table: symtable.SymbolTable, names: frozenset[str] = DECODING_BUILTINS
) -> set[str]:
    """The `names` some scope of `table` reads where they may be the builtins themselves: every
    read but a function's of its own local or of an enclosing function's. A module's or a
    class's binding of the name may not have run yet where it is read, or may never run
    (`if False: eval = print`), so it does not make the name the file's own."""
    own = table.get_type() == "function"
    found = {
        symbol.get_name()
        for symbol in table.get_symbols()
        if symbol.get_name() in names
        and symbol.is_referenced()
        and not (own and (symbol.is_local() or symbol.is_free()))
    }
    for child in table.get_children():
        found |= builtin_reads(child, names)
    return found


CODE_CHARS = 300  # of the offending line a syntax error shows


def syntax_errors(files: dict[str, bytes]) -> list[dict]:
    """Each file Python cannot compile, by file name: `{"file", "line", "column", "message",
    "code"}`, `code` the offending line as written and `column` (1-based) where in it Python
    stopped, or None. Compiled, never run; a file too deeply nested for this process to compile
    is left to `scan_file`, which flags it."""
    errors = [syntax_error(name, source) for name, source in sorted(files.items())]
    return [error for error in errors if error is not None]


def syntax_error(name: str, source: bytes) -> dict | None:
    """Why and where `source` does not compile; None if it compiles."""
    try:
        with warnings.catch_warnings():  # a SyntaxWarning is the candidate's, not the grader's
            warnings.simplefilter("ignore")
            compile(source, name, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:  # ValueError: null bytes, in some Python versions
        line, column = error_position(source, error)
        code = source_line(source, line)
        return {
            "file": name,
            "line": line,
            "column": column if column and column <= len(code) + 1 else None,
            "message": getattr(error, "msg", None) or str(error),
            "code": code,
        }
    except (RecursionError, MemoryError):
        return None
    return None


def error_position(source: bytes, error: SyntaxError | ValueError) -> tuple[int, int | None]:
    """The 1-based line and column of `error` in `source`; a null byte's own, which Python does
    not give."""
    line = getattr(error, "lineno", None)
    if line:
        return line, getattr(error, "offset", None)
    null = source.find(b"\0")
    if null < 0:
        return 1, None
    before = source[:null]
    return before.count(b"\n") + 1, null - before.rfind(b"\n")


def source_line(source: bytes, line: int) -> str:
    """Line `line` (1-based) of `source`, decoded, without its end, cut to `CODE_CHARS`."""
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else b""
    return text.decode("utf-8", "replace").rstrip()[:CODE_CHARS]


def make_flag(file: str, line: int, message: str) -> dict:
    return {"source": "scan", "file": file, "line": line, "message": message}


def module_reason(module: str) -> str | None:
    return MODULES.get(module.split(".")[0])


def attribute_reason(name: str) -> str | None:
    return next((why for pattern, why in ATTRIBUTES.items() if fnmatchcase(name, pattern)), None)


def string_literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def names_proc(value: object) -> bool:
    """`"/proc"`, `"/proc/self/mem"`, `b"/proc/1"`: a path under /proc (not `"/process"`)."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    return isinstance(text, str) and (text == "/proc" or text.startswith("/proc/"))


class Walker(ast.NodeVisitor):
    """Walks one file's syntax tree, collecting flags; names resolve through `aliases` (local
    name -> what it was imported as)."""

    def __init__(self, file: str, aliases: dict[str, str]) -> None:
        self.file, self.aliases = file, aliases
        self.flags: list[dict] = []

    def flag(self, node: ast.AST, message: str) -> None:
        self.flags.append(make_flag(self.file, node.lineno, message))

    def dotted(self, node: ast.expr) -> str | None:
        """`a.b.c` with `a` resolved through the imports (`import torch as t`); else None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute) and (base := self.dotted(node.value)):
            return f"{base}.{node.attr}"
        return None


class Scanner(Walker):
    """Collects the flags of one file, resolving names through the file's own imports."""

    def __init__(self, file: str) -> None:
        super().__init__(file, {"__builtins__": "builtins"})
        # Ways around the dispatch mode: `scan_kernel` reads the kernel file for them.
        self.escapes = file.rsplit("/", 1)[-1] != KERNEL_FILE
        self.allowed = ALLOWED_IMPORTS | (frozenset() if self.escapes else KERNEL_IMPORTS)

    def escape(self, name: str) -> str | None:
        return escape_reason(name) if self.escapes else None

    def unlisted(self, module: str) -> str | None:
        return None if module.split(".")[0] in self.allowed else UNLISTED

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            self.aliases[alias.asname or top] = alias.name if alias.asname else top
            reason = module_reason(alias.name) or self.escape(alias.name)
            if reason := reason or self.unlisted(alias.name):
                self.flag(alias, said("imports {name} ({reason})", name=alias.name, reason=reason))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return  # a relative import: the submission's own modules
        for alias in node.names:
            name = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = name
            reason = attribute_reason(name) or module_reason(name) or self.escape(name)
            if reason := reason or self.unlisted(node.module):
                self.flag(alias, said("imports {name} ({reason})", name=name, reason=reason))

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in NAMES:
            self.flag(node, said("uses {name} ({reason})", name=node.id, reason=NAMES[node.id]))
        elif reason := self.escape(self.aliases.get(node.id, node.id)):
            self.flag(node, said("uses {name} ({reason})", name=node.id, reason=reason))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.dotted(node)
        if name and (reason := self.escape(name)):  # any file: a module can patch another
            self.flag(node, said("uses {name} ({reason})", name=name, reason=reason))
        elif node.attr in OBJECT_GRAPH:
            walks = said("walks the process's objects: the kit's tools")
            self.flag(node, said("uses {name} ({reason})", name=f".{node.attr}", reason=walks))
            self.generic_visit(node)
        elif node.attr in LOADER:
            self.flag(
                node,
                said("uses {name} ({reason})", name=f".{node.attr}", reason=NAMES["__loader__"]),
            )
            self.generic_visit(node)
        elif name in BY_NAME_DICTS:
            self.flag(node, said("uses {name} ({reason})", name=name, reason=DYNAMIC))
        elif name and not isinstance(node.ctx, ast.Load) and name.split(".")[0] in PATCHED:
            self.flag(node, patching(name, deletes=isinstance(node.ctx, ast.Del)))
        elif name and (reason := attribute_reason(name)):
            self.flag(node, said("uses {name} ({reason})", name=name, reason=reason))
        elif node.attr in FRAMES:
            chain, inner = [node.attr], node.value  # `f.f_back.f_globals`: one flag for it all
            while isinstance(inner, ast.Attribute) and inner.attr in FRAMES:
                chain, inner = [inner.attr, *chain], inner.value
            frames = said("reads stack frames")
            self.flag(
                node, said("uses {name} ({reason})", name=f".{'.'.join(chain)}", reason=frames)
            )
            self.visit(inner)
        else:
            self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if names_proc(node.value):  # also the start of an f-string or of `"/proc/" + pid`
            proc = said("reads processes through /proc")
            self.flag(
                node, said("names {value} ({reason})", value=f"{node.value!r:.40}", reason=proc)
            )

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.dotted(node.func)
        if callee in DYNAMIC_IMPORTS:
            self.check_dynamic_import(node, callee)
        elif callee == "vars" and len(node.args) == 1 and self.dotted(node.args[0]) in BY_NAME:
            what = f"vars({self.dotted(node.args[0])})"
            self.flag(node, said("uses {name} ({reason})", name=what, reason=DYNAMIC))
        elif callee in ("getattr", "setattr", "delattr") and self.check_by_name(node, callee):
            for child in [node.func, *node.args[1:], *node.keywords]:  # not the module (flagged)
                self.visit(child)
            return
        self.generic_visit(node)

    def check_dynamic_import(self, node: ast.Call, callee: str) -> None:
        """`__import__("grader")`, `importlib.import_module(name)`: a kit module, or any name
        computed at run time (a bare `__import__` is flagged as a name already)."""
        module = string_literal(node.args[0]) if node.args else None
        if module and (reason := module_reason(module)):
            self.flag(node, said("imports {name} ({reason})", name=module, reason=reason))
        elif node.args and module is None and callee != "__import__":
            self.flag(
                node,
                said(
                    "uses {name} with a computed name ({reason})",
                    name=callee,
                    reason=said("imports by name"),
                ),
            )

    def check_by_name(self, node: ast.Call, function: str) -> bool:
        """`setattr(torch, ...)` patches a library; `getattr(os, "kill")`, `getattr(o, name)`
        reach a module's attributes by name. Whether it flagged the call."""
        target = self.dotted(node.args[0]) if len(node.args) >= 2 else None
        if not target:
            return False
        attribute = string_literal(node.args[1])
        what = (
            f"{target}.{attribute}"
            if attribute
            else said("an attribute of {target}", target=target)
        )
        if function != "getattr" and target.split(".")[0] in PATCHED:
            self.flag(node, patching(what, deletes=function != "setattr"))
        elif target in BY_NAME:
            builtin = NAMES.get(attribute or "") if target == "builtins" else None
            reason = attribute_reason(what) or builtin
            why = said("dynamic attribute access: {reason}", reason=reason) if reason else DYNAMIC
            self.flag(
                node,
                said(
                    "uses {function} on {what} ({reason})", function=function, what=what, reason=why
                ),
            )
        else:
            return False
        return True


# -- the kernel file ------------------------------------------------------------------------------

KERNEL_FILE = "paged_attention.py"
JIT_DECORATORS = {"triton.jit"}
# Tensor methods, and torch functions (also as `torch.Tensor.<method>`), that compute attention.
ATTENTION_METHODS = {
    "matmul", "mm", "bmm", "baddbmm", "addmm", "mv", "dot", "tensordot", "softmax", "log_softmax",
    "exp", "exp_", "index_select", "gather", "take",
}  # fmt: skip
ATTENTION_CALLS = {
    *(f"torch.{name}" for name in [*ATTENTION_METHODS, "einsum", "embedding", "compile"]),
    *(f"torch.Tensor.{name}" for name in ATTENTION_METHODS),
    "torch.nn.functional.*", "torch.special.*", "torch.ops.*",
}  # fmt: skip
# Names that reach torch's dispatch modes, and Triton's launch machinery.
MODE_NAMES = {"_disable_current_modes", "_pop_mode", "_push_mode", "__torch_function__"}
LAUNCHERS = {
    "JITFunction", "InterpretedFunction", "KernelInterface", "GridExecutor", "Autotuner",
    "Heuristics", "interpreter",
}  # fmt: skip
SEES = said("the grader's dispatch mode does not see it")
OUTSIDE = said("computes outside torch and Triton: {why}", why=SEES)


def scan_kernel(name: str, source: bytes) -> list[dict]:
    """`paged_attention.py`'s kernel flags: attention computed by torch outside any `@triton.jit`
    function, and ways around the worker's dispatch mode (`KernelScanner`). A file that does not
    parse gives none (`syntax_errors` has it)."""
    try:
        tree = ast.parse(source, filename=name)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    scanner = KernelScanner(name, import_aliases(tree))
    with contextlib.suppress(RecursionError, MemoryError):  # scan_file says it is too deep
        scanner.visit(tree)
    return scanner.flags


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Each name the file's imports bind, anywhere in it, and the dotted name it stands for."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                aliases[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def patching(name: str, deletes: bool) -> Said:
    """A flag for code that assigns or deletes `name`, a library's."""
    if deletes:
        return said("deletes {name} ({reason})", name=name, reason=said("patches a library"))
    return said("assigns {name} ({reason})", name=name, reason=said("patches a library"))


def escape_reason(name: str) -> str | None:
    """Why the dotted `name` (or a bare identifier, or a string) can get around the worker's
    dispatch mode; None when it cannot."""
    parts = name.split(".")
    if any("dispatch" in part.lower() or part in MODE_NAMES for part in parts):
        return said("can switch off the grader's torch dispatch mode")
    if parts[0] == "torch" and any(p.startswith("_") and not p.endswith("__") for p in parts):
        return said("torch internals: can switch off the grader's torch dispatch mode")
    if any(part in LAUNCHERS for part in parts) or name.startswith("triton.runtime.jit"):
        return said("Triton's launch machinery: can hide torch work inside a launch")
    return None


def chain_root(node: ast.expr) -> ast.expr:
    """`a` of `a.b.c`; `f()` of `f().b`."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def computed_index(index: ast.expr) -> bool:
    """Whether a subscript's index holds anything but literals and slices (`[0]`, `[:, :n]`)."""
    items = index.elts if isinstance(index, ast.Tuple) else [index]
    return not all(
        isinstance(item, ast.Slice | ast.Constant)
        or (isinstance(item, ast.UnaryOp) and isinstance(item.operand, ast.Constant))
        for item in items
    )


class KernelScanner(Walker):
    """Collects `scan_kernel`'s flags, resolving names through the file's imports."""

    def __init__(self, file: str, aliases: dict[str, str]) -> None:
        super().__init__(file, aliases)
        self.kernel: str | None = None  # the @triton.jit function being walked, if any

    def outside(self, node: ast.AST, what: str) -> None:
        """Flag `what`, torch computing attention, unless it is inside a kernel."""
        if self.kernel is None:
            self.flag(
                node,
                said(
                    "{what} outside any @triton.jit kernel (attention computed by torch)", what=what
                ),
            )

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        decorators = [getattr(item, "func", item) for item in node.decorator_list]
        outer = self.kernel
        if outer is None and any(self.dotted(item) in JIT_DECORATORS for item in decorators):
            self.kernel = node.name
        self.generic_visit(node)
        self.kernel = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        module = getattr(node, "module", None) if getattr(node, "level", 0) == 0 else None
        for alias in node.names:
            name = f"{module}.{alias.name}" if module else alias.name
            if reason := escape_reason(name):
                self.flag(node, said("imports {name} ({reason})", name=name, reason=reason))
            elif name.split(".")[0] == "numpy":
                self.flag(node, said("imports {name} ({reason})", name=name, reason=OUTSIDE))

    visit_ImportFrom = visit_Import

    def visit_Name(self, node: ast.Name) -> None:
        self.check_name(node, self.aliases.get(node.id, node.id))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.dotted(node)
        if name and not isinstance(node.ctx, ast.Load) and name.split(".")[0] == "triton":
            patches = said("patches Triton: can hide torch work inside a launch")
            self.flag(node, said("assigns {name} ({reason})", name=name, reason=patches))
        elif not self.check_name(node, name or node.attr):
            self.generic_visit(node)

    def check_name(self, node: ast.Name | ast.Attribute, name: str) -> bool:
        """Flag a name that gets around the dispatch mode, or torch inside a kernel; whether
        it flagged (the rest of an `a.b.c` chain is then not walked)."""
        if reason := escape_reason(name):
            self.flag(node, said("uses {name} ({reason})", name=name, reason=reason))
        elif self.kernel is not None and name.split(".")[0] == "torch":
            interpreted = said("runs only under Triton's interpreter: {why}", why=SEES)
            self.flag(node, said("uses {name} inside @triton.jit kernel {kernel} ({reason})",
                                 name=name, kernel=self.kernel, reason=interpreted))  # fmt: skip
        else:
            return False
        return True

    def visit_Call(self, node: ast.Call) -> None:
        callee, root = self.dotted(node.func), chain_root(node.func)
        module = isinstance(root, ast.Name) and root.id in self.aliases
        method = node.func.attr if isinstance(node.func, ast.Attribute) and not module else None
        if method in ATTENTION_METHODS:
            self.outside(node, said("calls .{method}()", method=method))
        elif method in ("numpy", "tolist"):
            self.flag(node, said("calls .{method}() ({reason})", method=method, reason=OUTSIDE))
        elif callee and any(fnmatchcase(callee, pattern) for pattern in ATTENTION_CALLS):
            self.outside(node, said("uses {name}", name=callee))
        elif callee in ("getattr", "setattr", "delattr") and len(node.args) >= 2:
            self.check_by_name(node, callee)
        for argument in node.args:
            text = string_literal(argument) or ""
            if text.replace(".", "_").isidentifier() and (reason := escape_reason(text)):
                self.flag(
                    argument, said("names {value} ({reason})", value=f"{text!r:.60}", reason=reason)
                )
        self.generic_visit(node)

    def check_by_name(self, node: ast.Call, function: str) -> None:
        """`getattr(torch, name)`: torch or Triton reached by a computed name, or patched."""
        target = self.dotted(node.args[0]) or ""
        if target.split(".")[0] not in ("torch", "triton"):
            return
        attribute = string_literal(node.args[1])
        what = (
            f"{target}.{attribute}"
            if attribute
            else said("an attribute of {target}", target=target)
        )
        if function != "getattr" and target.startswith("triton"):
            patches = said("patches Triton: can hide torch work")
            self.flag(node, said("uses {function} on {what} ({reason})", function=function,
                                 what=what, reason=patches))  # fmt: skip
        elif attribute is None:
            computed = said("a computed name the scan cannot read")
            self.flag(node, said("uses {function} on {what} ({reason})", function=function,
                                 what=what, reason=computed))  # fmt: skip
        elif any(fnmatchcase(what, pattern) for pattern in ATTENTION_CALLS):
            self.outside(node, said("uses {name}", name=what))

    def visit_BinOp(self, node: ast.BinOp | ast.AugAssign) -> None:
        if isinstance(node.op, ast.MatMult):
            self.outside(node, said("uses the @ operator"))
        self.generic_visit(node)

    visit_AugAssign = visit_BinOp

    def visit_Subscript(self, node: ast.Subscript) -> None:
        cache = node.value.id if isinstance(node.value, ast.Name) else ""
        if "cache" in cache.lower() and computed_index(node.slice):
            self.outside(node, said("indexes {name} with a computed index", name=cache))
        self.generic_visit(node)
