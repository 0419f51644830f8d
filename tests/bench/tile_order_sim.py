#!/usr/bin/env python3
"""How many candidates a row's running threshold lets through, rows in their given order against
rows grouped by a cheap k-means: a CPU model of the GPU's symmetric tile loop, which weighed
grouping the rows before the search (since built: core/engine/row_order.c, kernels/row_order.cu;
measured in docs/performance-gpu.md).

The model: tiles of TILE rows, every diagonal tile first (each row's first tile, not counted),
then the tiles (b, c), b < c, row by row; a pair is a candidate for row i when its correlation
beats i's running kc-th best (exact thresholds, merged at once; the GPU merges lazily, so it
passes more), for the tile's rows and, off the diagonal, its columns. Prints candidates per row
for the given order, rows grouped by module (the synthetic rows only) and rows grouped by
11-means and 64-means (cosine k-means of a 20,000-row sample, 8 Lloyd rounds, every row to its
nearest centroid).

Rows: the synthetic modules of bench_knn_gpu (d = 295, modules of about 1,534 rows in random
order), or a random sample of ROWS rows of an NPY matrix (e.g. the real-like metafeatures).

Measured on the 2-core VM (2026-12-01), kc = 40 (Pearson k = 20):
  tile_order_sim.py 60000 2048            given 157.8, by module 40.0, 11-means 79.2, 64-means 38.5
  tile_order_sim.py 100000 4096 real.npy  given 105.0, 11-means 81.6, 64-means 58.3
(real.npy: `knnwb metafeatures all876.tsv --ops all`; its "by module" line is meaningless.)

Usage: tile_order_sim.py ROWS TILE [MATRIX.npy]
"""
import sys
import time

import numpy as np


def synthetic(rng, n, d):
    """bench_knn_gpu's kind of rows: 8 + strength * pattern(module) + noise."""
    module = rng.integers(0, 1000 * n // 1533876 + 1, n)
    pattern = rng.uniform(-1, 1, (module.max() + 1, d)).astype(np.float32)
    strength = rng.uniform(0, 2, n).astype(np.float32)
    noise = rng.uniform(size=(n, d)) + rng.uniform(size=(n, d)) + rng.uniform(size=(n, d)) - 1.5
    return module, 8 + strength[:, None] * pattern[module] + noise.astype(np.float32)


def candidates(y, tile, kc):
    """Candidates per row after each row's first (diagonal) tile, in the GPU's tile order."""
    n = y.shape[0]
    nb = (n + tile - 1) // tile
    best = np.full((n, kc), -np.inf, np.float32)
    thr = np.full(n, -np.inf, np.float32)
    count = 0
    order = [(b, b) for b in range(nb)] + [(b, c) for b in range(nb) for c in range(b + 1, nb)]
    for b, c in order:
        rb = slice(b * tile, min(n, (b + 1) * tile))
        cb = slice(c * tile, min(n, (c + 1) * tile))
        p = y[rb] @ y[cb].T
        if b == c:
            np.fill_diagonal(p, -np.inf)
        for rows, prod in ((rb, p), (cb, p.T)) if b != c else ((rb, p),):
            if b != c:
                count += int((prod > thr[rows][:, None]).sum())
            both = np.concatenate([best[rows], prod], 1)
            top = -np.partition(-both, kc - 1, 1)[:, :kc]
            best[rows] = np.sort(top, 1)[:, ::-1]
            thr[rows] = best[rows][:, -1]
    return count / n


def main():
    n, tile, kc, d = int(sys.argv[1]), int(sys.argv[2]), 40, 295
    rng = np.random.default_rng(1)
    module, x = synthetic(rng, n, d)
    if len(sys.argv) > 3:
        full = np.load(sys.argv[3], mmap_mode="r")
        rows = np.sort(rng.choice(full.shape[0], n, replace=False))
        x = np.asarray(full[rows], dtype=np.float32)
    x -= x.mean(1, keepdims=True)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    orders = [("given order", np.arange(n)),
              ("grouped by module", np.argsort(module, kind="stable"))]
    for m in (11, 64):
        s = rng.choice(n, 20000, replace=False)
        centre = x[s[:m]].copy()
        for _ in range(8):
            label = np.argmax(x[s] @ centre.T, 1)
            for j in range(m):
                if (label == j).any():
                    v = x[s][label == j].mean(0)
                    centre[j] = v / np.linalg.norm(v)
        nearest = np.argmax(x @ centre.T, 1)
        orders.append((f"grouped by {m}-means", np.argsort(nearest, kind="stable")))
    for name, order in orders:
        start = time.time()
        per_row = candidates(x[order], tile, kc)
        took = time.time() - start
        print(f"{name:22s} candidates per row {per_row:7.1f}  ({took:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
