#!/usr/bin/env python3
"""MST-kNN of a distance matrix (step mst-knn-distances) against an independent reference of the
R package mstknnclust (its R/main.R), on tie-heavy random integer distance matrices.

The reference follows the package step by step, not knnwb's code: generate.complete.graph (the
pairs a < b in combn order), generate.mst (igraph's Prim on that graph, through python-igraph's C
core as R's igraph), generate.knn (a stable sort of the pairs by distance, each object's first k
pairs where it is object_i, then those where it is object_j, merged by a second stable sort),
k = min(floor(ln n), the smallest k whose kNN graph is connected), at least 1, and mst.knn's
recursion. The package leaves objects that end up alone out of its partition; knnwb reports each
as a cluster of its own, so the partitions compared give each such object its own group.

Usage: check_mstknn_r_rule.py KNNWB SHARED_DATA_DIR WORKDIR. Exits 77 (skipped) without igraph."""
import csv
import itertools
import math
import os
import random
import subprocess
import sys

try:
    import igraph
except ImportError:
    print("python-igraph not installed: skipped")
    sys.exit(77)

knnwb, data_dir, work = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)


def components(size, edges):
    parent = list(range(size))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        parent[find(a)] = find(b)
    groups = {}
    for v in range(size):
        groups.setdefault(find(v), []).append(v)
    return list(groups.values())


def knn_edges(pairs_sorted, size, k):
    """generate.knn for one k: local pairs (a, b, d) already stably sorted by d."""
    as_i = {v: [] for v in range(size)}
    as_j = {v: [] for v in range(size)}
    for a, b, d in pairs_sorted:
        as_i[a].append((a, b, d))
        as_j[b].append((b, a, d))  # columns swapped, as the package does
    edges = []
    for v in range(size):
        both = as_i[v][:k] + as_j[v][:k]  # rbind: the object_i block first
        both = sorted(both, key=lambda row: row[2])  # stable, as R's order()
        edges.extend((row[0], row[1]) for row in both[:k])
    return edges


def intersections(nodes, dist):
    """generate.intersections.mst.knn: the components (global ids) of MST and kNN's intersection."""
    nodes = sorted(nodes)
    size = len(nodes)
    pairs = [(a, b, dist[nodes[a]][nodes[b]]) for a, b in itertools.combinations(range(size), 2)]
    graph = igraph.Graph(n=size, edges=[(a, b) for a, b, _ in pairs])
    tree_ids = graph.spanning_tree(weights=[d for _, _, d in pairs], return_tree=False)
    tree = [pairs[e][:2] for e in tree_ids]
    ordered = sorted(pairs, key=lambda row: row[2])
    connected_k = size
    for k in range(1, size):
        if len(components(size, knn_edges(ordered, size, k))) == 1:
            connected_k = k
            break
    k = max(1, min(math.floor(math.log(size)), connected_k))
    knn = {frozenset(e) for e in knn_edges(ordered, size, k) if e[0] != e[1]}
    kept = [e for e in tree if frozenset(e) in knn]
    return [[nodes[v] for v in part] for part in components(size, kept)]


def r_mstknn(dist):
    """mst.knn: (clusters, objects left alone)."""
    clusters, alone, pending = [], [], [list(range(len(dist)))]
    while pending:
        nodes = pending.pop(0)
        parts = intersections(nodes, dist)
        if len(parts) == 1:
            clusters.append(sorted(nodes))
            continue
        for part in parts:
            (alone if len(part) == 1 else pending).append(part)
    assert clusters, "only singletons: the package joins them all (not covered here)"
    return clusters, sorted(v for part in alone for v in part)


def as_labels(clusters, alone, n):
    label = [None] * n
    for c, members in enumerate(clusters):
        for v in members:
            label[v] = c
    for i, v in enumerate(alone):
        label[v] = len(clusters) + i
    assert None not in label
    return label


def ari(a, b):
    n = len(a)
    table, rows, cols = {}, {}, {}
    for x, y in zip(a, b):
        table[(x, y)] = table.get((x, y), 0) + 1
        rows[x] = rows.get(x, 0) + 1
        cols[y] = cols.get(y, 0) + 1
    c2 = lambda m: m * (m - 1) / 2
    index = sum(c2(m) for m in table.values())
    ra, cb, total = sum(c2(m) for m in rows.values()), sum(c2(m) for m in cols.values()), c2(n)
    expected = ra * cb / total
    top = (ra + cb) / 2 - expected
    return 1.0 if top == 0 else (index - expected) / top


def canonical(labels):
    seen = {}
    return [seen.setdefault(x, len(seen)) for x in labels]


PIPELINE = """<?xml version="1.0" encoding="UTF-8"?>
<pipeline name="mstknn-r-rule" version="1">
  <variable name="in" value="d.csv"/>
  <variable name="out" value="d.labels.tsv"/>
  <step id="clusters" type="mst-knn-distances"><param name="path" value="${in}"/></step>
  <step id="labels" type="write-labels">
    <input name="clusters" step="clusters"/><param name="path" value="${out}"/>
  </step>
</pipeline>
"""
pipeline = os.path.join(work, "mstknn.xml")
with open(pipeline, "w") as f:
    f.write(PIPELINE)


def knnwb_labels(dist, tag):
    path = os.path.join(work, f"{tag}.csv")
    out = os.path.join(work, f"{tag}.labels.tsv")
    n = len(dist)
    with open(path, "w") as f:
        f.write(",".join(['""'] + [f'"o{i}"' for i in range(n)]) + "\n")
        for i in range(n):
            f.write(",".join([f'"o{i}"'] + [repr(float(x)) for x in dist[i]]) + "\n")
    subprocess.run([knnwb, "run", pipeline, "-q", "-s", f"in={path}", "-s", f"out={out}"],
                   check=True)
    with open(out) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [int(r["row"]) for r in rows] == list(range(n))
    return [int(r["cluster"]) for r in rows]


def check(dist, tag, want=None):
    clusters, alone = r_mstknn(dist)
    theirs = as_labels(clusters, alone, len(dist))
    if want is not None:  # the reference itself against a known answer of the package
        assert canonical(theirs) == canonical(want), (tag, theirs, want)
    ours = knnwb_labels(dist, tag)
    score = ari(ours, theirs)
    assert canonical(ours) == canonical(theirs) and score == 1.0, (tag, ours, theirs, score)
    return len(alone)


# The smallest case where the order of tied neighbours matters: the package gives one cluster.
check([[0, 1, 1, 2], [1, 0, 2, 1], [1, 2, 0, 3], [2, 1, 3, 0]], "wraps", [0, 0, 0, 0])
# Duplicated rows 0, 0, 3, 3, 10: {p0,p1}, {p2,p3}, p4 left alone.
line = [0, 0, 3, 3, 10]
check([[abs(a - b) for b in line] for a in line], "duplicated", [0, 0, 1, 1, 2])

# The package's own result on its 84 languages (share/data/dslanguages_R_labels.csv, from R).
with open(os.path.join(data_dir, "dslanguages.csv")) as f:
    rows = list(csv.reader(f))
names = rows[0][1:]
languages = [[float(x) for x in row[1:]] for row in rows[1:]]
with open(os.path.join(data_dir, "dslanguages_R_labels.csv")) as f:
    r_label = {row["name"]: int(row["cl"]) for row in csv.DictReader(f)}
check(languages, "dslanguages", [r_label[name] for name in names])

rng = random.Random(20240229)
alone_total = 0
for trial in range(160):
    n = rng.randint(4, 36)
    top = rng.choice([2, 3, 4, 6])
    dist = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            dist[i][j] = dist[j][i] = float(rng.randint(1, top))
    alone_total += check(dist, f"random{trial}")
assert alone_total > 0, "no object was left alone: the test misses that case"
print(f"MST-kNN matches the package's rule on 163 matrices ({alone_total} objects left alone)")
