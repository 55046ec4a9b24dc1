"""The timed workloads, in the worker: kit code, run there so that the grader times whole loops,
not round trips (`Remote.workload`; the worker's `workload` op). Also the strided views the kernel
checks give a wrapper where they ask for them (`strided`; the `launch` op).

Each returns evidence of its work that the grading process checks against what it asked for
(`grader.checks.allocator_timing`, `grader.checks.caching_timing`,
`grader.checks.gather_timing`): what a call asks comes with it, drawn afresh each time, so that
no answer can be prepared before it. The gather's sums weigh every token and lane of its rows,
and the slot mapping's a number mixed from every token's slot (`mixed`): no sum of the pool or
of the signs made once per call stands in for a round's work.

Loaded by the worker from its copy beside it (`worker.load_sibling`); stdlib at module level,
torch imported inside. A timing check's counterexample defines the same functions, their source
read from this file (`grader/checks/support/workloads.py`), so each is a plain function.
"""

from collections.abc import Callable
from typing import Any


def allocate_free_rounds(allocator: Any, sizes: list) -> list:
    """For each of `sizes`: allocate that many blocks, then free the ones the allocation before
    got (the last at the end). Returns the ids each allocation handed out, a list per call."""
    handed, previous = [], []
    for size in sizes:
        ids = allocator.allocate(size)
        allocator.free(previous)
        handed.append(list(ids))
        previous = ids
    allocator.free(previous)
    return handed


def prompt_free_rounds(cache: Any, system: list, first_token: int, rounds: int) -> list:
    """For each of `rounds`: request `first_token + r` with a prompt of `system` then as many
    fresh tokens (counting up from `first_token`), then free it. Returns each prompt's cached
    token count and its block table (read before the free), a list each."""
    counts, tables, fresh = [], [], first_token
    for request_id in range(first_token, first_token + rounds):
        prompt = system + list(range(fresh, fresh + len(system)))
        fresh += len(system)
        counts.append(cache.allocate_prompt(request_id, prompt))
        tables.append(list(cache.block_table(request_id)))
        cache.free(request_id)
    return [counts, tables]


def chain_decode_rounds(cache: Any, chains: list, picks: list, prompt_len: int) -> list:
    """For each chain of `chains` (token lists) that `picks` names: request `r` (counting from 0)
    asks for the chain's first `prompt_len` tokens, decodes the rest of it token by token, and is
    freed. Returns each prompt's cached token count and its block table (read before the free),
    a list each."""
    counts, tables = [], []
    for request_id, pick in enumerate(picks):
        chain = chains[pick]
        counts.append(cache.allocate_prompt(request_id, chain[:prompt_len]))
        for token in chain[prompt_len:]:
            cache.append_token(request_id, token)
        tables.append(list(cache.block_table(request_id)))
        cache.free(request_id)
    return [counts, tables]


def shuffle_tables(manager: Any, requests: list, generator: Any) -> None:
    """Give each request a fresh block table: the next blocks its `seq_len` needs from a random
    permutation of the manager's pool, drawn from `generator`."""
    import torch

    order = torch.randperm(manager.num_blocks, generator=generator).tolist()
    start = 0
    for request in requests:
        used = -(-request.seq_len // manager.block_size)
        request.block_table = order[start : start + used]
        start += used


def signs(shape: tuple, generator: Any, dtype: Any) -> Any:
    """A tensor of `shape` and `dtype` of +1 and -1, drawn from `generator`."""
    import torch

    return torch.randint(0, 2, shape, generator=generator, dtype=dtype) * 2 - 1


def weighed_rounds(
    manager: Any, requests: list, rounds: int, generator: Any, call: Any, weights: list, weigh: Any
) -> list:
    """`rounds` times: fresh block tables for the requests (`shuffle_tables`), then `call` of
    each, weighed by `weigh(result, weight)` where its shape is its weight's. Returns the shapes
    of the last round's results and, per round, the sum of the weighings."""
    sums = []
    for _ in range(rounds):
        shuffle_tables(manager, requests, generator)
        total, shapes = 0.0, []
        for request, weight in zip(requests, weights, strict=True):
            result = call(request)
            shapes.append(list(result.shape))
            if result.shape == weight.shape:
                total += weigh(result, weight)
        sums.append(total)
    return [shapes, sums]


def gather_rounds(manager: Any, requests: list, seed: int, rounds: int) -> list:
    """`weighed_rounds` of `get_physical_cache`: each request's rows weighed by `signs` per token
    and lane, drawn from `seed` first (the pool holds whole numbers: the sums are exact)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    lanes = manager.physical_kv_cache.shape[-1]  # not manager.head_dim: part 2 grades that
    weights = [signs((r.seq_len, lanes), generator, torch.float32) for r in requests]
    return weighed_rounds(
        manager, requests, rounds, generator, manager.get_physical_cache, weights,
        lambda rows, weight: float((weight * rows).sum()),
    )  # fmt: skip


def mixed(slots: Any) -> Any:
    """A whole number under 2**20 per slot (exact in float64), from all of the slot's bits: an
    odd 64-bit multiplier, wrapping, then its high bits folded into its low ones. Unlike the slot
    itself, its sum over a block's tokens is no function of the block's number that sums of the
    signs per block could give without each token. Cheaper than a lookup in a table per slot,
    which cost as much as the reference's slot mapping and brought a loop over tokens near its
    limit."""
    import torch

    x = slots.to(torch.int64) * -0x61C8864680B583EB  # 0x9E3779B97F4A7C15 as a signed int64
    return ((x ^ (x >> 29)) & 0xFFFFF).to(torch.float64)


def slot_mapping_rounds(manager: Any, requests: list, seed: int, rounds: int) -> list:
    """`weighed_rounds` of `slot_mapping`: each request's slots, `mixed`, weighed by `signs` per
    token, drawn from `seed` first."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    weights = [signs((r.seq_len,), generator, torch.float64) for r in requests]
    return weighed_rounds(
        manager, requests, rounds, generator, manager.slot_mapping, weights,
        lambda slots, weight: float(mixed(slots) @ weight),
    )  # fmt: skip


def strided(tensor: Any) -> Any:
    """`tensor`'s values in a view of a NaN buffer one more than twice its size in every dim: at
    offset 1 and stride 2 in each. A kernel that takes its inputs for contiguous reads NaN."""
    import torch

    shape = [2 * size + 1 for size in tensor.shape]
    buffer = torch.full(shape, float("nan"), dtype=tensor.dtype, device=tensor.device)
    view = buffer[tuple(slice(1, None, 2) for _ in shape)]
    view.copy_(tensor)
    return view


WORKLOADS: dict[str, Callable[..., Any]] = {
    "allocate_free_rounds": allocate_free_rounds,
    "prompt_free_rounds": prompt_free_rounds,
    "chain_decode_rounds": chain_decode_rounds,
    "gather_rounds": gather_rounds,
    "slot_mapping_rounds": slot_mapping_rounds,
}
