"""The seccomp filter of the CPU parts' workers: what it refuses, on each machine it knows (run
by a small classic-BPF interpreter here), and in a real worker on this one."""

import errno
import time

import pytest

from grader.sandbox import isolation, seccomp
from grader.sandbox.process import NO_CUDA, Limits, Sandbox
from grader.sandbox.proxy import Submission

REFUSED = ("fork", "vfork", "execve", "execveat", "ptrace", "mount", "umount2", "pivot_root",
           "unshare", "setns", "bpf", "perf_event_open", "keyctl", "add_key", "request_key",
           "open_tree", "move_mount", "fsopen", "fsmount", "tkill", "process_vm_readv",
           "process_vm_writev", "pidfd_open", "pidfd_send_signal", "pidfd_getfd")  # fmt: skip
OWN_PID = 4242  # the process the filter is made for
ALLOWED = {"x86_64": {"read": 0, "write": 1, "mmap": 9, "futex": 202},
           "aarch64": {"read": 63, "write": 64, "mmap": 222, "futex": 98}}  # fmt: skip
EPERM, ENOSYS = seccomp.ERRNO | errno.EPERM, seccomp.ERRNO | errno.ENOSYS


def run(code: list[tuple[int, int, int, int]], nr: int, arch: int, first_argument: int = 0) -> int:
    """What the filter returns for a call: classic BPF, the instructions `program` uses."""
    data = {0: nr, 4: arch, 16: first_argument & 0xFFFFFFFF}
    accumulator, pc = 0, 0
    while True:
        op, true, false, k = code[pc]
        if op == seccomp.RET:
            return k
        if op == seccomp.LOAD:
            accumulator, pc = data[k], pc + 1
            continue
        taken = {seccomp.JEQ: accumulator == k, seccomp.JGE: accumulator >= k,
                 seccomp.JSET: bool(accumulator & k)}[op]  # fmt: skip
        pc += 1 + (true if taken else false)


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_filter_refuses_new_processes_and_lets_threads_and_the_rest_through(machine: str):
    arch, abi_end, numbers = seccomp.ARCHES[machine]
    code = seccomp.program(machine, OWN_PID)
    assert all(0 <= true < 256 and 0 <= false < 256 for _, true, false, _ in code)
    for name in REFUSED:
        if name in numbers:  # arm64 has no fork or vfork
            assert run(code, numbers[name], arch) == EPERM, name
    assert run(code, numbers["clone3"], arch) == ENOSYS  # glibc falls back to clone
    assert run(code, numbers["clone"], arch, seccomp.CLONE_THREAD | 0x3D0F00) == seccomp.ALLOW
    assert run(code, numbers["clone"], arch, 0x01200011) == EPERM  # fork's flags
    for name, number in ALLOWED[machine].items():
        assert run(code, number, arch) == seccomp.ALLOW, name
        assert run(code, number, 0x40000003) == EPERM, "another ABI (i386) is refused"
    assert run(code, abi_end + numbers["clone"], arch) == EPERM  # x32 on x86-64


@pytest.mark.parametrize("machine", sorted(seccomp.ARCHES))
def test_the_filter_lets_a_signal_reach_the_process_itself_only(machine: str):
    arch, _, numbers = seccomp.ARCHES[machine]
    code = seccomp.program(machine, OWN_PID)
    for name in ("kill", *seccomp.SIGNALS_TO_SELF):
        assert run(code, numbers[name], arch, OWN_PID) == seccomp.ALLOW, name
        for other in (1, OWN_PID + 1, -1, -OWN_PID):  # init, a sibling, everyone, a group
            assert run(code, numbers[name], arch, other) == EPERM, (name, other)
    assert run(code, numbers["kill"], arch, 0) == seccomp.ALLOW  # its own process group
    assert run(code, numbers["tgkill"], arch, 0) == EPERM


PROBE = b"""
import ctypes, os, subprocess, threading

def attempt(what):
    try:
        if what == "fork":
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        elif what == "subprocess":
            subprocess.run(["/usr/bin/true"], check=False)
        elif what == "exec":
            os.execv("/usr/bin/true", ["true"])
        elif what == "thread":
            thread = threading.Thread(target=lambda: None)
            thread.start()
            thread.join()
        elif what == "clone3":
            libc = ctypes.CDLL(None, use_errno=True)
            return "refused" if libc.syscall(435, 0, 0) == -1 and ctypes.get_errno() == 38 else "?"
    except OSError as error:
        return "refused" if error.errno == 1 else repr(error)
    return "done"
"""


@pytest.fixture(params=["cpu part", "cuda kernel"])
def worker(request):
    if not seccomp.supported():
        pytest.skip("the filter runs on Linux on x86-64 and arm64 only")
    env = NO_CUDA if request.param == "cpu part" else {}  # {}: may use CUDA, so Triton compiles
    sandbox = Sandbox({"probe.py": PROBE}, Limits(), env, time.monotonic() + 600, isolation.probe())
    yield request.param, Submission(sandbox, "candidate").module("probe")
    sandbox.close()


def test_a_cpu_parts_worker_starts_no_process_and_a_cuda_kernels_may(worker):
    kind, module = worker
    expected = "refused" if kind == "cpu part" else "done"
    for what in ("fork", "subprocess"):
        assert module.attempt(what) == expected, what
    if kind == "cpu part":
        assert module.attempt("exec") == "refused"
        assert module.attempt("clone3") == "refused"
    assert module.attempt("thread") == "done"
