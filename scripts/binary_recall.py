"""How many bits the binary index needs: recall@10 of an exact Hamming top N, by brute force.

The binary index finds ``k x overfetch`` candidates by Hamming distance between sign bits and
re-ranks them exactly, so its recall@10 is at most the share of the exact top 10 that an exact
Hamming top N holds: no graph, no ef_search, only the quantization. This script measures that
bound on a forum of noisy copies of a dump's posts (as ``sidecar bench --part scale`` makes
them) for the sign bits as pgvector's ``binary_quantize`` takes them, and for two cures tried:
centring the vectors on their mean first, and a random rotation first.

    python scripts/binary_recall.py [DUMP] [--copies 32] [--dims 384] [--state-dir .sidecar]

The dump must have been evaluated (or benchmarked) once with that state directory, so that its
posts' vectors are stored (``sidecar eval --dump DUMP``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import numpy.typing as npt

from sidecar.bench import scale_vectors as sv
from sidecar.config.settings import Settings
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.state import prepare_state

F32 = npt.NDArray[np.float32]
POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def hamming_recall(data: F32, queries: F32, exact: npt.NDArray[np.int64],
                   fetches: tuple[int, ...]) -> dict[int, float]:
    """Mean share of each query's exact top 10 inside its Hamming top N, for each N."""
    codes, qcodes = np.packbits(data > 0, axis=1), np.packbits(queries > 0, axis=1)
    most = max(fetches)
    found: dict[int, list[float]] = {f: [] for f in fetches}
    for i in range(len(queries)):
        ham = POPCOUNT[np.bitwise_xor(codes, qcodes[i])].sum(axis=1, dtype=np.int32)
        top = np.argpartition(ham, most)[:most]
        top = top[np.argsort(ham[top], kind="stable")]
        truth = set(exact[i].tolist())
        for f in fetches:
            found[f].append(len(truth & set(top[:f].tolist())) / len(truth))
    return {f: round(float(np.mean(v)), 4) for f, v in found.items()}


def main() -> None:
    """Print the bound for each way of taking the bits."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dump", nargs="?", default="../shared/eval/qatarliving", type=Path)
    parser.add_argument("--copies", type=int, default=32,
                        help="noisy copies of each post (32: the public half of a 1M forum)")
    parser.add_argument("--dims", type=int, default=0,
                        help="project into this many dimensions first, as the scale part does")
    parser.add_argument("--state-dir", type=Path, default=Path(".sidecar"))
    parser.add_argument("--fetch", default="400,800,1200", help="Hamming top N to try")
    args = parser.parse_args()
    dataset = load_dataset(args.dump)
    state = prepare_state(Settings(state_dir=args.state_dir), args.dump, build=False)
    try:
        _, vectors, _, queries = sv.dump_vectors(state.resources,
                                                 [q.text for q in dataset.queries])
    finally:
        state.close()
    vectors, queries = vectors.astype(np.float32), queries.astype(np.float32)
    rng = np.random.default_rng(0)
    sigma = sv.noise_sigma(sv.nearest_cosine(vectors))
    if args.dims:
        vectors, queries = sv.to_dims(vectors, args.dims), sv.to_dims(queries, args.dims)
    dims = vectors.shape[1]
    data = vectors[np.repeat(np.arange(len(vectors)), args.copies)]
    data += rng.standard_normal(data.shape, dtype=np.float32) * (sigma / np.sqrt(dims))
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    exact = np.argsort(-(queries @ data.T), axis=1)[:, :10]
    mean = data[rng.choice(len(data), min(20_000, len(data)), replace=False)].mean(axis=0)
    rotation = np.linalg.qr(rng.standard_normal((dims, dims)))[0].astype(np.float32)
    fetches = tuple(int(f) for f in args.fetch.split(","))
    print(f"{len(data):,} vectors of {dims} dims, {len(queries)} questions, |mean| "
          f"{np.linalg.norm(mean):.3f}")
    for name, d, q in (("sign bits (binary_quantize)", data, queries),
                       ("centred on the mean", data - mean, queries - mean),
                       ("randomly rotated", data @ rotation.T, queries @ rotation.T)):
        print(f"{name:28} recall@10 bound by Hamming top N: "
              f"{hamming_recall(d, q, exact, fetches)}", flush=True)


if __name__ == "__main__":
    main()
