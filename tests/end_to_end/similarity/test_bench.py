"""The similarity report of a 500-submission drive: `make bench` (not `make test`)."""

import random

import pytest

from grader.similarity import corpus
from grader.similarity.pairs import find_pairs
from tests.end_to_end.similarity.copies import (
    alternatives,
    intake,
    key_files,
    renamed_and_reordered,
)

DRIVE = 500


def own_code(rng: random.Random) -> bytes:
    """A few functions of random arithmetic: code no other submission holds."""
    ops = ["+", "-", "*", "//", "%", "<<", "&", "|"]
    functions = []
    for f in range(rng.randint(3, 8)):
        body = [
            f"    v{i} = v{i - 1} {rng.choice(ops)} {rng.randint(1, 99)}"
            for i in range(1, rng.randint(6, 20))
        ]
        checks = [
            f"    if v{i} > {rng.randint(1, 9)}:\n        v0 = v{i} {rng.choice(ops)} v0"
            for i in range(1, 4)
        ]
        functions.append(f"def own{f}(v0):\n" + "\n".join(body + checks) + "\n    return v0\n")
    return "\n\n".join(functions).encode()


def drive(seed: int = 0) -> list:
    """Mutated copies of the answer key and the alternatives, each with code of its own; one in
    ten a plain renamed copy of an earlier one."""
    rng = random.Random(seed)
    sources = [key_files(), *({**key_files(), **alt.files} for alt in alternatives())]
    made = []
    for n in range(DRIVE):
        if n and rng.random() < 0.1:
            files = {
                name: renamed_and_reordered(data, n)
                for name, data in rng.choice(made).files.items()
            }
        else:
            files = {
                name: data + b"\n\n" + own_code(rng) for name, data in rng.choice(sources).items()
            }
        made.append(intake(f"candidate-{n:03d}", files))
    return made


@pytest.mark.bench
def test_bench_a_drive_of_500(benchmark) -> None:
    submissions = drive()
    references = corpus.load()
    pairs = benchmark.pedantic(find_pairs, args=(submissions, references), rounds=1, iterations=1)
    benchmark.extra_info.update(submissions=len(submissions), pairs=len(pairs))
    assert pairs
