"""The codec the grading process and the worker share: tensors as plain JSON, never a pickle.

Both sides load this file: the grader as `grader.sandbox.wire`, the worker from its own copy
(it imports nothing from the kit). `tensor_from_wire` accepts only the dtypes below.
"""

import base64
import math
from typing import Any

PLAIN_TYPES = frozenset((type(None), bool, int, float, str))  # values that cross as they are
TENSOR_DTYPES = (
    "float16", "bfloat16", "float32", "float64", "bool", "uint8", "int8", "int16", "int32", "int64"
)  # fmt: skip


def plain_items(values: list) -> bool:
    """Whether every item of `values` is exactly a plain value (`PLAIN_TYPES`): such a list
    crosses as one copy (taken at once: a later request of a batch may change the list) and is
    shown by its repr, without a look at each item."""
    return PLAIN_TYPES.issuperset(map(type, values))


def tensor_to_wire(tensor: Any) -> dict:
    """A tensor as plain JSON: dtype name, shape and base64 of its bytes (copied to the CPU)."""
    import torch

    tensor = tensor.detach().to("cpu").contiguous()
    dtype = str(tensor.dtype).removeprefix("torch.")
    raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
    data = base64.b64encode(raw).decode("ascii")
    return {"$tensor": {"dtype": dtype, "shape": list(tensor.shape), "data": data}}


def tensor_from_wire(wire: dict) -> Any:
    """The tensor `tensor_to_wire` encoded: only known dtypes, exactly the bytes its shape needs
    (a reply cannot make the grader allocate more than it sent), never a pickle."""
    import torch

    dtype_name, shape = wire["dtype"], wire["shape"]
    if dtype_name not in TENSOR_DTYPES:
        raise ValueError(f"unexpected tensor dtype {dtype_name!r}")
    if not all(type(size) is int and size >= 0 for size in shape):
        raise ValueError(f"a tensor's shape must be sizes: {str(shape)[:80]}")
    dtype = getattr(torch, dtype_name)
    raw = bytearray(base64.b64decode(wire["data"], validate=True))
    if len(raw) != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"{len(raw)} bytes do not make a {dtype_name} tensor of shape {shape}")
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)
