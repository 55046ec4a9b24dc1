"""Part 2: prefill and decode allocation, against the abstract model of `manager_model`.

Each call is checked at once for what exercises/README.md says must follow (see `ManagerModel`): how
many blocks a request holds, that a new block was free, that a refused call changed nothing, and
that the free count adds up. No check depends on which free block the candidate hands out.

The manager reaches the candidate's allocator: where that allocator fails part 1 and this module
lost points, it is graded a second time with the kit's allocator in its place (it is `regraded` in
`grader/parts.toml`), and the part keeps the better grading, so that an allocator bug costs points
in part 1 only.
"""

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import (
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from grader.checks.support.expect import a_tensor, judged_by, raises, same
from grader.checks.support.manager_model import (
    REQUESTS,
    ManagerMachine,
    ManagerModel,
    new_manager,
    new_request,
    num_free,
)
from grader.checks.support.rules import POOL_DTYPE
from grader.said import said

pytestmark = pytest.mark.part("decode")


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_new_manager_and_request(submission):
    """A new manager: every block free, its sizes kept, a float32 pool of zeros; bad sizes and a
    negative prompt_len raise ValueError."""
    transcript = submission.transcript
    for sizes in [(0, 1, 1), (5, 4, 8), (3, 1, 2)]:
        manager = new_manager(submission, *sizes)
        same(
            transcript,
            num_free(manager),
            sizes[0],
            said(
                "a new KVCacheManager{sizes} must have len(free_blocks) == num_blocks == {n}",
                sizes=sizes,
                n=sizes[0],
            ),
        )
        got = (manager.num_blocks, manager.block_size, manager.head_dim)
        name = transcript.code(manager)
        same(
            transcript,
            got,
            sizes,
            said(
                "KVCacheManager{sizes} must keep (num_blocks, block_size, head_dim) == "
                "{kept}, got {got}",
                sizes=sizes,
                kept=sizes,
                got=got,
            ),
            got=f"({name}.num_blocks, {name}.block_size, {name}.head_dim)",
        )
        pool = manager.physical_kv_cache
        code = f"{name}.physical_kv_cache"
        a_tensor(
            transcript,
            pool,
            code,
            said("physical_kv_cache must be a tensor, got {pool}", pool=f"{pool!r}"),
        )
        with judged_by(POOL_DTYPE):
            same(
                transcript,
                (pool.dtype, tuple(pool.shape)),
                (torch.float32, sizes),
                said(
                    "physical_kv_cache must be float32 [num_blocks, block_size, head_dim] = "
                    "{shape}, got {dtype} {got}",
                    shape=list(sizes),
                    dtype=pool.dtype,
                    got=list(pool.shape),
                ),
                got=f"({name}.physical_kv_cache.dtype, tuple({name}.physical_kv_cache.shape))",
                expected=f"(torch.float32, {sizes})",
            )
        same(
            transcript,
            bool(pool.any()),
            False,
            said("a new physical_kv_cache must be all zeros"),
            got=f"bool({name}.physical_kv_cache.any())",
        )
    bad_sizes = [((-1, 4, 8), "num_blocks -1"), ((4, 0, 8), "block_size 0"),
                 ((4, -1, 8), "block_size -1"), ((4, 4, 0), "head_dim 0")]  # fmt: skip
    for sizes, what in bad_sizes:
        call = said("{call}, with {what},", call=f"KVCacheManager{sizes}", what=what)
        with raises(transcript, ValueError, call):
            new_manager(submission, *sizes)
    call = said("{call}, with {what},", call="Request(0, -1)", what=said("a negative prompt_len"))
    with raises(transcript, ValueError, call):
        new_request(submission, 0, -1)
    req = new_request(submission, 7, 5)
    got = (req.request_id, req.seq_len, req.block_table)
    name = transcript.code(req)
    same(
        transcript,
        got,
        (7, 5, []),
        said(
            "Request(7, 5) must have request_id 7, seq_len 5 and block_table [], got {got}", got=got
        ),
        got=f"({name}.request_id, {name}.seq_len, {name}.block_table)",
    )


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_prefill_takes_ceil_seq_len_over_block_size_blocks(submission):
    """allocate_for_prefill gives ceil(seq_len / block_size) free blocks; an empty prompt none."""
    for block_size in (1, 3, 4):
        submission.transcript.reset()
        model = ManagerModel(submission, 16, block_size, 1)
        for prompt_len in (5, 0, block_size, 1, 2 * block_size + 1):
            model.prefill(prompt_len)
            model.check_tables()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_bad_prefills_are_refused(submission):
    """Prefill on a non-empty table raises ValueError; prefill short of blocks RuntimeError, with
    nothing allocated; either way nothing changes."""
    model = ManagerModel(submission, 3, 4, 1)
    req = model.prefill(5)
    model.prefill_again(req)
    model.check_tables()
    model.prefill(9)  # 3 blocks, 1 free: refused
    model.check_tables()
    model.prefill(4)  # the free block is still there
    model.check_tables()
    submission.transcript.reset()
    empty = ManagerModel(submission, 0, 4, 1)
    empty.prefill(1)
    empty.check_tables()
    empty.prefill(0)
    empty.check_tables()


@pytest.mark.points(3)
@pytest.mark.severity("safety")
def check_decode_adds_a_block_exactly_when_a_token_starts_one(submission):
    """allocate_for_decode adds one to seq_len, and appends a free block exactly when the new
    token's position is a multiple of block_size."""
    for block_size, prompt_len in [(4, 6), (4, 0), (2, 2), (3, 1)]:
        submission.transcript.reset()
        model = ManagerModel(submission, 8, block_size, 1)
        req = model.prefill(prompt_len)
        for _ in range(2 * block_size + 1):
            model.decode(req)
            model.check_tables()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_decode_with_block_size_one(submission):
    """With block_size 1 every token starts a block (the tutorial's `seq_len % block_size == 1`
    never holds)."""
    model = ManagerModel(submission, 8, 1, 1)
    for prompt_len in (2, 0):
        req = model.prefill(prompt_len)
        for _ in range(3):
            model.decode(req)
            model.check_tables()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_decode_without_a_free_block_is_refused(submission):
    """A token that needs a block when none is free: RuntimeError, seq_len not incremented. A
    token that fits its last block needs no free block."""
    model = ManagerModel(submission, 3, 4, 1)
    req = model.prefill(5)
    other = model.prefill(4)
    for _ in range(4):  # tokens 5, 6 and 7 fit in block 1; token 8 needs a block: refused
        model.decode(req)
        model.check_tables()
    model.free(other)
    model.decode(req)
    model.check_tables()
    submission.transcript.reset()
    empty = ManagerModel(submission, 0, 2, 1)
    req = empty.prefill(0)
    empty.decode(req)
    empty.check_tables()


@pytest.mark.points(2)
@pytest.mark.severity("safety")
def check_free_returns_every_block(submission):
    """free(req) empties its block table and returns all of its blocks to the pool."""
    model = ManagerModel(submission, 8, 2, 1)
    requests = [model.prefill(5), model.prefill(0), model.prefill(3)]
    model.decode(requests[1])
    for req in requests:
        model.free(req)
        model.check_tables()
    model.prefill(16)  # needs every block
    model.check_tables()


class DecodeMachine(ManagerMachine):
    """Prefill, decode and free on several requests, and prefills that must be refused, on pools
    of 0 to 32 blocks and one of 10 000."""

    @initialize(
        num_blocks=st.one_of(st.integers(0, 32), st.just(10_000)), block_size=st.integers(1, 8)
    )
    def new_manager(self, num_blocks, block_size):
        self.model = ManagerModel(self.submission, num_blocks, block_size, 1)

    @precondition(lambda self: any(tracked.table for tracked in self.model.live.values()))
    @rule(tracked=REQUESTS.filter(lambda tracked: tracked.table))
    def prefill_again(self, tracked):
        self.model.prefill_again(tracked)

    @invariant()
    def matches_the_model(self):
        self.model.check_tables()


@pytest.mark.points(8)
@pytest.mark.severity("safety")
def check_random_prefill_decode_and_free(submission):
    run_state_machine_as_test(lambda: DecodeMachine(submission))
