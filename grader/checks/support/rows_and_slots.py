"""What a gather and a slot mapping must return, bit for bit: the assertions part 3's checks and
the manager model's reads of each request's rows (parts 2 and 6) share, each failing with a
message in exercises/README.md's terms and the counterexample's last line."""

import torch

from grader.checks.support.expect import a_tensor, judged_by, same
from grader.checks.support.rules import POOL_DTYPE, SLOT_DTYPE
from grader.said import said
from grader.sandbox.transcript import Transcript
from kernels.reference import token_slots


def assert_shape(
    transcript: Transcript, got: object, what: str, shape: list[int], code: str
) -> None:
    """What `what` returned (`code` in the counterexample) is a tensor of `shape`."""
    a_tensor(
        transcript,
        got,
        code,
        lambda: said("{what} must return a tensor, got {got}", what=what, got=f"{got!r}"),
    )
    dims = "[seq_len, head_dim]" if len(shape) == 2 else "[seq_len]"
    same(
        transcript,
        list(got.shape),
        shape,
        lambda: said(
            "{what} must have shape {dims} = {shape}, got {got}",
            what=what,
            dims=dims,
            shape=shape,
            got=list(got.shape),
        ),
        got=f"list({code}.shape)",
    )


def assert_dtype(
    transcript: Transcript, got: torch.Tensor, what: str, dtype: torch.dtype, code: str
) -> None:
    """What `what` returned (`code` in the counterexample) is of `dtype`."""
    same(
        transcript,
        got.dtype,
        dtype,
        lambda: (
            said("{what} must return float32 rows, got {dtype}", what=what, dtype=got.dtype)
            if dtype == torch.float32
            else said(
                "{what} must be a LongTensor (int64), got {dtype}", what=what, dtype=got.dtype
            )
        ),
        got=f"{code}.dtype",
        expected=str(dtype),
    )


def assert_rows(
    transcript: Transcript,
    got: object,
    expected: torch.Tensor,
    what: str,
    table: list[int],
    block_size: int,
    code: tuple[str, str],
) -> None:
    """A gather: a float32 tensor shaped like `expected`, equal to it bit for bit; `code`: the
    two as the counterexample computes them. Its values first, then its dtype: rows right but
    for their dtype are read from a pool of that dtype, part 2's rule (`rules.POOL_DTYPE`)."""
    assert_shape(transcript, got, what, list(expected.shape), code[0])
    wrong = (got.to(expected.dtype) != expected).any(dim=1).nonzero().flatten().tolist()
    if wrong:
        i = wrong[0]
        transcript.fail(*code, op="equal")
        raise AssertionError(
            said(
                "{what}: row {i} is {got}, expected {expected} (token {i} lives in block "
                "block_table[{index}] = {block} at offset {offset}); {wrong} of {total} rows are "
                "wrong",
                what=what,
                i=i,
                got=got[i].tolist(),
                expected=expected[i].tolist(),
                index=i // block_size,
                block=table[i // block_size],
                offset=i % block_size,
                wrong=len(wrong),
                total=len(got),
            )
        )
    with judged_by(POOL_DTYPE):
        assert_dtype(transcript, got, what, expected.dtype, code[0])


def assert_slots(
    transcript: Transcript,
    got: object,
    table: tuple[list[int], str],
    seq_len: int,
    block_size: int,
    what: str,
    code: str,
) -> None:
    """A slot mapping: an int64 tensor `[seq_len]` that follows the block table (`table`: its
    value, and its code in the counterexample); `code`: the mapping's."""
    table, table_code = table
    assert_shape(transcript, got, what, [seq_len], code)
    with judged_by(SLOT_DTYPE):  # the right slots, of another type: a type slip
        assert_dtype(transcript, got, what, torch.int64, code)
    expected = token_slots(table, seq_len, block_size)
    wrong = (got != expected).nonzero().flatten().tolist()
    if wrong:
        i, block = wrong[0], table[wrong[0] // block_size]
        transcript.needs("from kernels.reference import token_slots")
        transcript.fail(code, f"token_slots({table_code}, {seq_len}, {block_size})", "equal")
        raise AssertionError(
            said(
                "{what}[{i}] is {got}, expected block_table[{i} // {size}] * {size} + {i} % "
                "{size} = {block} * {size} + {offset} = {slot}",
                what=what,
                i=i,
                got=got[i].item(),
                size=block_size,
                block=block,
                offset=i % block_size,
                slot=expected[i].item(),
            )
        )
