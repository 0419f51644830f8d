#!/usr/bin/env python3
"""`knnwb knn` outputs written straight from the neighbour lists (.npy, .npz, .mtx, .knn, .tsv),
read back with NumPy (and scipy.io.mmread when scipy is installed), against a float64 brute-force
oracle computed here.

usage: readback_lists.py KNNWB_PROGRAM DIRECTORY
Exits 77 (CTest: skipped) when NumPy is missing.
"""
import os
import subprocess
import sys

try:
    import numpy as np
except ImportError as missing:
    print(f"skipping: {missing}")
    sys.exit(77)

program, directory = sys.argv[1], sys.argv[2]
os.makedirs(directory, exist_ok=True)
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


# 4,099 rows: more than one 64 Ki-edge chunk at k = 17, so the chunks' order matters.
rng = np.random.default_rng(13)
n, d, k = 4099, 7, 17
data = rng.standard_normal((n, d)).astype(np.float32)
matrix_path = os.path.join(directory, "points.npy")
np.save(matrix_path, data)
labels_path = os.path.join(directory, "points.labels.txt")

# Oracle: exact Euclidean distances in float64 of the float32 values, self excluded, ties by index.
x = data.astype(np.float64)
squared = np.empty((n, n))
for start in range(0, n, 256):
    block = x[start:start + 256]
    squared[start:start + 256] = ((block[:, None, :] - x[None, :, :]) ** 2).sum(axis=2)
np.fill_diagonal(squared, np.inf)
order = np.argsort(squared, axis=1, kind="stable")[:, :k]  # stable: ties by lower index
want_indices = order.astype(np.int64)
want_distances = np.sqrt(np.take_along_axis(squared, order, axis=1))


def run(output, *extra, threads="3"):
    path = os.path.join(directory, output)
    subprocess.run([program, "knn", matrix_path, "-k", str(k), "--metric", "euclidean", "-q",
                    "-t", threads, "-o", path, *extra], check=True)
    return path


# .npz and .npy: the lists themselves.
npz = np.load(run("g.npz"))
check(sorted(npz.files) == ["distances", "indices"], f".npz arrays {npz.files}")
check(npz["indices"].dtype == np.int64 and npz["indices"].shape == (n, k), ".npz indices shape")
check(npz["distances"].dtype == np.float64, ".npz distances dtype")
check(np.array_equal(npz["indices"], want_indices), ".npz indices differ from the oracle")
check(np.allclose(npz["distances"], want_distances, rtol=1e-12, atol=0), ".npz distances")
indices, distances = npz["indices"], npz["distances"]
run("g.npy")
check(np.array_equal(np.load(os.path.join(directory, "g.npy")), indices), ".npy indices")
check(np.array_equal(np.load(os.path.join(directory, "g.distances.npy")), distances),
      ".npy distances")

# .knn: the same edges, each distance the exact double (shortest round-trip text); the bytes do not
# depend on the thread count.
with open(run("g.knn"), "rb") as f:
    one = f.read()
with open(run("g1.knn", threads="1"), "rb") as f:
    check(f.read() == one, ".knn differs between 1 and 3 threads")
lines = one.decode().splitlines()
check(lines[0] == f"{n} {n * k}", f".knn header {lines[0]}")
rows = [line.split() for line in lines[1:]]
got_from = np.array([int(r[0]) for r in rows]).reshape(n, k)
got_to = np.array([int(r[1]) for r in rows]).reshape(n, k)
got_distance = np.array([float(r[2]) for r in rows]).reshape(n, k)
check(np.array_equal(got_from, np.repeat(np.arange(n), k).reshape(n, k)), ".knn sources")
check(np.array_equal(got_to, indices), ".knn targets")
check(np.array_equal(got_distance, distances), ".knn distances do not round-trip exactly")
shortest = all(len(repr(float(r[2]))) >= len(r[2]) for r in rows[:2000])
check(shortest, ".knn distances are longer than Python's shortest repr")

# .tsv neighbour table: rank order and exact distances.
with open(run("g.tsv")) as f:
    header = f.readline().rstrip("\n").split("\t")
    table = [line.rstrip("\n").split("\t") for line in f]
check(header == ["row", "label", "rank", "neighbor_row", "neighbor", "distance"], f"tsv {header}")
check(np.array_equal(np.array([float(r[5]) for r in table]).reshape(n, k), distances), ".tsv")
check(np.array_equal(np.array([int(r[3]) for r in table]).reshape(n, k), indices), ".tsv rows")


# .mtx: a sparse distance matrix, 1-based; general for the directed lists, symmetric for union.
def read_mtx(path):
    with open(path) as f:
        banner = f.readline().split()
        line = f.readline()
        while line.startswith("%"):
            line = f.readline()
        rows, cols, nnz = map(int, line.split())
        entries = [line.split() for line in f]
    check(len(entries) == nnz, f"{path}: {len(entries)} entries for {nnz}")
    dense = np.full((rows, cols), np.nan)
    for i, j, v in entries:
        dense[int(i) - 1, int(j) - 1] = float(v)
    if banner[4] == "symmetric":
        check(all(int(i) >= int(j) for i, j, _ in entries), f"{path}: upper-triangle entries")
        mask = np.isnan(dense)
        dense[mask] = dense.T[mask]
    return banner, dense


banner, dense = read_mtx(run("g.mtx"))
check(banner[:5] == ["%%MatrixMarket", "matrix", "coordinate", "real", "general"], f"{banner}")
want = np.full((n, n), np.nan)
np.put_along_axis(want, indices, distances, axis=1)
check(np.array_equal(np.isnan(dense), np.isnan(want)) and
      np.array_equal(dense[~np.isnan(dense)], want[~np.isnan(want)]), ".mtx general matrix")
banner, dense = read_mtx(run("u.mtx", "--graph", "union"))
check(banner[4] == "symmetric", f"union .mtx banner {banner}")
union = want.copy()
mask = np.isnan(union)
union[mask] = want.T[mask]
check(np.array_equal(np.isnan(dense), np.isnan(union)) and
      np.array_equal(dense[~np.isnan(dense)], union[~np.isnan(union)]), ".mtx union matrix")
try:
    import scipy.io
    m = scipy.io.mmread(os.path.join(directory, "g.mtx")).tocsr()
    check(m.shape == (n, n) and m.nnz == n * k, f"scipy .mtx {m.shape} {m.nnz}")
    check(np.array_equal(m[np.arange(n)[:, None], indices].toarray(), distances), "scipy .mtx values")
except ImportError:
    print("scipy not installed: .mtx checked by the parser above only")

# Wrong combinations are usage errors and leave nothing behind.
bad = subprocess.run([program, "knn", matrix_path, "-k", "3", "-q", "--graph", "union", "-o",
                      os.path.join(directory, "bad.npz")], capture_output=True, text=True)
check(bad.returncode == 2 and ".npy/.npz hold" in bad.stderr, f"union .npz: {bad.stderr}")
check(not os.path.exists(os.path.join(directory, "bad.npz")), "bad.npz written")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: .npz, .npy, .knn, .tsv and .mtx match the float64 oracle")
