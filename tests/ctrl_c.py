"""Starting a process that a test stops with Ctrl-C (SIGINT).

A shell that runs `make test` as a background job (`nohup bash -c 'make test' &`, as some CI
shells do) starts it with SIGINT ignored, and every process below inherits that: Python then
installs no handler of its own and never raises KeyboardInterrupt. A process under test is
started with `preexec_fn=sigint_at_default`, so that it meets Ctrl-C as it would on a terminal.
"""

import signal


def sigint_at_default() -> None:
    """`subprocess.Popen`'s `preexec_fn`: SIGINT back to its default in the child, before exec."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
