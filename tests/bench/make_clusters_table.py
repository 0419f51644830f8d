#!/usr/bin/env python3
"""Writes ROWS x COLS rows of 50 Gaussian clusters as R's write.table writes a data frame (a header
of quoted column names without the row names' cell, quoted row names, 15 significant digits;
tab-separated for .tsv, comma-separated for .csv) or as a float32 .npy, for timing whole
commands on large text inputs (README, Performance, "Whole commands at scale"). SPREAD (default
3) is the centres' standard deviation, the clusters' own being 1: at 3 they lie far apart; at 2
and below they overlap, as cell types do in single-cell data, and rows visit other clusters.
CLUSTERS (default 50) sets how many clusters share the rows.

    python3 tests/bench/make_clusters_table.py OUT.tsv|OUT.csv|OUT.npy ROWS COLS [SPREAD] [CLUSTERS]
"""
import sys

import numpy as np

out, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spread = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
clusters = int(sys.argv[5]) if len(sys.argv) > 5 else 50
rng = np.random.default_rng(1)
centres = rng.normal(0, spread, (clusters, cols))
cluster = rng.integers(0, clusters, rows)
if out.endswith(".npy"):
    # In blocks of rows (10^8 rows at once would take 120 GB of float64): the generator draws
    # the same values in blocks as at once, so every size keeps the bytes it had.
    with open(out, "wb") as f:
        header = {"descr": "<f4", "fortran_order": False, "shape": (rows, cols)}
        np.lib.format.write_array_header_1_0(f, header)
        for first in range(0, rows, 1 << 20):
            part = cluster[first : first + (1 << 20)]
            f.write((centres[part] + rng.normal(0, 1, (len(part), cols))).astype(np.float32).tobytes())
    sys.exit(0)
values = centres[cluster] + rng.normal(0, 1, (rows, cols))
sep = "," if out.endswith(".csv") else "\t"
with open(out, "w") as f:
    f.write(sep.join('"S%d"' % j for j in range(cols)) + "\n")
    for i in range(rows):
        f.write('"g%d"' % i + sep + sep.join("%.15g" % v for v in values[i]) + "\n")
