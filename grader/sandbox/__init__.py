"""The trust boundary: the only place a candidate's code runs.

- `isolation.py`: the bubblewrap command line that puts every worker in namespaces of its own.
- `process.py`: `Sandbox`, one worker process: started, limited, timed, replaced after a crash.
- `launch.py`: what every worker is launched with: the kit's files, its environment.
- `zygotes.py`, `zygote.py`: the CPU parts' workers forked from a process in a sandbox of its own
  that did their imports once, each worker in namespaces of its own; one such zygote for the
  candidate's workers and one for the answer key's.
- `wire.py`: the codec both sides share (JSON, tensors as raw bytes; never a pickle).
- `worker.py`: the worker itself, the one process that imports a submission; it loads the
  kernel's watchers (`watchers.py`), the interpreter's speed-up (`interpreter.py`) and the timed
  workloads (`workloads.py`) beside it.
- `proxy.py`: candidate objects as local-looking proxies for the checks.
- `transcript.py`: the calls made through them, as the script that becomes a counterexample.
"""
