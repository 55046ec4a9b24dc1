"""`python -m tests.grader_server SOCKET`, from the kit's root: run `python -m grader ARGS`,
each grading in a child forked from this process, which has imported the grader (torch, pytest,
hypothesis) once: about 1.6 s of CPU a grading saves. Started by `tests/grading.py`, for the
tests' gradings only.

A client connects to the Unix socket SOCKET and sends one JSON line `{"argv", "cwd", "env",
"stdout", "stderr"}`. The child forked for it answers its pid in a line, then runs the grader's
command line (`grader.__main__.main`, as `python -m grader` does) in `cwd`, with exactly `env`
as its environment, stdin empty and stdout and stderr written to the files named; its last line
is its exit status, the one `python -m grader` would give (1 for an uncaught exception, after
its traceback). The server forks from its main thread and runs no other Python thread; it
stops when the process that started it is gone.
"""

import gc
import importlib
import json
import os
import signal
import socket
import sys
import traceback

import grader.__main__ as cli

GRADING_IMPORTS = ("grader.grade", "grader.report.summary", "grader.report.writers")


def grading(connection: socket.socket) -> int:
    """In the forked child: run the request's grading; its exit status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the grader waits for its workers
    request = json.loads(connection.makefile().readline())
    connection.sendall(f"{os.getpid()}\n".encode())
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    with open(os.devnull) as stdin:
        os.dup2(stdin.fileno(), 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        with open(path, "w") as stream:
            os.dup2(stream.fileno(), fd)
    status = 1
    try:
        status = cli.main(request["argv"])
    except SystemExit as stop:
        status = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    connection.sendall(f"{status}\n".encode())
    return status


def serve(path: str) -> None:
    for module in GRADING_IMPORTS:  # what `grade_submission` imports, imported once here
        importlib.import_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    listener.settimeout(1.0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children reap themselves
    gc.freeze()  # what the imports made is never collected: children do not copy it by scanning
    parent = os.getppid()
    while os.getppid() == parent:  # it ends with the test process that started it
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        if os.fork() == 0:
            listener.close()
            status = 1
            try:
                status = grading(connection)
            finally:
                os._exit(status)
        connection.close()


if __name__ == "__main__":
    serve(sys.argv[1])
