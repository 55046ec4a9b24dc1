"""No new processes: the seccomp filter a worker of a CPU part puts on itself before it runs any
candidate code (`worker.py`, told so by `process.py`).

The filter answers EPERM to every system call that makes a process, runs a program or reaches
outside the process: `fork`, `vfork`, `clone` without CLONE_THREAD, `execve`, `execveat`,
`ptrace`, the mount calls, `unshare`, `setns`, `bpf`, `perf_event_open` and the key calls.
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
import platform
import struct
import subprocess
import sys

ARCHES = {  # machine: (AUDIT_ARCH_*, the first number outside its ABI, {name: number})
    "x86_64": (0xC000003E, 0x40000000, {
        "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "ptrace": 101, "pivot_root": 155,
        "mount": 165, "umount2": 166, "add_key": 248, "request_key": 249, "keyctl": 250,
        "unshare": 272, "perf_event_open": 298, "setns": 308, "bpf": 321, "execveat": 322,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsmount": 432, "clone3": 435,
    }),
    "aarch64": (0xC00000B7, 1 << 31, {
        "umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97, "ptrace": 117,
        "add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220, "execve": 221,
        "perf_event_open": 241, "setns": 268, "bpf": 280, "execveat": 281, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsmount": 432, "clone3": 435,
    }),
}  # fmt: skip
CLONE_THREAD = 0x00010000
# Classic BPF, as seccomp runs it: a load of a word of `struct seccomp_data` (nr at 0, arch at 4,
# the first argument's low word at 16 on these little-endian machines), jumps, returns.
LOAD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


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


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for `machine`, as (code, jump if true, jump if false, constant) instructions."""
    arch, abi_end, numbers = ARCHES[machine]
    denied = [number for name, number in numbers.items() if name not in ("clone", "clone3")]
    head = [(LOAD, 0, 0, 4), (JEQ, 0, 0, arch), (LOAD, 0, 0, 0), (JGE, 0, 0, abi_end),
            (JEQ, 0, 0, numbers["clone"]), (JEQ, 0, 0, numbers["clone3"])]  # fmt: skip
    head += [(JEQ, 0, 0, number) for number in denied]
    allow = len(head)
    tail = [(RET, 0, 0, ALLOW), (LOAD, 0, 0, 16), (JSET, 0, 0, CLONE_THREAD), (RET, 0, 0, ALLOW),
            (RET, 0, 0, ERRNO | errno.EPERM), (RET, 0, 0, ERRNO | errno.ENOSYS)]  # fmt: skip
    clone, deny, enosys = allow + 1, allow + 4, allow + 5
    targets = {1: (2, deny), 3: (deny, 4), 4: (clone, 5), 5: (enosys, 6)}  # index: (true, false)
    targets |= {index: (deny, index + 1) for index in range(6, allow)}
    targets[allow + 2] = (allow + 3, deny)  # clone: a thread, or refused
    code = head + tail
    for index, (true, false) in targets.items():
        op, _, _, k = code[index]
        code[index] = (op, true - index - 1, false - index - 1, k)
    return code


def forbid_processes() -> None:
    """Install the filter on this process and every thread it starts from now on (it has no
    other thread yet); it cannot be removed. Raises OSError where the kernel refuses it."""
    code = program(platform.machine())
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
