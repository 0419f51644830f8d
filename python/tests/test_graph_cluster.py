"""knnwb.graph (python-igraph) and knnwb.cluster, against the lists and `knnwb cluster`."""
import csv
import subprocess

import numpy as np
import pytest

import knnwb
from conftest import need, tied_rows


@pytest.mark.parametrize("mode", ["directed", "union", "mutual"])
def test_graph_edges_follow_the_lists(mode):
    need("igraph")
    rows = tied_rows(83, 6, seed=21)
    indices, distances = knnwb.kneighbors(rows, 4, metric="euclidean")
    g = knnwb.graph(rows, 4, metric="euclidean", mode=mode, names=[f"r{i}" for i in range(83)])
    assert g.vcount() == 83 and g.is_directed() == (mode == "directed")
    assert g.vs["name"][5] == "r5"
    pairs = {}
    for i in range(83):
        for j, d in zip(indices[i], distances[i]):
            pairs.setdefault((i, int(j)), d)
    got = {e.tuple: e["distance"] for e in g.es}
    if mode == "directed":
        want = pairs
        assert [e.tuple for e in g.es] == [(i, int(j)) for i in range(83) for j in indices[i]]
    else:
        undirected = {}
        for (i, j), d in pairs.items():
            both = (j, i) in pairs
            if mode == "union" or both:
                undirected[(min(i, j), max(i, j))] = d
        want = undirected
    assert got == want
    assert np.allclose(g.es["weight"], 1 / (1 + np.array(g.es["distance"])))


def cli_clusters(program, tmp_path, rows, *options):
    matrix = tmp_path / "x.npy"
    np.save(matrix, rows)
    out = tmp_path / "clusters.tsv"
    subprocess.run([program, "cluster", str(matrix), "-q", "-o", str(out), *options], check=True)
    with open(out, newline="") as f:
        return np.array([int(r["cluster"]) for r in csv.DictReader(f, delimiter="\t")])


@pytest.mark.parametrize("method, options, keywords", [
    ("leiden", ["-k", "8"], dict(k=8)),
    ("leiden", ["-k", "8", "--graph", "snn", "--resolution", "0.5"],
     dict(k=8, graph="snn", resolution=0.5)),
    ("louvain", ["-k", "6", "--graph", "mutual", "--similarity", "exp"],
     dict(k=6, graph="mutual", similarity="exp")),
    ("walktrap", ["-k", "5"], dict(k=5)),
    ("components", ["-k", "2"], dict(k=2)),
    ("mst-knn", [], {}),
    ("single-linkage", ["--clusters", "4"], dict(n_clusters=4)),
    ("single-linkage", ["--height", "0.2"], dict(height=0.2)),
])
def test_cluster_equals_the_program(program, tmp_path, method, options, keywords):
    rng = np.random.default_rng(22)
    centres = rng.standard_normal((4, 10)) * 3
    rows = (centres[rng.integers(0, 4, 151)] + rng.standard_normal((151, 10))).astype(np.float32)
    want = cli_clusters(program, tmp_path, rows, "--method", method, *options)
    got = knnwb.cluster(rows, method, threads=2, **keywords)
    assert got.dtype == np.int64 and got.shape == (151,)
    assert np.array_equal(got, want)


def test_cluster_arguments_are_checked():
    rows = tied_rows(30, 4, seed=23)
    with pytest.raises(ValueError, match="unknown method"):
        knnwb.cluster(rows, "kmeans")
    with pytest.raises(ValueError, match="height=H|n_clusters"):
        knnwb.cluster(rows, "single-linkage")
    with pytest.raises(ValueError, match="single-linkage' only"):
        knnwb.cluster(rows, "leiden", n_clusters=3)
    with pytest.raises(ValueError, match="unknown graph"):
        knnwb.cluster(rows, "leiden", graph="knn")
    membership, modularity = knnwb.cluster(rows, "louvain", k=5, return_modularity=True)
    assert membership.min() == 0 and -0.5 <= modularity <= 1


def test_rows_left_out_have_no_edges():
    need("igraph")
    rows = tied_rows(40, 5, seed=24)
    rows[6] = 1.0  # constant: no correlation
    with pytest.warns(knnwb.KnnwbWarning, match="row 6"):
        g = knnwb.graph(rows, 3, drop_degenerate=True)
    assert g.degree(6) == 0 and g.vcount() == 40
