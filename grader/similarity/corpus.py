"""The reference corpus: fingerprints of public implementations, and the kit's answer key.

`corpus.json` ships each public reference's winnowed hashes and line spans, its origin (repo,
path, commit) and its file's sha256: nothing that reconstructs the code. `SOURCES` says where
each comes from and which submission files it is compared with. Rebuild after a source or the
fingerprint settings (`K`, `W`, the token stream's `NORMALIZATION`) change:

    python -m grader.similarity.corpus --rebuild nano-vllm=DIR vllm=DIR

each DIR a tree of that repository holding each source's file as it is at the commit `SOURCES`
names for it (the vLLM sources name three commits: lay each file from its own, e.g. with `git
archive COMMIT PATH`; its sha256 is in `corpus.json`, to check the tree against). The prefix
cache (`prefix_cache.py`) is compared with vLLM v1's block pool and free-block queue and with
nano-vllm's block manager (its hashed, reused blocks). The answer key is fingerprinted when it
is loaded, from `solutions/` where the kit has it (the full kit): the candidate kit carries no
trace of it. Each reference is a file of a known implementation (`Reference.implementation`), which
a similar pair names: its files are one implementation, `ANSWER_KEY_NAME`; a public reference is
one of its own. The original tutorial's code is not in the corpus: no public copy of it was found.
"""

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import ANSWER_KEY, ANSWER_KEY_NAME
from grader.parts import SUBMISSION_FILES
from grader.similarity.fingerprints import NORMALIZATION, Fingerprint, K, W, fingerprints

CORPUS = Path(__file__).with_name("corpus.json")
ALLOCATOR_FILES = ("block_allocator.py", "kv_cache_manager.py")
PREFIX_CACHE_FILE = "prefix_cache.py"


@dataclass(frozen=True)
class Source:
    """Where a reference comes from: `repo` is a key of the rebuild's `NAME=DIR` arguments."""

    name: str
    repo: str
    url: str
    path: str
    commit: str
    compare_with: tuple[str, ...]


SOURCES = (
    Source(
        "nano-vllm block_manager.py",
        "nano-vllm",
        "https://github.com/GeeeekExplorer/nano-vllm",
        "nanovllm/engine/block_manager.py",
        "bb823b3e06983d71485a8e1f23715ebd87d98ef8",
        (*ALLOCATOR_FILES, PREFIX_CACHE_FILE),
    ),
    Source(
        "nano-vllm scheduler.py",
        "nano-vllm",
        "https://github.com/GeeeekExplorer/nano-vllm",
        "nanovllm/engine/scheduler.py",
        "bb823b3e06983d71485a8e1f23715ebd87d98ef8",
        ("scheduler.py",),
    ),
    Source(
        "vLLM naive_block.py (block allocator)",
        "vllm",
        "https://github.com/vllm-project/vllm",
        "vllm/core/block/naive_block.py",
        "9fc24cf932860bd37673082cf84d9ab2d8ffd090",
        ALLOCATOR_FILES,
    ),
    Source(
        "vLLM chunked_prefill_paged_decode.py (Triton paged attention)",
        "vllm",
        "https://github.com/vllm-project/vllm",
        "vllm/attention/ops/chunked_prefill_paged_decode.py",
        "ecb91d2bca57a30d00bd1baac4a108a07b2bdc63",
        ("paged_attention.py",),
    ),
    Source(
        "vLLM v1 block_pool.py (cached-block lookup and eviction)",
        "vllm",
        "https://github.com/vllm-project/vllm",
        "vllm/v1/core/block_pool.py",
        "6bc6f2d86d7800f878a4a13495b51a6e3b728c37",  # #45939, 2026-06-21
        (PREFIX_CACHE_FILE,),
    ),
    Source(
        "vLLM v1 kv_cache_utils.py (free-block queue, block hash)",
        "vllm",
        "https://github.com/vllm-project/vllm",
        "vllm/v1/core/kv_cache_utils.py",
        "6bc6f2d86d7800f878a4a13495b51a6e3b728c37",  # #45939, 2026-06-21
        (PREFIX_CACHE_FILE,),
    ),
)


@dataclass(frozen=True)
class Reference:
    """A reference as shipped: its origin and fingerprints, no code."""

    name: str
    url: str
    path: str
    commit: str
    sha256: str
    compare_with: tuple[str, ...]
    fingerprints: tuple[Fingerprint, ...]
    implementation: str  # the known implementation it is a file of: its own name, or the key's

    @property
    def answer_key(self) -> bool:
        return self.implementation == ANSWER_KEY_NAME


def build(roots: dict[str, Path]) -> dict:
    """The corpus document for `SOURCES`, each read from `roots[source.repo]`."""
    references = [
        reference(source, (roots[source.repo] / source.path).read_bytes()) for source in SOURCES
    ]
    return {
        "k": K,
        "w": W,
        "normalization": NORMALIZATION,
        "references": [as_entry(ref) for ref in references],
    }


def reference(source: Source, data: bytes, implementation: str = "") -> Reference:
    """`source`'s file, `data`, as a reference, a file of `implementation` (default: its own)."""
    return Reference(
        name=source.name,
        url=source.url,
        path=source.path,
        commit=source.commit,
        sha256=hashlib.sha256(data).hexdigest(),
        compare_with=source.compare_with,
        fingerprints=tuple(fingerprints(data)),
        implementation=implementation or source.name,
    )


def as_entry(ref: Reference) -> dict:
    """`ref` as `corpus.json` holds it."""
    return {
        "name": ref.name,
        "url": ref.url,
        "path": ref.path,
        "commit": ref.commit,
        "sha256": ref.sha256,
        "compare_with": list(ref.compare_with),
        "fingerprints": [[f"{p.hash:016x}", p.first, p.last] for p in ref.fingerprints],
    }


def load(path: Path = CORPUS) -> list[Reference]:
    """The shipped references, then the answer key's files where the kit has them; ValueError
    when the corpus was built with other fingerprint settings."""
    document = json.loads(path.read_text())
    built = (document["k"], document["w"], document.get("normalization", 1))
    if built != (K, W, NORMALIZATION):
        raise ValueError(f"{path} was built with k, w, normalization = {built}: rebuild it")
    shipped = [
        Reference(
            name=entry["name"],
            url=entry["url"],
            path=entry["path"],
            commit=entry["commit"],
            sha256=entry["sha256"],
            compare_with=tuple(entry["compare_with"]),
            fingerprints=tuple(
                Fingerprint(int(value, 16), first, last)
                for value, first, last in entry["fingerprints"]
            ),
            implementation=entry["name"],
        )
        for entry in document["references"]
    ]
    return shipped + answer_key()


def answer_key(folder: Path = ANSWER_KEY) -> list[Reference]:
    """Each file of the answer key in `folder` (the kit's) as a reference, read now; none in the
    candidate kit."""
    return [
        reference(
            Source(f"{ANSWER_KEY_NAME} {name}", "", "", f"solutions/{name}", "", (name,)),
            data,
            ANSWER_KEY_NAME,
        )
        for name in SUBMISSION_FILES
        if (data := read(folder / name)) is not None
    ]


def read(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def main(argv: list[str]) -> int:
    cli = argparse.ArgumentParser(
        prog="python -m grader.similarity.corpus", description=__doc__.split("\n")[0]
    )
    cli.add_argument(
        "--rebuild",
        nargs="+",
        metavar="REPO=DIR",
        required=True,
        help=f"a checkout of each of: {', '.join(sorted({s.repo for s in SOURCES}))}",
    )
    cli.add_argument("--out", type=Path, default=CORPUS)
    args = cli.parse_args(argv)
    roots = dict(arg.split("=", 1) for arg in args.rebuild)
    missing = {s.repo for s in SOURCES} - roots.keys()
    if missing:
        cli.error(f"no checkout given for {', '.join(sorted(missing))}")
    document = build({repo: Path(root) for repo, root in roots.items()})
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n")
    print(f"wrote {len(document['references'])} references to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
