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
(`triton.language` and `triton.language.core`), and turns the dropped check off; outside a launch
the interpreter works as it does without it. Where the installed Triton lacks what it replaces,
it leaves the interpreter as it is: slower, never wrong. Like the watchers (`watchers.py`), it
only saves time: a worker may undo it, and nothing it does is evidence.
"""

import dataclasses
import os
import sys
import types
from typing import Any

REPLACED = ("_patch_lang", "_LangPatchScope", "interpreter_builder", "GridExecutor")


def speed_up() -> bool:
    """Speed up the interpreter this process loaded, once; whether it runs sped up. A no-op where
    no kernel is interpreted (`TRITON_INTERPRET` unset, or Triton's interpreter not loaded yet)
    or where the interpreter lacks what this replaces."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if os.environ.get("TRITON_INTERPRET") != "1" or interpreter is None:
        return False
    if not all(hasattr(interpreter, name) for name in REPLACED):
        return False
    if getattr(interpreter._patch_lang, "patches_once", False):
        return True
    patch_once_a_launch(interpreter)
    builder = interpreter.interpreter_builder
    if not builder.options.debug and getattr(builder.options, "sanitize_overflow", False):
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    return True


def patch_once_a_launch(interpreter: types.ModuleType) -> None:
    """Make `interpreter._patch_lang`, which a launch (`GridExecutor.__call__`) calls for its
    kernel and then again for every device function the kernel calls, patch `triton.language`
    and `triton.language.core` together for the launch's first call only, so that the launch's
    own restore undoes both, and do nothing for the others. A call outside a launch (a device
    function the host calls), or of a function with neither module in sight, is the original's."""
    import triton.language as tl

    original_patch, original_launch = interpreter._patch_lang, interpreter.GridExecutor.__call__
    both = types.SimpleNamespace(__globals__={"tl": tl, "core": tl.core})
    launch = types.SimpleNamespace(depth=0, patched=False)

    def patch_lang(fn: Any) -> Any:
        sees_lang = any(value is tl or value is tl.core for value in fn.__globals__.values())
        if not launch.depth or not sees_lang:
            return original_patch(fn)
        if launch.patched:  # a device function, inside the launch that patched both
            return interpreter._LangPatchScope()
        launch.patched = True
        return original_patch(both)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        launch.depth += 1
        try:
            return original_launch(self, *args, **kwargs)
        finally:
            launch.depth -= 1
            launch.patched = launch.patched and launch.depth > 0

    patch_lang.patches_once = True
    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = run
