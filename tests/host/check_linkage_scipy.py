#!/usr/bin/env python3
"""`knnwb cluster --method single-linkage --linkage X.npy` against scipy.cluster.hierarchy.

Usage: check_linkage_scipy.py KNNWB WORKDIR. Exits 77 (skipped) when scipy is missing."""
import os
import subprocess
import sys

try:
    import numpy as np
    from scipy.cluster.hierarchy import fcluster, linkage
except ImportError:
    print("scipy not installed: skipped")
    sys.exit(77)

knnwb, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(7)
# Odd size, three loose groups; continuous coordinates so no two distances tie.
points = np.concatenate([rng.normal(c, 1.0, size=(n, 4)) for c, n in ((0, 13), (6, 11), (12, 13))])
# knnwb holds the matrix in float32 and computes distances in double from those values.
points = points.astype(np.float32).astype(np.float64)
data = os.path.join(work, "points.tsv")
with open(data, "w") as f:
    f.write("name\t" + "\t".join(f"c{j}" for j in range(4)) + "\n")
    for i, row in enumerate(points):
        f.write(f"p{i}\t" + "\t".join(repr(float(v)) for v in row) + "\n")

for extension in ("npy", "tsv"):
    out = os.path.join(work, f"linkage.{extension}")
    subprocess.run([knnwb, "cluster", data, "--method", "single-linkage", "--metric", "euclidean",
                    "--clusters", "3", "--linkage", out, "-o", os.path.join(work, "c.tsv"), "-q"],
                   check=True)
    ours = np.load(out) if extension == "npy" else np.loadtxt(out, skiprows=1)
    theirs = linkage(points, method="single", metric="euclidean")
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    # Cluster ids n + i, sizes and the merge order must be identical; heights to rounding.
    assert np.array_equal(ours[:, [0, 1, 3]], theirs[:, [0, 1, 3]]), (ours[:5], theirs[:5])
    assert np.allclose(ours[:, 2], theirs[:, 2], rtol=1e-12, atol=0), "heights differ"
    assert np.all(np.diff(ours[:, 2]) >= 0), "heights not sorted"

# Without a cut, as scipy's linkage and R's hclust: the tree alone (--linkage, --newick, no -o).
alone = os.path.join(work, "alone.npy")
newick = os.path.join(work, "alone.nwk")
for stale in (alone, newick):
    if os.path.exists(stale):
        os.remove(stale)
subprocess.run([knnwb, "cluster", data, "--method", "single-linkage", "--metric", "euclidean",
                "--linkage", alone, "--newick", newick, "-q"], check=True)
tree = np.load(alone)
assert np.array_equal(tree[:, [0, 1, 3]], theirs[:, [0, 1, 3]]), "the uncut tree differs"
assert np.allclose(tree[:, 2], theirs[:, 2], rtol=1e-12, atol=0), "uncut heights differ"
with open(newick) as f:
    text = f.read().strip()
assert text.endswith(";") and all(f"p{i}:" in text for i in range(len(points))), text[:80]
# The cluster table still needs a cut, said before any work.
refused = subprocess.run([knnwb, "cluster", data, "--method", "single-linkage", "--linkage", alone,
                          "-o", os.path.join(work, "nocut.tsv"), "-q"], capture_output=True,
                         text=True)
assert refused.returncode == 2 and "need a cut" in refused.stderr, refused.stderr

flat = fcluster(theirs, 3, criterion="maxclust")
table = np.loadtxt(os.path.join(work, "c.tsv"), skiprows=1, usecols=2, dtype=int)
pairs = set(zip(table.tolist(), flat.tolist()))
assert len(pairs) == 3 == len(set(flat.tolist())), pairs
print("linkage and flat clusters match scipy")
