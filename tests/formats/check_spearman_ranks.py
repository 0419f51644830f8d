#!/usr/bin/env python3
"""Spearman ranks come from the values as read (double), not from their float32 roundings.

Each row of the text files holds values near 1000 that differ only beyond float32 precision (the
float32 spacing there is 6.1e-5; the values differ by multiples of 1e-7), so ranking the stored
float32 values would tie most of them. `knnwb knn --metric spearman` must give the lists of a
float64 oracle (ranks of the values as written, Pearson of the ranks), for a TSV, the same file
transposed (-T), a CSV, a GCT and CIBM files (rows and transposed).

With MPIEXEC, the same runs under 2 MPI ranks (split rows; the transposed file is read whole and
cut into shares) must give the single process's bytes.

usage: check_spearman_ranks.py KNNWB_PROGRAM DIRECTORY [MPIEXEC]
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
mpiexec = sys.argv[3] if len(sys.argv) > 3 else None
os.makedirs(directory, exist_ok=True)
rng = np.random.default_rng(2718)
n, d, k = 48, 30, 5
# Distinct doubles within a few float32 steps of 1000: every row a permutation of the same
# ladder, so the double ranks hold no tie and the float32 ranks many.
ladder = 1000.0 + np.arange(d) * 2.1e-5
values = np.array([rng.permutation(ladder) for _ in range(n)])
assert 1 < len(np.unique(values.astype(np.float32))) < d // 2, "the ladder must collapse in float32"


def ranks(rows):
    order = np.argsort(rows, axis=1, kind="stable")
    out = np.empty_like(rows)
    np.put_along_axis(out, order, np.arange(1, rows.shape[1] + 1, dtype=np.float64), axis=1)
    return out  # no ties in the doubles: plain ranks are the average ranks


r = ranks(values)
centred = r - r.mean(axis=1, keepdims=True)
normed = centred / np.sqrt((centred ** 2).sum(axis=1, keepdims=True))
distance = 1.0 - normed @ normed.T
np.fill_diagonal(distance, np.inf)
want = np.sort(distance, axis=1)[:, :k]


def text(rows, delimiter):
    lines = [delimiter.join(["name"] + [f"c{j}" for j in range(rows.shape[1])])]
    for i, row in enumerate(rows):
        lines.append(delimiter.join([f"p{i}"] + [repr(float(v)) for v in row]))
    return "\n".join(lines) + "\n"


def gct(rows):
    lines = ["#1.2", f"{rows.shape[0]}\t{rows.shape[1]}",
             "\t".join(["Name", "Description"] + [f"c{j}" for j in range(rows.shape[1])])]
    for i, row in enumerate(rows):
        lines.append("\t".join([f"p{i}", "na"] + [repr(float(v)) for v in row]))
    return "\n".join(lines) + "\n"


def cibm(rows):
    lines = ["<MicroarrayData>", f"{rows.shape[0]}\t{rows.shape[1]}"]
    for i, row in enumerate(rows):
        lines.append("\t".join([f"p{i}"] + [repr(float(v)) for v in row]))
    return "\n".join(lines + ["<EndOfFile>"]) + "\n"


inputs = {"rows.tsv": (text(values, "\t"), []), "rows.csv": (text(values, ","), []),
          "rows.gct": (gct(values), []), "rows.txt": (cibm(values), ["--format", "cibm"]),
          "columns.tsv": (text(values.T, "\t"), ["-T"]),
          "columns.txt": (cibm(values.T), ["--format", "cibm", "-T"])}
# A feature with a missing value, dropped: the ranks leave it out too.
lines = text(values.T, "\t").splitlines()
lines.insert(4, "\t".join(["gap"] + ["NA"] * n))
inputs["columns-gap.tsv"] = ("\n".join(lines) + "\n", ["-T", "--drop-missing"])
failures = []
for name, (content, extra) in inputs.items():
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(content)
    out = os.path.join(directory, name + ".npz")
    subprocess.run([program, "knn", path, "-k", str(k), "--metric", "spearman", "-q", "-o", out,
                    *extra], check=True)
    lists = np.load(out)
    got_indices, got_distances = lists["indices"], lists["distances"]
    # Every listed distance is the oracle's for that pair, and the lists are the k smallest.
    listed = np.take_along_axis(distance, got_indices, axis=1)
    if not np.allclose(got_distances, listed, rtol=0, atol=1e-12):
        failures.append(f"{name}: listed distances differ from the double oracle by "
                        f"{np.abs(got_distances - listed).max():.3g}")
    if not np.allclose(got_distances, want, rtol=0, atol=1e-12):
        failures.append(f"{name}: the lists are not the oracle's k nearest "
                        f"(largest difference {np.abs(got_distances - want).max():.3g})")

# A pipeline: load-matrix with spearman-ranks, then a spearman kNN graph: the bytes of knnwb knn.
pipeline = os.path.join(directory, "spearman.xml")
with open(pipeline, "w") as f:
    f.write(f"""<?xml version="1.0" encoding="UTF-8"?>
<pipeline name="spearman-ranks" version="1">
  <step id="load" type="load-matrix"><param name="path" value="rows.tsv"/>
    <param name="spearman-ranks" value="true"/></step>
  <step id="knn" type="knn-graph"><input name="data" step="load"/>
    <param name="k" value="{k}"/><param name="metric" value="spearman"/></step>
  <step id="write" type="write-graph"><input name="graph" step="knn"/>
    <param name="path" value="pipeline.knn"/></step>
</pipeline>
""")
subprocess.run([program, "run", pipeline, "-q", "-O", directory], check=True)
subprocess.run([program, "knn", os.path.join(directory, "rows.tsv"), "-k", str(k), "--metric",
                "spearman", "-q", "-o", os.path.join(directory, "command.knn")], check=True)
with open(os.path.join(directory, "pipeline.knn"), "rb") as a, \
        open(os.path.join(directory, "command.knn"), "rb") as b:
    if a.read() != b.read():
        failures.append("the pipeline's spearman graph differs from knnwb knn's")

if mpiexec:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for name in ("rows.tsv", "columns.tsv"):
        path = os.path.join(directory, name)
        extra = inputs[name][1]
        outputs = []
        for ranks in (1, 2):
            out = os.path.join(directory, f"{name}.{ranks}.knn")
            launcher = [mpiexec, "--oversubscribe", "--allow-run-as-root", "--mca", "btl",
                        "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none", "-np",
                        str(ranks)] if ranks > 1 else []
            subprocess.run(launcher + [program, "knn", path, "-k", str(k), "--metric", "spearman",
                                       "-q", "-t", "1", "-o", out, *extra], check=True, env=env)
            with open(out, "rb") as f:
                outputs.append(f.read())
        if outputs[0] != outputs[1]:
            failures.append(f"{name}: 2 MPI ranks differ from one process")

for failure in failures:
    print(failure)
sys.exit(1 if failures else 0)
