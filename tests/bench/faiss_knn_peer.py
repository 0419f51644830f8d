#!/usr/bin/env python3
"""FAISS CPU peer of the whole `knnwb knn X.npy -k K -m euclidean -b cpu -o g.npy` command: loads the
float32 .npy, searches every row's K + 1 nearest (itself included) with the exact IndexFlatL2 on
every core, and saves the neighbours' rows without the row itself as an int64 .npy. Its distances
are float32 sums (ties and near ties may come in another order than knnwb's exact double lists),
so it is a peer for the time only.

Usage: faiss_knn_peer.py X.npy K OUT.npy
Prints one line: "faiss_search_seconds <s>" (the search alone; time the process for the whole).
"""
import sys
import time

import faiss
import numpy as np

path, k, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
x = np.ascontiguousarray(np.load(path), dtype=np.float32)
index = faiss.IndexFlatL2(x.shape[1])
index.add(x)
start = time.perf_counter()
_, indices = index.search(x, k + 1)
elapsed = time.perf_counter() - start
rows = np.arange(x.shape[0])[:, None]
# each row's own entry dropped (where a copy ties with it, the first k others are kept)
order = np.argsort(indices == rows, axis=1, kind="stable")
neighbours = np.take_along_axis(indices, order, axis=1)[:, :k].astype(np.int64)
np.save(out, neighbours)
print(f"faiss_search_seconds {elapsed:.3f}")
