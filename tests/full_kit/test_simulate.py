"""The simulator (`full_kit.simulate`) and its charts (`grader.report.svg`).

The simulator's continuous batching is checked step for step against the reference scheduler
on random traces (`simulate()` itself never imports `solutions/`; its command also runs the
shared-prefix workload, `test_prefix_simulation.py`); every scheme against the
invariants any serving must keep; and the default figures against the orderings they exist to
show. The charts must be well-formed XML with every string escaped, whatever the data.
"""

import itertools
import json
import math
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from full_kit import prefix_simulation as prefix
from full_kit import simulate as sim
from grader import grade
from grader.report.svg import bar_chart, line_chart, ticks
from grader.scoring import batching
from solutions.kv_cache_manager import KVCacheManager
from solutions.scheduler import Scheduler
from tests.grader.report.test_writers import full_marks_report, written

HOSTILE = "<script>alert(1)</script> & co"
SVG = "{http://www.w3.org/2000/svg}"


@dataclass(frozen=True)
class Case:
    """A trace (ids 0, 1, ... in arrival order) and a pool that fits each request alone."""

    trace: list[tuple[int, int, int]]
    num_blocks: int
    block_size: int
    max_num_seqs: int

    @property
    def pool_tokens(self) -> int:
        return self.num_blocks * self.block_size


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """Pools from the tightest (the largest request alone) to roomy (every request at once)."""
    block_size = draw(st.integers(1, 16))
    request = st.tuples(st.integers(0, 8), st.integers(1, 48), st.integers(1, 24))
    trace = sorted(draw(st.lists(request, min_size=1, max_size=10)))
    needs = [batching.cdiv(p + n, block_size) for _, p, n in trace]
    tight, roomy = max(needs), sum(needs)
    num_blocks = draw(st.integers(tight, min(roomy, 2 * tight)) | st.integers(tight, roomy))
    return Case(trace, num_blocks, block_size, draw(st.integers(1, 8)))


def reference_steps(case: Case) -> list[tuple[list[int], list[int], list[int]]]:
    """The reference scheduler on `case`, requests added just before their arrival step."""
    scheduler = Scheduler(KVCacheManager(case.num_blocks, case.block_size, 1), case.max_num_seqs)
    steps, added = [], 0
    while added < len(case.trace) or scheduler.has_unfinished():
        while added < len(case.trace) and case.trace[added][0] == len(steps):
            scheduler.add_request(added, *case.trace[added][1:])
            added += 1
        out = scheduler.step()
        steps.append((out.scheduled, out.preempted, out.finished))
    return steps


def check_served(case: Case, steps: list[batching.Step]) -> None:
    """What any scheme must do: each request gets exactly its tokens and finishes once, in the
    step of its last token; seats and the pool are never exceeded; no token outside memory."""
    tokens = Counter(r for step in steps for r in step.scheduled)
    assert tokens == {r: n for r, (*_, n) in enumerate(case.trace)}
    finished = [r for step in steps for r in step.finished]
    assert sorted(finished) == list(range(len(case.trace)))
    for number, step in enumerate(steps):
        assert len(step.scheduled) <= step.running <= case.max_num_seqs, f"step {number}"
        assert step.used <= step.held <= case.pool_tokens, f"step {number}"
        assert set(step.finished) <= set(step.scheduled), f"step {number}"
        assert all(case.trace[r][0] <= number for r in step.scheduled), f"step {number}"


# The simulator's schemes ---------------------------------------------------------------------


@given(cases())
def test_continuous_batching_is_the_reference_scheduler_step_for_step(case: Case) -> None:
    steps = sim.continuous_batching(case.trace, case.num_blocks, case.block_size, case.max_num_seqs)
    assert [(s.scheduled, s.preempted, s.finished) for s in steps] == reference_steps(case)
    check_served(case, steps)


@given(cases())
def test_static_batching_serves_every_request_and_never_beats_continuous(case: Case) -> None:
    args = (case.trace, case.num_blocks, case.block_size, case.max_num_seqs)
    static, continuous = batching.static_batching(*args), sim.continuous_batching(*args)
    check_served(case, static)
    assert not any(step.preempted for step in static)
    assert len(continuous) <= len(static)


@given(cases())
def test_paging_with_blocks_of_one_holds_a_token_in_every_slot(case: Case) -> None:
    steps = sim.continuous_batching(case.trace, case.pool_tokens, 1, case.max_num_seqs)
    assert all(step.used == step.held for step in steps)
    assert sim.summarise(steps, case.pool_tokens)["slots_holding_tokens"] == 100


@given(cases(), st.sampled_from(sorted(sim.RESERVATIONS)))
def test_contiguous_reservation_holds_fewer_tokens_than_paging(case: Case, name: str) -> None:
    """Same pool in tokens, every reservation scheme: never preempts, and its slots hold fewer
    tokens than blocks of one, strictly once a request generates more than one token."""
    # A power of two, as a buddy allocator's pool, with room for any rounded reservation.
    pool = 1 << (2 * case.pool_tokens - 1).bit_length()

    def reserve(prompt_len: int, max_new_tokens: int) -> int:
        if name == "max":
            return max(p + n for _, p, n in case.trace)
        return sim.RESERVATIONS[name](prompt_len, max_new_tokens)

    steps = sim.contiguous_batching(case.trace, pool, reserve, case.max_num_seqs)
    check_served(Case(case.trace, pool, 1, case.max_num_seqs), steps)
    assert not any(step.preempted for step in steps)
    utilisation = sim.summarise(steps, pool)["slots_holding_tokens"]
    paged = sim.continuous_batching(case.trace, pool, 1, case.max_num_seqs)
    assert utilisation <= sim.summarise(paged, pool)["slots_holding_tokens"]
    if any(n > 1 for *_, n in case.trace):
        assert utilisation < 100


@given(cases())
def test_utilisation_falls_as_blocks_grow(case: Case) -> None:
    """With a pool that never runs short, every block size runs the same schedule, so the
    slots holding tokens can only fall as blocks grow (each size divides the next)."""
    pool = sum(batching.cdiv(p + n, 128) * 128 for _, p, n in case.trace)
    runs = [
        sim.continuous_batching(case.trace, pool // size, size, case.max_num_seqs)
        for size in sim.BLOCK_SIZES
    ]
    assert all([s.scheduled for s in run] == [s.scheduled for s in runs[0]] for run in runs)
    shares = [sim.summarise(run, pool)["slots_holding_tokens"] for run in runs]
    assert shares == sorted(shares, reverse=True)


def test_static_batching_waits_for_the_longest_request() -> None:
    """Two seats: the batch {0, 1} runs 4 steps although 1 is done after one, and 2 (arrived at
    step 1) starts only then; continuous batching gives 2 the seat 1 left at once."""
    trace = [(0, 1, 4), (0, 1, 1), (1, 1, 1)]
    static = batching.static_batching(trace, num_blocks=8, block_size=1, max_num_seqs=2)
    continuous = sim.continuous_batching(trace, num_blocks=8, block_size=1, max_num_seqs=2)
    assert [s.scheduled for s in static] == [[0, 1], [0], [0], [0], [2]]
    assert [s.running for s in static] == [2, 2, 2, 2, 1]
    assert [s.scheduled for s in continuous] == [[0, 1], [0, 2], [0], [0]]


def test_contiguous_reservations_are_aligned_powers_of_two() -> None:
    """A pool of 16 slots, exact reservations: 0-3 take 4 slots each and fill it; 1 and 2 end
    first, and 4 (8 slots) still waits a step with the 8 middle slots free, for a buddy
    allocator places 8 slots only at 0 or 8."""
    trace = [(0, 1, 2), (0, 3, 1), (0, 3, 1), (0, 1, 2), (0, 7, 1)]
    steps = sim.contiguous_batching(trace, 16, sim.RESERVATIONS["exact"], max_num_seqs=8)
    assert [(s.scheduled, s.held, s.waiting) for s in steps] == [
        ([0, 1, 2, 3], 16, 1),
        ([0, 3], 8, 1),
        ([4], 8, 0),
    ]


def test_requests_that_could_never_run_are_refused() -> None:
    with pytest.raises(ValueError, match="could never run"):
        sim.continuous_batching([(0, 10, 7)], num_blocks=4, block_size=4, max_num_seqs=1)
    with pytest.raises(ValueError, match="could never run"):
        batching.static_batching([(0, 10, 7)], num_blocks=4, block_size=4, max_num_seqs=1)
    with pytest.raises(ValueError, match="reserve at least"):
        sim.contiguous_batching([(0, 10, 7)], 64, lambda p, n: p, max_num_seqs=1)
    with pytest.raises(ValueError, match="arrives at step -1"):
        batching.static_batching([(-1, 1, 1)], num_blocks=4, block_size=4, max_num_seqs=1)


# The default figures -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def figures() -> dict:
    return sim.simulate(seed=0)


def test_the_figures_show_what_they_exist_to_show(figures: dict) -> None:
    schemes = figures["schemes"]
    share = {key: s["slots_holding_tokens"] for key, s in schemes.items()}
    paged = [share[f"paged-{size}"] for size in sim.BLOCK_SIZES]
    assert paged == sorted(paged, reverse=True)
    assert len(set(paged)) == len(paged)
    assert max(share[f"contiguous-{name}"] for name in sim.RESERVATIONS) < min(paged)
    static, continuous = schemes["static-16"], schemes["paged-16"]
    assert continuous["tokens_per_step"] > 2 * static["tokens_per_step"]
    assert continuous["steps"] < static["steps"]
    assert schemes["contiguous-max"]["running_max"] == sim.POOL_TOKENS // sim.MODEL_MAX_LEN
    tokens = sum(n for *_, n in sim.make_trace(0))
    assert all(s["tokens"] == tokens for s in schemes.values())


def test_the_reports_read_the_figures_the_simulator_computes(figures: dict) -> None:
    """Every full-kit report shows the kept figures (`grade.simulation`): those the default
    trace gives now, records and all, so a change to the simulation is kept before it lands."""
    computed = json.loads(json.dumps(sim.report_figures(figures)))
    assert grade.simulation() == computed, (
        f"{sim.REPORT_FIGURES} is not what the simulator computes: after a change to the "
        "simulation, run `.venv/bin/python -m full_kit.simulate --keep`"
    )
    assert computed["said"]["headline"]["id"]  # the records, for the report's other language


def test_keep_writes_the_default_trace_s_report_figures(
    tmp_path: Path, figures: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    kept = tmp_path / sim.REPORT_FIGURES.name
    monkeypatch.setattr(sim, "REPORT_FIGURES", kept)
    monkeypatch.setattr(sim, "simulate", lambda seed=0: figures if seed == 0 else None)
    assert sim.main(["--keep"]) == 0
    written = json.loads(kept.read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(sim.report_figures(figures)))
    assert f"Wrote {kept}." in capsys.readouterr().err


def test_the_cli_prints_the_table_and_writes_its_files(
    tmp_path: Path, figures: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sim.main(["--out", str(tmp_path / "out"), "--seed", "0"]) == 0
    printed = capsys.readouterr()
    assert "tokens/step" in printed.out
    assert "continuous, paged: block 128" in printed.out
    assert "Orca (Oracle)" in printed.err  # progress, one line per scheme
    written = json.loads((tmp_path / "out" / "simulation.json").read_text())
    assert written == json.loads(json.dumps(figures))  # same seed, same figures
    shared = json.loads((tmp_path / "out" / "prefix_caching.json").read_text())
    assert prefix.headline(shared) in printed.out  # the shared-prefix workload, after
    assert "prefix-cache hit rate" in printed.out
    for name in [*sim.charts(figures), *prefix.FILES[1:]]:
        root = ET.parse(tmp_path / "out" / name).getroot()
        assert root.tag == f"{SVG}svg"


# The charts ----------------------------------------------------------------------------------


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("viewBox")
    assert not any(element.tag.endswith(("script", "foreignObject")) for element in root.iter())
    return root


def texts(root: ET.Element) -> str:
    return " ".join(" ".join(element.itertext()) for element in root.iter(f"{SVG}text"))


def test_every_string_in_a_chart_is_escaped() -> None:
    line = line_chart(HOSTILE, HOSTILE, HOSTILE, {HOSTILE: [(0, 1), (1, 2)]})
    bars = bar_chart(HOSTILE, [HOSTILE], {HOSTILE: [1.0]}, HOSTILE)
    for svg in (line, bars):
        assert "<script" not in svg
        root = parse(svg)
        assert texts(root).count(HOSTILE) == 4
        assert root.find(f"{SVG}title").text == HOSTILE


def test_charts_without_data_still_render() -> None:
    for svg in (
        line_chart("t", "x", "y", {}),
        line_chart("t", "x", "y", {"empty": []}),
        bar_chart("t", [], {}, "%"),
        bar_chart("t", ["a"], {"s": [math.nan]}, "%"),
    ):
        root = parse(svg)
        assert not list(root.iter(f"{SVG}polyline"))
    assert "no data" in texts(parse(line_chart("t", "x", "y", {"empty": []})))


def test_a_bar_chart_draws_one_bar_per_number_and_none_for_nan() -> None:
    root = parse(bar_chart("t", ["a", "b\nc"], {"s": [1.0, 2.0], "u": [math.nan, 3.0]}, "%"))
    bars = [rect for rect in root.iter(f"{SVG}rect") if rect.get("height") not in (None, "12")]
    assert len(bars) == 1 + 3  # the background, then three bars
    assert "c" in texts(root).split()  # the category's second line
    with pytest.raises(ValueError, match="one value per category"):
        bar_chart("t", ["a", "b"], {"s": [1.0]}, "%")


@settings(max_examples=30)
@given(
    st.dictionaries(
        st.text(max_size=12),
        st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6)), max_size=20),
        max_size=4,
    )
)
def test_lines_stay_inside_the_chart(series: dict[str, list[tuple[float, float]]]) -> None:
    root = parse(line_chart("t", "x", "y", series))
    _, _, width, height = map(float, root.get("viewBox").split())
    for polyline in root.iter(f"{SVG}polyline"):
        for point in polyline.get("points").split():
            x, y = map(float, point.split(","))
            assert 0 <= x <= width
            assert 0 <= y <= height


@given(st.floats(-1e6, 1e6), st.floats(0, 1e6))
def test_ticks_are_round_and_cover_the_range(low: float, span: float) -> None:
    assume(span == 0 or span > 1e-6 * (1 + abs(low)))  # not finer than a float can tell
    values = ticks(low, low + span)
    assert values[0] <= low
    assert values[-1] >= low + span
    assert 2 <= len(values) <= 7
    steps = {round(b - a, 9) for a, b in itertools.pairwise(values)}
    assert len({f"{step:.6g}" for step in steps}) == 1


def test_the_simulation_shows_its_table_and_plots_drawn_from_data(tmp_path: Path) -> None:
    report = full_marks_report()
    report["simulation"] = simulation = json.loads(json.dumps(grade.simulation()))
    simulation["charts"][0]["args"]["title"] = HOSTILE  # a report.json is data, never markup
    written(report, tmp_path)  # the simulation gets a page of its own, which the reports link to
    html = (tmp_path / "simulation.html").read_text(encoding="utf-8")
    section = html.split('id="simulation"')[1]
    assert section.count("<svg") == 3
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in section
    assert "<script" not in html
    for text in ("paged: block 16", "contiguous: Orca (Max)", "96.3%", "tokens per step"):
        assert text in section
