"""`python tests/fork_server.py`: run scripts as `python SCRIPT` would, each in a child forked
from this process, which has imported torch once (about 2 s of CPU a script saves).

Each line on stdin is a JSON request `{"folder", "script", "timeout"}`: a child moves into
`folder`, puts it first on `sys.path`, runs the file `script` there as `__main__`, and exits
with Python's status (1 after printing an uncaught exception's traceback; a `SystemExit`'s
status), without Python's exit steps (no atexit, no wait for other threads). Its stdin is empty
and its stdout dropped; the reply, one JSON line on stdout, is `{"returncode", "stderr"}`, a
signal's death as a negative status. A child still running after `timeout` seconds gets SIGALRM.
The server forks from its one Python thread (torch's import starts a native one; forking after
that import is what torch's own DataLoader workers do).
"""

import gc
import json
import os
import runpy
import signal
import sys
import tempfile
import traceback


def exit_status(stop: SystemExit) -> int:
    """The exit status Python gives for `stop` uncaught (a message is printed, and gives 1)."""
    if stop.code is None or isinstance(stop.code, int):
        return int(stop.code or 0) & 0xFF
    print(stop.code, file=sys.stderr)
    return 1


def child(folder: str, script: str, timeout: int, stderr: int) -> None:
    """In the forked child: run `script` in `folder`, then exit with Python's status; never
    return to the server's loop."""
    status = 1
    try:
        signal.alarm(timeout)
        with open(os.devnull, "r+") as devnull:
            os.dup2(devnull.fileno(), 0)  # stdin carries the requests: not the script's
            os.dup2(devnull.fileno(), 1)
        os.dup2(stderr, 2)
        os.chdir(folder)
        sys.path[0] = folder
        sys.argv[:] = [script]
        runpy.run_path(os.path.join(folder, script), run_name="__main__")
        status = 0
    except SystemExit as stop:
        status = exit_status(stop)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def serve() -> None:
    """Import torch, then answer each request on stdin with a forked run, until stdin closes."""
    import torch  # noqa: F401  (the import every child inherits)

    gc.freeze()  # what the import made is never collected: children do not copy it by scanning
    replies = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryFile() as stderr:
            pid = os.fork()
            if pid == 0:
                child(request["folder"], request["script"], request["timeout"], stderr.fileno())
            _, status = os.waitpid(pid, 0)
            stderr.seek(0)
            text = stderr.read().decode(errors="replace")
        returncode = os.waitstatus_to_exitcode(status)
        replies.write(json.dumps({"returncode": returncode, "stderr": text}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
