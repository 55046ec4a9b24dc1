"""Timing a candidate against the reference in the same run, as a ratio, never as a time.

Each round runs every measured call once, one after the other: the candidate's call is timed by
pytest-benchmark, the others (the reference, other pool sizes) by the same clock in the round's
untimed setup. Interleaving makes drift (frequency scaling, a noisy neighbour) hit all of them
alike; the best round of each is kept, the least disturbed one.
"""

import time
from collections.abc import Callable
from typing import Any

# A candidate this much faster than the reference is flagged for review and not rewarded: the
# reference is no straw man, and the timed loop runs in the candidate's own process.
IMPLAUSIBLE_SPEEDUP = 10.0


def assert_plausible(ratio: float, what: str) -> None:
    """`ratio` (candidate / reference) must not be implausibly small."""
    assert ratio * IMPLAUSIBLE_SPEEDUP >= 1, (
        f"{what} ran {1 / ratio:.0f}x faster than the reference's, which is not plausible: "
        "flagged for review, not rewarded"
    )


def time_interleaved(
    benchmark: Any, target: Callable[[], Any], others: dict[str, Callable[[], Any]], rounds: int
) -> dict[str, float]:
    """Best seconds per call of `target` (key "target") and of each of `others`."""
    seconds: dict[str, list[float]] = {name: [] for name in others}

    def run_others() -> None:
        for name, call in others.items():
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)

    benchmark.pedantic(target, setup=run_others, rounds=rounds, warmup_rounds=1)
    best = {name: min(values[1:]) for name, values in seconds.items()}  # [0] is the warm-up
    return {"target": benchmark.stats.stats.min, **best}


def time_once(calls: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Seconds of one call of each (a probe before the real measurement)."""
    seconds = {}
    for name, call in calls.items():
        start = time.perf_counter()
        call()
        seconds[name] = time.perf_counter() - start
    return seconds
