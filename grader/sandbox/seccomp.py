"""No new processes, and no reaching another: the seccomp filter a worker of a CPU part puts on
itself before it runs any candidate code (`worker.py`, told so by `process.py`).

The filter answers EPERM to every system call that makes a process, runs a program or reaches
outside the process: `fork`, `vfork`, `clone` without CLONE_THREAD, `execve`, `execveat`,
`ptrace`, the mount calls, `unshare`, `setns`, `bpf`, `perf_event_open`, the key calls, the
calls that read or write another process's memory (`process_vm_readv`, `process_vm_writev`) and
those through a process's descriptor (`pidfd_open`, `pidfd_send_signal`, `pidfd_getfd`).
A signal may go to the worker itself only: `kill` to its own pid or its own group (0), `tgkill`,
`rt_sigqueueinfo` and `rt_tgsigqueueinfo` to its own pid; `tkill` not at all.
`clone3` gets ENOSYS, so that glibc falls back to `clone`, whose flags a filter can read
(`clone3`'s are behind a pointer). Threads stay allowed: torch's, Python's. A call made through
another ABI than the native one (32-bit `int 0x80`, x32) gets EPERM whatever it is.

With no child, a worker's CPU time is all in its own clock, which the grader reads
(`process.Sandbox.cpu_seconds`), and a fork bomb fails at its first fork.

Like `wire.py`, this file is loaded by path in the worker and imports nothing from the kit.
Where the kernel refuses the filter (`supported`), workers run without it.
"""

import ctypes
import errno
import functools
import os
import platform
import struct
import subprocess
import sys

ARCHES = {  # machine: (AUDIT_ARCH_*, the first number outside its ABI, {name: number})
    "x86_64": (0xC000003E, 0x40000000, {
        "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62, "ptrace": 101,
        "rt_sigqueueinfo": 129, "pivot_root": 155, "mount": 165, "umount2": 166, "tkill": 200,
        "tgkill": 234, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
        "rt_tgsigqueueinfo": 297, "perf_event_open": 298, "setns": 308,
        "process_vm_readv": 310, "process_vm_writev": 311, "bpf": 321, "execveat": 322,
        "pidfd_send_signal": 424, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsmount": 432, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438,
    }),
    "aarch64": (0xC00000B7, 1 << 31, {
        "umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97, "ptrace": 117,
        "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "add_key": 217,
        "request_key": 218, "keyctl": 219, "clone": 220, "execve": 221,
        "rt_tgsigqueueinfo": 240, "perf_event_open": 241, "setns": 268,
        "process_vm_readv": 270, "process_vm_writev": 271, "bpf": 280, "execveat": 281,
        "pidfd_send_signal": 424, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsmount": 432, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438,
    }),
}  # fmt: skip
CLONE_THREAD = 0x00010000
SIGNALS_TO_SELF = ("tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # the first argument: a pid
# Classic BPF, as seccomp runs it: a load of a word of `struct seccomp_data` (nr at 0, arch at 4,
# the first argument's low word at 16 on these little-endian machines), jumps, returns.
LOAD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
Jump = tuple[int, str | None, str | None, int]  # (code, label if true, label if false, constant)


@functools.cache
def supported() -> bool:
    """Whether this machine runs the filter: Linux on x86-64 or arm64, whose kernel takes it
    (tried once, in a process of its own: a kernel or a container may refuse seccomp)."""
    if sys.platform != "linux" or platform.machine() not in ARCHES:
        return False
    trial = f"import runpy; runpy.run_path({__file__!r})['forbid_processes']()"
    try:
        done = subprocess.run([sys.executable, "-S", "-c", trial], capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def program(machine: str, pid: int) -> list[tuple[int, int, int, int]]:
    """The filter for `machine`, for the process `pid` (the one it may signal), as (code, jump if
    true, jump if false, constant) instructions."""
    arch, abi_end, numbers = ARCHES[machine]
    special = {"clone", "clone3", "kill", *SIGNALS_TO_SELF}
    code: list[Jump | str] = [
        (LOAD, None, None, 4), (JEQ, None, "deny", arch),
        (LOAD, None, None, 0), (JGE, "deny", None, abi_end),
        (JEQ, "clone", None, numbers["clone"]), (JEQ, "enosys", None, numbers["clone3"]),
        (JEQ, "kill", None, numbers["kill"]),
        *[(JEQ, "own", None, numbers[name]) for name in SIGNALS_TO_SELF],
        *[(JEQ, "deny", None, number) for name, number in numbers.items() if name not in special],
        (RET, None, None, ALLOW),
        "clone", (LOAD, None, None, 16), (JSET, "allow", "deny", CLONE_THREAD),
        "kill", (LOAD, None, None, 16), (JEQ, "allow", "own", 0),
        "own", (LOAD, None, None, 16), (JEQ, "allow", "deny", pid),
        "allow", (RET, None, None, ALLOW),
        "deny", (RET, None, None, ERRNO | errno.EPERM),
        "enosys", (RET, None, None, ERRNO | errno.ENOSYS),
    ]  # fmt: skip
    return assembled(code)


def assembled(code: list[Jump | str]) -> list[tuple[int, int, int, int]]:
    """`code`'s instructions with each label they jump to (None: the next) as its offset; a
    label is a string before the instruction it names, always after those that jump to it
    (classic BPF jumps forward only)."""
    at, instructions = {}, []
    for item in code:
        if isinstance(item, str):
            at[item] = len(instructions)
        else:
            instructions.append(item)
    return [
        (op, at[true] - index - 1 if true else 0, at[false] - index - 1 if false else 0, k)
        for index, (op, true, false, k) in enumerate(instructions)
    ]


def forbid_processes() -> None:
    """Install the filter on this process and every thread it starts from now on (it has no
    other thread yet); it cannot be removed. Raises OSError where the kernel refuses it."""
    code = program(platform.machine(), os.getpid())
    filters = b"".join(struct.pack("HBBI", *instruction) for instruction in code)
    buffer = ctypes.create_string_buffer(filters, len(filters))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    fprog = Program(len(code), ctypes.cast(buffer, ctypes.c_void_p))
    for call in ((PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
                 (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0)):  # fmt: skip
        if libc.prctl(*map(ctypes.c_ulong, call)) != 0:
            raise OSError(ctypes.get_errno(), "the seccomp filter could not be installed")
