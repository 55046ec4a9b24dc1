"""The shared-prefix workload of `make simulate` (`full_kit.prefix_simulation`).

Its server, without sharing, is checked step for step against the simulator's paged continuous
batching on random traces; with shared prefixes, against what any serving must keep and what
caching must save; and the default figures against the orderings they exist to show.
"""

import json
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from full_kit import prefix_simulation as prefix
from full_kit import simulate as sim
from tests.full_kit.test_simulate import Case, cases

Turn = prefix.Turn


@dataclass(frozen=True)
class Shared:
    """A trace whose prompts share a system prompt, with follow-up turns, and its pool."""

    trace: list[Turn]
    num_blocks: int
    block_size: int
    max_num_seqs: int


@st.composite
def shared(draw: st.DrawFn, roomy: bool = False) -> Shared:
    """Token ids from a tiny vocabulary (so blocks also match by chance); a pool from the
    largest request alone to every request at once, or (`roomy`) every request at once."""
    block_size = draw(st.integers(1, 8))
    tokens = st.lists(st.integers(0, 3), min_size=1, max_size=12)
    system = draw(st.lists(st.integers(0, 3), max_size=20))
    trace: list[Turn] = []
    for _ in range(draw(st.integers(1, 8))):
        answer = tuple(draw(tokens))
        open_turns = {*range(len(trace))} - {turn.after for turn in trace}
        after = draw(st.sampled_from(sorted(open_turns))) if open_turns else None
        if after is not None and draw(st.booleans()):
            previous = trace[after]
            prompt = previous.prompt + previous.answer + tuple(draw(tokens))
            trace.append(Turn(prompt, answer, draw(st.integers(0, 3)), after))
        else:
            trace.append(Turn(tuple(system + draw(tokens)), answer, draw(st.integers(0, 8))))
    needs = [sim.cdiv(len(turn.prompt) + len(turn.answer), block_size) for turn in trace]
    low = sum(needs) if roomy else max(needs)
    num_blocks = draw(st.integers(low, sum(needs)))
    return Shared(trace, num_blocks, block_size, draw(st.integers(1, 8)))


def turns(case: Case) -> list[Turn]:
    """`case`'s requests as first turns, every token distinct from every other request's (a
    request of `cases()` has at most 72)."""
    return [
        Turn(tuple(range(r * 72, r * 72 + p)), tuple(range(r * 72 + p, r * 72 + p + n)), t)
        for r, (t, p, n) in enumerate(case.trace)
    ]


def serve(case: Shared, caching: bool) -> list[prefix.PrefixStep]:
    return prefix.serve_trace(
        case.trace, caching, case.num_blocks, case.block_size, case.max_num_seqs
    )


def check_served(case: Shared, steps: list[prefix.PrefixStep]) -> None:
    """What any serving must do: each request gets exactly its answer's tokens and finishes
    once, never before it arrives (a follow-up: after its previous turn finished and its
    delay); seats and the pool are never exceeded; a prefill never finds its last token
    cached, and finds whole blocks."""
    tokens = Counter(r for step in steps for r in step.scheduled)
    assert tokens == {r: len(turn.answer) for r, turn in enumerate(case.trace)}
    finished = {r: number for number, step in enumerate(steps) for r in step.finished}
    assert sorted(r for step in steps for r in step.finished) == list(range(len(case.trace)))
    first = {r: number for number, step in reversed(list(enumerate(steps))) for r in step.scheduled}
    for r, turn in enumerate(case.trace):
        arrival = turn.delay if turn.after is None else finished[turn.after] + 1 + turn.delay
        assert first[r] >= arrival, f"request {r}"
    for number, step in enumerate(steps):
        assert len(step.scheduled) <= step.running <= case.max_num_seqs, f"step {number}"
        assert step.held <= case.num_blocks * case.block_size, f"step {number}"
        assert 0 <= step.cached < step.prompt or step.prompt == step.cached == 0, f"step {number}"
        assert step.cached % case.block_size == 0, f"step {number}"


@given(cases(), st.booleans())
def test_without_shared_tokens_it_is_paged_continuous_batching_step_for_step(
    case: Case, caching: bool
) -> None:
    """No token shared between requests: with caching or without, the same schedule and memory
    as the simulator's paged server (a preempted request finding its own idle blocks takes no
    more and no fewer than it would take empty ones)."""
    args = (case.num_blocks, case.block_size, case.max_num_seqs)
    steps = prefix.serve_trace(turns(case), caching, *args)
    paged = sim.continuous_batching(case.trace, *args)
    assert [(s.scheduled, s.preempted, s.finished, s.held) for s in steps] == [
        (s.scheduled, s.preempted, s.finished, s.held) for s in paged
    ]


@given(shared())
def test_shared_prefixes_are_served_with_caching_and_without(case: Shared) -> None:
    cached, uncached = serve(case, caching=True), serve(case, caching=False)
    check_served(case, cached)
    check_served(case, uncached)
    figures = prefix.summarise(uncached, case.block_size)
    assert figures["cached_tokens"] == 0
    assert figures["computed_prompt_tokens"] == figures["prompt_tokens"]
    assert 0 <= prefix.summarise(cached, case.block_size)["hit_rate"] < 1


@given(shared(roomy=True))
def test_with_room_for_every_request_caching_only_saves(case: Shared) -> None:
    """A pool that never runs short: both runs keep the same schedule, and in every step the
    run with caching computes and holds no more than the run without."""
    cached, uncached = serve(case, caching=True), serve(case, caching=False)
    assert [(s.scheduled, s.finished) for s in cached] == [
        (s.scheduled, s.finished) for s in uncached
    ]
    assert not any(s.preempted for s in cached + uncached)
    for number, (with_, without) in enumerate(zip(cached, uncached, strict=True)):
        assert with_.prompt == without.prompt, f"step {number}"
        assert with_.computed == without.computed - with_.cached, f"step {number}"
        assert with_.held <= without.held, f"step {number}"


def test_a_system_prompt_and_the_previous_turn_are_found_cached() -> None:
    """Blocks of 4: request 1 finds the 8 tokens of the system prompt request 0 computed (not
    its own last block), request 2, the next turn of request 0, the 12 tokens of that turn's
    prompt and answer, though request 0 has finished (its blocks idle, still cached)."""
    system = (1, 2, 3, 4, 5, 6, 7, 8)
    first = Turn((*system, 9), (10, 11, 12), delay=0)
    trace = [
        first,
        Turn((*system, 13, 14), (15, 16), delay=1),
        Turn((*first.prompt, *first.answer, 17), (18,), delay=0, after=0),
    ]
    case = Shared(trace, num_blocks=16, block_size=4, max_num_seqs=4)
    cached, uncached = serve(case, caching=True), serve(case, caching=False)
    check_served(case, cached)
    assert [(s.scheduled, s.finished) for s in cached] == [([0], []), ([0, 1], []),
                                                         ([0, 1], [0, 1]), ([2], [2])]  # fmt: skip
    assert [(s.prompt, s.cached, s.computed) for s in cached] == [
        (9, 0, 9), (10, 8, 1 + 2), (0, 0, 2), (13, 12, 1)
    ]  # fmt: skip
    assert [s.held // 4 for s in cached] == [3, 3 + 1, 3 + 1, 4]
    assert [s.held // 4 for s in uncached] == [3, 3 + 3, 3 + 3, 4]
    figures = prefix.summarise(cached, block_size=4)
    assert figures["hit_rate"] == 20 / 32
    assert figures["computed_prompt_tokens"] == 12


def test_traces_that_could_never_be_served_are_refused() -> None:
    first = Turn((1, 2), (3,), delay=0)
    for trace in (
        [Turn((1, 2), (3,), delay=-1)],
        [first, Turn((1, 2, 3, 4), (5,), delay=0, after=1)],
        [first, Turn((1, 2, 3, 4), (5,), delay=0, after=0), Turn((1, 2, 3, 6), (7,), 0, after=0)],
    ):
        with pytest.raises(ValueError, match="delay >= 0"):
            prefix.serve_trace(trace, caching=True, num_blocks=4, block_size=2, max_num_seqs=1)
    with pytest.raises(ValueError, match="could never run"):
        prefix.serve_trace([first], caching=True, num_blocks=1, block_size=2, max_num_seqs=1)


def test_the_trace_shares_system_prompts_and_resends_each_conversation() -> None:
    trace = prefix.make_trace(seed=1)
    assert trace == prefix.make_trace(seed=1)
    assert trace != prefix.make_trace(seed=2)
    firsts = [turn for turn in trace if turn.after is None]
    assert len(firsts) == prefix.SINGLE + prefix.CHATS
    systems = {turn.prompt[: prefix.SYSTEM_LEN[0]] for turn in firsts}
    assert 1 < len(systems) <= prefix.SYSTEM_PROMPTS
    for turn in trace:
        assert len(turn.prompt) + len(turn.answer) <= prefix.CONTEXT_LEN
        if turn.after is not None:
            previous = trace[turn.after]
            assert turn.after < trace.index(turn)
            assert turn.prompt[: len(previous.prompt) + len(previous.answer)] == (
                previous.prompt + previous.answer
            )
            assert len(turn.prompt) > len(previous.prompt) + len(previous.answer)
    assert len({turn.after for turn in trace if turn.after is not None}) == len(trace) - len(firsts)


# The default figures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def figures() -> dict:
    return prefix.simulate(seed=0)


def test_the_figures_show_what_caching_saves(figures: dict) -> None:
    cached, uncached = figures["runs"]["cached"], figures["runs"]["uncached"]
    assert 0 < cached["hit_rate"] < 1
    assert uncached["hit_rate"] == 0
    assert cached["computed_prompt_tokens"] < uncached["computed_prompt_tokens"] / 2
    assert cached["computed_per_step"] < uncached["computed_per_step"]
    assert cached["blocks_mean"] < uncached["blocks_mean"]
    pool = sim.POOL_TOKENS // prefix.BLOCK_SIZE
    assert cached["blocks_peak"] <= uncached["blocks_peak"] <= pool
    assert cached["preemptions"] <= uncached["preemptions"]
    assert figures["parameters"]["follow_ups"] > 0
    assert figures == json.loads(json.dumps(figures))  # JSON-able


def test_the_same_seed_gives_the_same_figures(figures: dict) -> None:
    assert prefix.simulate(seed=0) == figures


def test_the_table_headline_and_plots(figures: dict) -> None:
    body = prefix.rows(figures)
    assert len(body) == 1 + len(prefix.RUNS)
    assert all(len(row) == len(body[0]) for row in body)
    assert "prefix-cache hit rate" in sim.table(body)
    assert f"{100 * figures['runs']['cached']['hit_rate']:.1f}%" in prefix.headline(figures)
    specs = prefix.chart_specs(figures)
    assert set(specs) == set(prefix.FILES[1:])
    for spec in specs.values():
        assert set(spec["args"]["series"]) == {run["label"] for run in figures["runs"].values()}
