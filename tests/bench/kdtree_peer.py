#!/usr/bin/env python3
"""The peer of knnwb's tree search, as a user would run it: SciPy's cKDTree on every core over the
rows of an NPY (spatial coordinates, embeddings), each row's k nearest others saved as two NPYs
(indices int64, distances float64), load and save included. Row i's own place is dropped from its
k + 1 found; with copies of a row the self may come later, which this timing ignores.

    python3 tests/bench/kdtree_peer.py X.npy K euclidean|manhattan OUT.npy
"""
import sys

import numpy as np
from scipy.spatial import cKDTree

x = np.load(sys.argv[1])
k = int(sys.argv[2])
p = 1 if sys.argv[3] == "manhattan" else 2
distances, indices = cKDTree(x).query(x, k + 1, p=p, workers=-1)
np.save(sys.argv[4], indices[:, 1:])
np.save(sys.argv[4][:-4] + ".distances.npy", distances[:, 1:])
