"""Triton's CPU interpreter, in the worker, run faster without changing a value it computes.

Under `TRITON_INTERPRET=1` a kernel runs as Python, one NumPy op per `tl` op. Two habits of
the interpreter (Triton 3.9) cost two thirds of a launch of the answer key's kernel, and neither
changes what a kernel computes:

- every call of a `@triton.jit` device function (`tl.sum`, `tl.max`, a helper of the
  candidate's) patches `triton.language` all over again, walking every member of its modules
  (`_patch_lang`), although the launch that made the call has patched them already;
- every integer `+`, `-` and `*` builds an overflow check (`sanitize_overflow`) whose assert the
  interpreter then drops, since it runs without `debug`.

`speed_up` patches `triton.language` once a launch, through both names a function may see it by
(`triton.language` and `triton.language.core`), and turns the dropped check off. Where the
installed Triton lacks what it replaces, it leaves the interpreter as it is: slower, never
wrong. Like the watchers (`watchers.py`), it only saves time: a worker may undo it, and nothing
it does is evidence.
"""

import dataclasses
import sys
import types
from typing import Any

REPLACED = ("_patch_lang", "_LangPatchScope", "interpreter_builder")


def speed_up() -> bool:
    """Speed up the interpreter this process loaded, once; whether it runs sped up. A no-op where
    Triton's interpreter is not loaded (no kernel interpreted yet) or lacks what this replaces."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is None or not all(hasattr(interpreter, name) for name in REPLACED):
        return False
    if getattr(interpreter._patch_lang, "patches_once", False):
        return True
    interpreter._patch_lang = patching_once_a_launch(interpreter)
    builder = interpreter.interpreter_builder
    if not builder.options.debug and getattr(builder.options, "sanitize_overflow", False):
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    return True


def patching_once_a_launch(interpreter: types.ModuleType) -> Any:
    """`interpreter._patch_lang`, which a launch calls for its kernel and then once for every
    device function it calls, as it does the first only: it patches `triton.language` and
    `triton.language.core` together, for the whole launch, and the launch's own restore undoes
    both. A call with neither module in sight goes to the original, which refuses it."""
    import triton.language as tl

    original = interpreter._patch_lang
    both = types.SimpleNamespace(__globals__={"tl": tl, "core": tl.core})
    launch = types.SimpleNamespace(patched=False)

    def patch_lang(fn: Any) -> Any:
        if not any(value is tl or value is tl.core for value in fn.__globals__.values()):
            return original(fn)
        if launch.patched:  # a device function, inside the launch that patched both
            return interpreter._LangPatchScope()
        scope = original(both)
        restore = scope.restore

        def restore_and_end() -> None:
            restore()
            launch.patched = False

        scope.restore = restore_and_end
        launch.patched = True
        return scope

    patch_lang.patches_once = True
    return patch_lang
