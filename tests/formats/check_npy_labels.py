#!/usr/bin/env python3
"""Row labels travel with NumPy outputs and come back when knnwb reads them.

`knnwb knn -o OUT.npz` stores the rows' labels as a `labels` member (a '<U' array np.load reads
without pickle); `-o OUT.npy` writes them to OUT.labels.txt beside the indices and distances. An
NPY matrix with such a side file (as `knnwb metafeatures -o M.npy` writes) is read with its labels;
a side file of the wrong length is ignored with a warning.

usage: check_npy_labels.py KNNWB_PROGRAM DIRECTORY
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


labels = ["TP53", "β-actin", "gene with spaces", "ID_7", "x"]
values = np.array([[1, 2, 3], [2, 2, 4], [9, 1, 1], [8, 2, 0], [1, 2, 2.5]])
table = os.path.join(directory, "points.tsv")
with open(table, "w", encoding="utf-8") as f:
    f.write("name\ta\tb\tc\n")
    for label, row in zip(labels, values):
        f.write(label + "\t" + "\t".join(repr(float(v)) for v in row) + "\n")


def knn(source, output, *extra):
    path = os.path.join(directory, output)
    for stale in (path, path[:-4] + ".labels.txt" if output.endswith(".npy") else path):
        if os.path.exists(stale):
            os.remove(stale)
    result = subprocess.run([program, "knn", source, "-k", "2", "-m", "euclidean", "-q", "-o", path,
                             *extra], capture_output=True, text=True)
    check(result.returncode == 0, f"knn {output}: {result.stderr}")
    return path, result.stderr


npz, _ = knn(table, "g.npz")
with np.load(npz) as archive:
    check(sorted(archive.files) == ["distances", "indices", "labels"], f".npz {archive.files}")
    check(archive["labels"].tolist() == labels, f".npz labels {archive['labels'].tolist()}")
    indices = archive["indices"]

npy, _ = knn(table, "g.npy")
check(np.array_equal(np.load(npy), indices), ".npy indices")
with open(os.path.join(directory, "g.labels.txt"), encoding="utf-8") as f:
    check(f.read().splitlines() == labels, ".npy labels side file")

# An NPY matrix with its side file, as knnwb writes one: the labels come back.
matrix = os.path.join(directory, "m.npy")
np.save(matrix, values.astype(np.float32))
with open(os.path.join(directory, "m.labels.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(labels) + "\n")
out, _ = knn(matrix, "m.tsv")
with open(out, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
check([r[1] for r in rows[::2]] == labels, f"labels read back: {[r[1] for r in rows[::2]]}")

# A side file of another length is not this array's: a warning, and numbers for labels.
with open(os.path.join(directory, "m.labels.txt"), "w") as f:
    f.write("only\ntwo\n")
out, err = knn(matrix, "m2.tsv")
check("not its rows'" in err, f"no warning for a side file of the wrong length: {err!r}")
with open(out) as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
check(rows[0][1] in ("0", ""), f"a wrong side file named the rows: {rows[0]}")

for failure in failures:
    print(failure)
sys.exit(1 if failures else 0)
