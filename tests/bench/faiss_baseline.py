#!/usr/bin/env python3
"""FAISS CPU peer for bench_knn_cpu: exact inner-product kNN (IndexFlatIP) on already normalised rows.

Usage: faiss_baseline.py RAW_FLOAT32_FILE N D K
Prints one line: "faiss_seconds <s>" (search time, index build excluded as it is a copy).
Pearson distance 1 - r equals 1 - inner product of centred, normalised rows, so IndexFlatIP with
k+1 neighbours (self included) is the same problem.
"""
import sys
import time

import faiss
import numpy as np

path, n, d, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = np.fromfile(path, dtype=np.float32).reshape(n, d)
index = faiss.IndexFlatIP(d)
index.add(x)
start = time.perf_counter()
distances, indices = index.search(x, k + 1)
elapsed = time.perf_counter() - start
print(f"faiss_seconds {elapsed:.6f}")
print(f"faiss_threads {faiss.omp_get_max_threads()}")
