"""The static integrity scan: what in a submission's source a human reviewer should look at.

`scan_files` parses each file with `ast`; it never imports or runs the code. Each flag says what
was seen and where, `{"source": "scan", "file", "line", "message"}`: imports of the kit or of a
ready-made attention library, processes, threads, native code, introspection, dynamic code, file
access, and assignments that patch the libraries the grader checks with. Flags are leads for a
reviewer, not a verdict: they never change the score, and a file without flags is not thereby
trusted (the sandboxed worker is what contains the code).
"""

import ast
from fnmatch import fnmatchcase

# Modules flagged when imported (with any submodule), and why.
MODULES = {
    **dict.fromkeys(["grader", "kernels", "solutions", "exercises", "tests"], "the kit's own code"),
    **dict.fromkeys(["vllm", "flash_attn", "flashinfer", "xformers"], "a ready-made kernel"),
    **dict.fromkeys(["ctypes", "cffi"], "runs native code"),
    **dict.fromkeys(["subprocess", "multiprocessing"], "can start processes"),
    **dict.fromkeys(["threading", "_thread", "concurrent"], "can start threads"),
    "signal": "handles signals",
    "mmap": "maps memory outside the worker's memory limit",
    "socket": "opens connections",
    **dict.fromkeys(["gc", "inspect", "builtins", "importlib"], "introspection"),
    "__main__": "reaches the worker's own code",
    **dict.fromkeys(["pathlib", "shutil"], "file access"),
}
# Attributes flagged when used or imported (fnmatch patterns of dotted names), and why.
ATTRIBUTES = {
    **dict.fromkeys(["os.system", "os.popen"], "runs a shell command"),
    **dict.fromkeys(["os.fork*", "os.exec*", "os.spawn*"], "can start processes"),
    **dict.fromkeys(["os.kill", "os._exit", "sys.exit"], "can end processes"),
    **dict.fromkeys(["sys._getframe", "sys.modules", "sys.meta_path", "sys.path"], "introspection"),
    **dict.fromkeys(["os.remove", "os.unlink", "os.rename", "os.replace"], "file access"),
    **dict.fromkeys(["os.makedirs", "os.mkdir", "os.chdir"], "file access"),
}
# Built-in names flagged when read, and why.
NAMES = {
    **dict.fromkeys(["eval", "exec", "compile"], "runs code from a string"),
    "__import__": "imports by name",
    "open": "file access",
    "__builtins__": "introspection",
}
# Modules whose attributes (or their submodules' attributes) a submission must not assign: the
# libraries the grader checks with, and the standard modules it and they rely on.
PATCHED = {
    "torch", "pytest", "hypothesis", "builtins", "sys", "os", "time", "json", "math", "random"
}  # fmt: skip
DYNAMIC_IMPORTS = {"__import__", "builtins.__import__", "importlib.import_module"}


def scan_files(files: dict[str, bytes]) -> list[dict]:
    """The flags of every file, sorted by file then line."""
    flags = [flag for name, source in files.items() for flag in scan_file(name, source)]
    return sorted(flags, key=lambda flag: (flag["file"], flag["line"]))


def scan_file(name: str, source: bytes) -> list[dict]:
    scanner = Scanner(name)
    try:
        scanner.visit(ast.parse(source, filename=name))
    except SyntaxError as error:
        return [make_flag(name, error.lineno or 1, f"does not parse: {error.msg}")]
    except ValueError as error:  # null bytes, before Python 3.12
        return [make_flag(name, 1, f"does not parse: {error}")]
    except (RecursionError, MemoryError):  # MemoryError: the parser's own nesting limit
        return [*scanner.flags, make_flag(name, 1, "too deeply nested to scan (read it by hand)")]
    return scanner.flags


def make_flag(file: str, line: int, message: str) -> dict:
    return {"source": "scan", "file": file, "line": line, "message": message}


def module_reason(module: str) -> str | None:
    return MODULES.get(module.split(".")[0])


def attribute_reason(name: str) -> str | None:
    return next((why for pattern, why in ATTRIBUTES.items() if fnmatchcase(name, pattern)), None)


def string_literal(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class Scanner(ast.NodeVisitor):
    """Collects the flags of one file, resolving names through the file's own imports."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.flags: list[dict] = []
        self.aliases = {"__builtins__": "builtins"}  # local name -> what it was imported as

    def flag(self, node: ast.expr | ast.alias, message: str) -> None:
        self.flags.append(make_flag(self.file, node.lineno, message))

    def dotted(self, node: ast.expr) -> str | None:
        """`a.b.c` with `a` resolved through the imports (`import torch as t`); else None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute) and (base := self.dotted(node.value)):
            return f"{base}.{node.attr}"
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            self.aliases[alias.asname or top] = alias.name if alias.asname else top
            if reason := module_reason(alias.name):
                self.flag(alias, f"imports {alias.name} ({reason})")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            return  # a relative import: the submission's own modules
        for alias in node.names:
            name = f"{node.module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = name
            if reason := module_reason(name) or attribute_reason(name):
                self.flag(alias, f"imports {name} ({reason})")

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and node.id in NAMES:
            self.flag(node, f"uses {node.id} ({NAMES[node.id]})")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self.dotted(node)
        if name and not isinstance(node.ctx, ast.Load) and name.split(".")[0] in PATCHED:
            verb = "deletes" if isinstance(node.ctx, ast.Del) else "assigns"
            self.flag(node, f"{verb} {name} (patches a library)")
        elif name and (reason := attribute_reason(name)):
            self.flag(node, f"uses {name} ({reason})")
        else:
            self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.dotted(node.func)
        if callee in DYNAMIC_IMPORTS:
            self.check_dynamic_import(node)
        elif callee in ("setattr", "delattr"):
            self.check_setattr(node, "assigns" if callee == "setattr" else "deletes")
        self.generic_visit(node)

    def check_dynamic_import(self, node: ast.Call) -> None:
        """`__import__("grader")`, `importlib.import_module("grader")`: a literal name only."""
        module = string_literal(node.args[0]) if node.args else None
        if module and (reason := module_reason(module)):
            self.flag(node, f"imports {module} ({reason})")

    def check_setattr(self, node: ast.Call, verb: str) -> None:
        target = self.dotted(node.args[0]) if len(node.args) >= 2 else None
        if target and target.split(".")[0] in PATCHED:
            attribute = string_literal(node.args[1])
            what = f"{target}.{attribute}" if attribute else f"an attribute of {target}"
            self.flag(node, f"{verb} {what} (patches a library)")
