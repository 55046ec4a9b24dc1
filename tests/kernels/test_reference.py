"""The float64 oracles of `kernels/reference.py` against a second, naive derivation.

Every check here recomputes the answer with plain loops over sequences, heads and tokens,
looking each key and value up through the block table by hand (exercises/README.md parts 3 and 4).
The caches hold NaN in every slot a correct oracle must not read — padding table entries, unused
pool blocks, slots past a sequence's length — so a stray read surfaces as NaN.
"""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from kernels.cases import Case, nan_pool
from kernels.reference import gather_reference, paged_attention_decode_reference, token_slots

TIGHT = {"rtol": 1e-12, "atol": 1e-12}
BLOCK_SIZES = (1, 8, 16, 32)
HEAD_DIMS = (32, 64, 80, 96, 128, 256)
GQA_RATIOS = (1, 2, 4, 8)
INPUT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# `(num_heads, num_kv_heads)`: MHA, GQA with ratios 2, 4 and 8, and MQA.
HEAD_LAYOUTS = {"mha": (4, 4), "gqa2": (4, 2), "gqa4": (8, 2), "gqa8": (16, 2), "mqa": (4, 1)}


# --- the naive derivations ------------------------------------------------------------------


def direct_slots(table: list[int], seq_len: int, block_size: int) -> list[int]:
    return [table[t // block_size] * block_size + t % block_size for t in range(seq_len)]


def direct_gather(cache: torch.Tensor, table: list[int], seq_len: int) -> torch.Tensor:
    """Token by token: row `t` is block `table[t // block_size]`, offset `t % block_size`."""
    block_size = cache.shape[1]
    rows = [cache[table[t // block_size], t % block_size] for t in range(seq_len)]
    return torch.stack(rows).double()


def direct_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """One score per token with `math.exp` on max-subtracted scores, then the weighted sum of
    the value rows, for each sequence and query head in turn."""
    num_seqs, num_heads, head_dim = q.shape
    block_size, num_kv_heads = k_cache.shape[1:3]
    group = num_heads // num_kv_heads
    scale = head_dim**-0.5 if scale is None else scale
    q, k_cache, v_cache = q.double(), k_cache.double(), v_cache.double()
    out = torch.zeros(num_seqs, num_heads, head_dim, dtype=torch.float64)
    for s in range(num_seqs):
        table = block_tables[s].tolist()
        slots = [(table[t // block_size], t % block_size) for t in range(int(seq_lens[s]))]
        if not slots:
            continue
        for h in range(num_heads):
            kv = h // group
            scores = [scale * torch.dot(q[s, h], k_cache[b, o, kv]).item() for b, o in slots]
            top = max(scores)
            weights = [math.exp(score - top) for score in scores]
            weighted = sum(w * v_cache[b, o, kv] for w, (b, o) in zip(weights, slots, strict=True))
            out[s, h] = weighted / math.fsum(weights)
    return out


# --- building inputs ------------------------------------------------------------------------


def blocks_for(seq_len: int, block_size: int) -> int:
    return math.ceil(seq_len / block_size)


def make_case(
    seq_lens: list[int],
    *,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 32,
    block_size: int = 8,
    dtype: torch.dtype = torch.float32,
    spare_blocks: int = 1,
    padding_columns: int = 1,
    order: list[int] | None = None,
    seed: int = 0,
) -> Case:
    """A decode batch on a pool of the blocks the sequences need plus `spare_blocks` NaN ones.

    Physical blocks go to the sequences in `order`, a permutation of the pool (random when
    None); every block table then ends in `padding_columns` entries naming spare blocks.
    """
    generator = torch.Generator().manual_seed(seed)
    needed = [blocks_for(n, block_size) for n in seq_lens]
    num_blocks = sum(needed) + spare_blocks
    if order is None:
        order = torch.randperm(num_blocks, generator=generator).tolist()
    assert sorted(order) == list(range(num_blocks)), "order must be a permutation of the pool"
    spare = order[sum(needed) :]
    width = max(needed) + padding_columns
    tables, start = [], 0
    for count in needed:
        padding = [spare[i % len(spare)] for i in range(width - count)]
        tables.append(order[start : start + count] + padding)
        start += count
    shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = nan_pool(shape, tables, seq_lens, generator)
    v_cache = nan_pool(shape, tables, seq_lens, generator)
    q = torch.randn(len(seq_lens), num_heads, head_dim, generator=generator)
    return Case(
        q.to(dtype),
        k_cache.to(dtype),
        v_cache.to(dtype),
        torch.tensor(tables, dtype=torch.int32),
        torch.tensor(seq_lens, dtype=torch.int32),
    )


def assert_matches_direct(case: Case, scale: float | None = None) -> torch.Tensor:
    """The oracle's output is float64, of the right shape, NaN-free and equal to the direct
    computation; returned for further checks."""
    out = paged_attention_decode_reference(*case.inputs, scale=scale)
    assert out.dtype == torch.float64
    assert out.shape == case.q.shape
    assert not out.isnan().any(), "the oracle read a NaN slot"
    torch.testing.assert_close(out, direct_decode(*case.inputs, scale=scale), **TIGHT)
    return out


@st.composite
def decode_cases(draw: st.DrawFn) -> tuple[Case, float | None]:
    block_size = draw(st.sampled_from(BLOCK_SIZES))
    seq_lens = draw(st.lists(st.integers(0, 70), min_size=1, max_size=3))
    num_kv_heads = draw(st.integers(1, 2))
    spare_blocks = draw(st.integers(1, 3))
    num_blocks = sum(blocks_for(n, block_size) for n in seq_lens) + spare_blocks
    case = make_case(
        seq_lens,
        num_heads=num_kv_heads * draw(st.sampled_from(GQA_RATIOS)),
        num_kv_heads=num_kv_heads,
        head_dim=draw(st.sampled_from(HEAD_DIMS)),
        block_size=block_size,
        dtype=draw(st.sampled_from(INPUT_DTYPES)),
        spare_blocks=spare_blocks,
        padding_columns=draw(st.integers(1, 2)),
        order=draw(st.permutations(range(num_blocks))),
        seed=draw(st.integers(0, 2**32 - 1)),
    )
    return case, draw(st.none() | st.floats(0.05, 2.0))


# --- paged_attention_decode_reference -------------------------------------------------------


@given(decode_cases())
def test_decode_matches_direct(drawn: tuple[Case, float | None]) -> None:
    case, scale = drawn
    assert_matches_direct(case, scale)


@pytest.mark.parametrize(("num_heads", "num_kv_heads"), HEAD_LAYOUTS.values(), ids=HEAD_LAYOUTS)
def test_decode_head_layouts(num_heads: int, num_kv_heads: int) -> None:
    case = make_case([1, 9, 23], num_heads=num_heads, num_kv_heads=num_kv_heads)
    assert_matches_direct(case)


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("block_size", BLOCK_SIZES)
def test_decode_block_sizes_and_head_dims(block_size: int, head_dim: int) -> None:
    """Ragged lengths: two blocks and a partial third, a partial first, a single token."""
    case = make_case([2 * block_size + 3, 5, 1], head_dim=head_dim, block_size=block_size)
    assert_matches_direct(case)


def test_decode_query_head_reads_kv_head_h_div_group() -> None:
    """With every value row of kv head `j` equal to `j`, query head `h` outputs its kv head's
    index: `h // 2` here, which differs from `h % 4` for most heads."""
    num_heads, num_kv_heads = 8, 4
    case = make_case([5, 12], num_heads=num_heads, num_kv_heads=num_kv_heads)
    kv_index = torch.arange(num_kv_heads, dtype=torch.float32).view(1, 1, -1, 1)
    v_cache = torch.where(case.v_cache.isnan(), case.v_cache, kv_index)
    case = Case(case.q, case.k_cache, v_cache, case.block_tables, case.seq_lens)

    out = assert_matches_direct(case)
    heads = torch.arange(num_heads, dtype=torch.float64)
    by_division = (heads // (num_heads // num_kv_heads)).view(1, -1, 1).expand_as(out)
    by_modulo = (heads % num_kv_heads).view(1, -1, 1).expand_as(out)
    assert not torch.equal(by_division, by_modulo)
    torch.testing.assert_close(out, by_division, **TIGHT)


def test_decode_length_zero_gives_exact_zeros() -> None:
    """A length-0 sequence gives zeros even though its table names only NaN blocks."""
    case = make_case([0, 6, 0])
    out = assert_matches_direct(case)
    assert torch.equal(out[[0, 2]], torch.zeros(2, *out.shape[1:], dtype=torch.float64))


def test_decode_length_one_gives_the_value_row_exactly() -> None:
    num_heads, num_kv_heads = 8, 2
    case = make_case([1, 1], num_heads=num_heads, num_kv_heads=num_kv_heads)
    out = paged_attention_decode_reference(*case.inputs)
    for s, block in enumerate(case.block_tables[:, 0].tolist()):
        for h in range(num_heads):
            expected = case.v_cache[block, 0, h // (num_heads // num_kv_heads)].double()
            assert torch.equal(out[s, h], expected)


def test_decode_default_scale_is_inverse_sqrt_head_dim() -> None:
    case = make_case([7, 20], head_dim=80)
    default = assert_matches_direct(case)
    assert torch.equal(default, paged_attention_decode_reference(*case.inputs, scale=80**-0.5))
    assert not torch.allclose(default, paged_attention_decode_reference(*case.inputs, scale=1.0))


def test_decode_honours_an_explicit_scale() -> None:
    case = make_case([7, 20], head_dim=96)
    explicit = assert_matches_direct(case, scale=0.37)
    assert not torch.allclose(explicit, paged_attention_decode_reference(*case.inputs))


def test_decode_block_table_may_repeat_a_block() -> None:
    """Table `[1, 1, 0, 2]` for 19 tokens of block size 8: tokens 0-7 and 8-15 both read block
    1, tokens 16-18 read block 0; block 2 (padding) and block 0's slots 3-7 are NaN."""
    generator = torch.Generator().manual_seed(0)
    shape = (3, 8, 2, 32)
    k_cache = nan_pool(shape, [[1, 0]], [11], generator)
    v_cache = nan_pool(shape, [[1, 0]], [11], generator)
    q = torch.randn(1, 4, 32, generator=generator)
    table = torch.tensor([[1, 1, 0, 2]], dtype=torch.int32)
    case = Case(q, k_cache, v_cache, table, torch.tensor([19], dtype=torch.int32))
    assert_matches_direct(case)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_decode_upcasts_low_precision_inputs(dtype: torch.dtype) -> None:
    """The oracle works in float64 on the upcast inputs, as the direct computation does:
    rounding anything to `dtype` on the way would miss the tight tolerance."""
    assert_matches_direct(make_case([3, 17, 40], dtype=dtype, block_size=16))


@pytest.mark.parametrize("shift", [1000.0, -1000.0])
def test_decode_softmax_is_stable_for_large_scores(shift: float) -> None:
    """Scores of `shift` plus a unit normal: `exp` of them overflows (or underflows to 0/0)
    in float64, so only a max-subtracted softmax stays finite."""
    case = make_case([4, 19], dtype=torch.float64)
    q = torch.zeros_like(case.q)
    q[..., 0] = 1.0  # with scale 1, each score is the key's first lane
    k_cache = case.k_cache.clone()
    k_cache[..., 0] += shift
    case = Case(q, k_cache, case.v_cache, case.block_tables, case.seq_lens)
    out = assert_matches_direct(case, scale=1.0)
    assert torch.isfinite(out).all()


def test_decode_rejects_heads_not_divisible_by_kv_heads() -> None:
    case = make_case([4], num_heads=4, num_kv_heads=4)
    q = torch.randn(1, 6, case.q.shape[-1])
    with pytest.raises(ValueError, match="multiple"):
        paged_attention_decode_reference(q, *case.inputs[1:])


# --- gather_reference and token_slots -------------------------------------------------------

POOL_TRAILING_SHAPES = {"manager_pool": (16,), "kernel_cache": (2, 16)}


@st.composite
def gather_cases(draw: st.DrawFn) -> tuple[torch.Tensor, list[int], int]:
    """A pool (either trailing shape), one sequence's table (maybe with padding entries naming
    NaN blocks) and its length."""
    block_size = draw(st.sampled_from(BLOCK_SIZES))
    seq_len = draw(st.integers(1, 100))
    needed = blocks_for(seq_len, block_size)
    spare_blocks = draw(st.integers(0, 3))
    order = draw(st.permutations(range(needed + spare_blocks)))
    table = order[: needed + draw(st.integers(0, spare_blocks))]
    trailing = draw(st.sampled_from(list(POOL_TRAILING_SHAPES.values())))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))
    pool = nan_pool((len(order), block_size, *trailing), [table], [seq_len], generator)
    return pool.to(draw(st.sampled_from(INPUT_DTYPES))), table, seq_len


@given(gather_cases())
def test_gather_and_slots_match_direct(drawn: tuple[torch.Tensor, list[int], int]) -> None:
    cache, table, seq_len = drawn
    block_size = cache.shape[1]

    slots = token_slots(torch.tensor(table), seq_len, block_size)
    assert slots.dtype == torch.long
    assert slots.tolist() == direct_slots(table, seq_len, block_size)

    gathered = gather_reference(cache, table, seq_len)
    assert gathered.dtype == torch.float64
    assert torch.equal(gathered, direct_gather(cache, table, seq_len))


@pytest.mark.parametrize("trailing", POOL_TRAILING_SHAPES.values(), ids=POOL_TRAILING_SHAPES)
@pytest.mark.parametrize("table", [[], [2]], ids=["empty_table", "padding_only"])
def test_gather_of_length_zero_is_empty(trailing: tuple[int, ...], table: list[int]) -> None:
    cache = torch.randn(3, 8, *trailing)
    gathered = gather_reference(cache, table, 0)
    assert gathered.shape == (0, *trailing)
    assert gathered.dtype == torch.float64
    slots = token_slots(torch.tensor(table, dtype=torch.long), 0, 8)
    assert slots.shape == (0,)
    assert slots.dtype == torch.long


@pytest.mark.parametrize(
    ("block_size", "seq_len", "table"),
    [(8, 17, [0, 1]), (1, 3, [2, 0]), (16, 1, [])],
    ids=["partial_block_missing", "block_size_1", "empty_table"],
)
def test_gather_rejects_a_too_short_block_table(
    block_size: int, seq_len: int, table: list[int]
) -> None:
    cache = torch.randn(3, block_size, 16)
    with pytest.raises(ValueError, match="need"):
        gather_reference(cache, table, seq_len)
