"""The trust boundary: the only place a candidate's code runs.

- `isolation.py`: the bubblewrap command line that puts every worker in namespaces of its own.
- `process.py`: `Sandbox`, one worker process: started, limited, timed, replaced after a crash.
- `wire.py`: the codec both sides share (JSON, tensors as raw bytes; never a pickle).
- `worker.py`: the worker itself, the one process that imports a submission; it loads the
  kernel's watchers (`watchers.py`) and the timed workloads (`workloads.py`) beside it.
- `proxy.py`: candidate objects as local-looking proxies for the checks.
- `transcript.py`: the calls made through them, as the script that becomes a counterexample.
"""
