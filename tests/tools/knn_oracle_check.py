#!/usr/bin/env python3
"""Checks a knnwb `.knn` file against a float64 brute-force oracle, row for row.

Usage: knn_oracle_check.py MATRIX.tsv GRAPH.knn K [METRIC]
MATRIX.tsv: header line, label column, numeric columns (as `knnwb knn` reads it). The values are
rounded to float32 first (what knnwb computes on), then every distance is computed in float64.
Each row's k neighbours must equal the oracle's, in order, except where the oracle has a near-tie
(distances within 1e-9), and each listed weight must equal the oracle distance to 1e-6 relative
(the .knn file prints 9 significant digits). Exits 1 on the first mismatch.
"""
import sys

import numpy as np


def load(path):
    with open(path) as f:
        f.readline()
        labels, rows = [], []
        for line in f:
            parts = line.rstrip("\n").split("\t")
            labels.append(parts[0])
            rows.append([float(v) for v in parts[1:]])
    return np.array(rows, dtype=np.float32).astype(np.float64)


def distances(x, metric):
    if metric in ("pearson", "abs-pearson", "spearman"):
        if metric == "spearman":
            from scipy.stats import rankdata  # only needed for spearman

            x = np.apply_along_axis(rankdata, 1, x)
        c = x - x.mean(axis=1, keepdims=True)
        c /= np.linalg.norm(c, axis=1, keepdims=True)
        r = np.clip(c @ c.T, -1, 1)
        return 1 - np.abs(r) if metric == "abs-pearson" else 1 - r
    if metric == "cosine":
        c = x / np.linalg.norm(x, axis=1, keepdims=True)
        return 1 - np.clip(c @ c.T, -1, 1)
    if metric == "euclidean":
        sq = (x * x).sum(axis=1)
        return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * x @ x.T, 0))
    raise SystemExit(f"metric {metric} not supported by this checker")


def main():
    matrix, graph, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    metric = sys.argv[4] if len(sys.argv) > 4 else "pearson"
    x = load(matrix)
    n = x.shape[0]
    with open(graph) as f:
        header = f.readline().split()
        assert int(header[0]) == n and int(header[1]) == n * k, f"header {header}, expected {n} {n * k}"
        edges = np.loadtxt(f, dtype=np.float64).reshape(-1, 3)
    lists = edges[:, 1].astype(np.int64).reshape(n, k)
    weights = edges[:, 2].reshape(n, k)
    assert (edges[:, 0].astype(np.int64).reshape(n, k) == np.arange(n)[:, None]).all(), "sources not in row order"
    checked = 0
    for start in range(0, n, 2048):
        stop = min(n, start + 2048)
        # Exact distances of this block of rows against all rows (float64 GEMM is exact enough:
        # its error ~1e-15 is far below the tie tolerance).
        block = distances_block(x, start, stop, metric)
        for i in range(start, stop):
            row = block[i - start]
            row[i] = np.inf
            order = np.lexsort((np.arange(n), row))[:k]
            for rank in range(k):
                got, want = lists[i, rank], order[rank]
                if got != want and abs(row[got] - row[want]) > 1e-9:
                    sys.exit(f"row {i} rank {rank}: knnwb {got} ({row[got]:.12g}), oracle {want} ({row[want]:.12g})")
                if abs(weights[i, rank] - row[got]) > 1e-6 * max(1.0, abs(row[got])):
                    sys.exit(f"row {i} rank {rank}: weight {weights[i, rank]} vs oracle {row[got]:.12g}")
            checked += 1
    print(f"ok: {checked} rows x k={k} match the float64 oracle ({metric})")


def distances_block(x, start, stop, metric):
    if metric in ("pearson", "abs-pearson", "cosine"):
        c = x - x.mean(axis=1, keepdims=True) if metric != "cosine" else x.copy()
        c /= np.linalg.norm(c, axis=1, keepdims=True)
        r = np.clip(c[start:stop] @ c.T, -1, 1)
        return 1 - np.abs(r) if metric == "abs-pearson" else 1 - r
    if metric == "euclidean":
        # Centred columns (distances do not change) keep the float64 expanded form accurate to
        # ~1e-13 relative, far below the 1e-9 tie tolerance.
        c = x - x.mean(axis=0, keepdims=True)
        sq = (c * c).sum(axis=1)
        d2 = sq[start:stop, None] + sq[None, :] - 2 * c[start:stop] @ c.T
        return np.sqrt(np.maximum(d2, 0))
    return distances(x, metric)[start:stop]


if __name__ == "__main__":
    main()
