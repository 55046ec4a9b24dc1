"""Can this worker use the GPU? The question `grader.sandbox.cuda` asks, once a grading, of a
worker started as part 4's are (the sandbox, its user, its limits) and running no submission's
code, before it grades on CUDA.

Standalone (stdlib, torch and Triton only): the grader copies this file into the worker
(`grader.sandbox.launch.TOOLS`). `probe` does what a part-4 worker does first: it initialises
CUDA, allocates and writes device memory, and compiles and runs a Triton kernel (Triton's
compiler and its launcher, built with the system's C compiler and linked to the driver's
library). Where one of these fails, its error says what the driver and the device files say,
so that whoever runs the grader can fix the machine.
"""

import ctypes
import glob
import os
import stat

import torch
import triton
import triton.language as tl

BLOCK = 1024  # elements `add_one` writes: its one program's


@triton.jit
def add_one(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) + 1)


def probe(allocate_bytes: int) -> str:
    """The device's name, once this worker has allocated and written `allocate_bytes` on it and
    a Triton kernel has run there; else RuntimeError saying why (`driver_says`)."""
    try:
        torch.cuda.init()
    except Exception as error:
        raise RuntimeError(f"torch cannot use CUDA here: {error} ({driver_says()})") from None
    torch.ones(allocate_bytes, dtype=torch.uint8, device="cuda")
    values = torch.zeros(BLOCK, dtype=torch.int32, device="cuda")
    try:
        add_one[(1,)](values, BLOCK=BLOCK)
    except Exception as error:
        raise RuntimeError(f"a Triton kernel does not compile or run here: {error}") from None
    if not bool((values == 1).all()):
        raise RuntimeError("a Triton kernel ran here but did not write what it was asked to")
    return torch.cuda.get_device_name()


def driver_says() -> str:
    """What the driver's `cuInit` returns to this process, and which of the NVIDIA device files
    this process's user may not open for reading and writing."""
    try:
        driver = f"cuInit returned {ctypes.CDLL('libcuda.so.1').cuInit(0)}"
    except OSError as error:
        driver = f"the driver's library does not load: {error}"
    files = sorted(glob.glob("/dev/nvidia*"))
    closed = [
        f"{path} ({stat.filemode(info.st_mode)} {info.st_uid}:{info.st_gid})"
        for path in files
        if not os.access(path, os.R_OK | os.W_OK) and (info := os.stat(path))
    ]
    if not files:
        access = "no /dev/nvidia* device file"
    elif closed:
        access = f"uid {os.getuid()} may not open {', '.join(closed)}"
    else:
        access = f"uid {os.getuid()} may open every /dev/nvidia* file"
    return f"{driver}; {access}"
