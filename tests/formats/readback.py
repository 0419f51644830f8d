#!/usr/bin/env python3
"""Reads knnwb's GML, GraphML and .knn back with networkx and python-igraph.

usage: readback.py WRITE_EXAMPLE_PROGRAM DIRECTORY
Exits 77 (CTest: skipped) when networkx or python-igraph is missing.
"""
import html
import json
import os
import warnings
import subprocess
import sys

try:
    import networkx
    import igraph
except ImportError as missing:
    print(f"skipping: {missing}")
    sys.exit(77)

program, directory = sys.argv[1], sys.argv[2]
subprocess.run([program, directory], check=True)
with open(os.path.join(directory, "expected.json"), encoding="utf-8") as f:
    expected = json.load(f)
labels = expected["labels"]
membership = expected["membership"]
focus = set(expected["focus"])
edges = [(a, b, w) for a, b, w in expected["edges"]]
n = len(labels)
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def same_edges(found, what):
    want = sorted((min(a, b), max(a, b), w) for a, b, w in edges)
    got = sorted((min(a, b), max(a, b), w) for a, b, w in found)
    check(got == want, f"{what}: edges or weights differ:\n got {got[:4]}...\nwant {want[:4]}...")


def check_colours(fills, what):
    by_cluster = {}
    for v in range(n):
        if v in focus:
            check(fills[v] == "#FF0000", f"{what}: focus node {v} fill {fills[v]}")
            continue
        by_cluster.setdefault(membership[v], set()).add(fills[v])
    for cluster, colours in by_cluster.items():
        check(len(colours) == 1, f"{what}: cluster {cluster} has fills {colours}")
    distinct = {next(iter(c)) for c in by_cluster.values()}
    check(len(distinct) == len(by_cluster), f"{what}: clusters share colours {by_cluster}")


def similar(found, what):
    """weight is the similarity 1 / (1 + distance) (README: GML and GraphML)."""
    for _, _, d in found:
        if abs(d["weight"] - 1.0 / (1.0 + d["distance"])) > 1e-15:
            check(False, f"{what}: weight {d['weight']} for distance {d['distance']}")
            return


# networkx, GML: labels (entities decoded), coordinates, colours, weights, clusters.
for name, directed in (("graph.gml", False), ("directed.gml", True)):
    g = networkx.read_gml(os.path.join(directory, name), label="id")
    check(g.is_directed() == directed, f"networkx {name}: directed={g.is_directed()}")
    check(g.number_of_nodes() == n, f"networkx {name}: {g.number_of_nodes()} nodes")
    for v in range(n):
        data = g.nodes[v]
        check(data["label"] == labels[v], f"networkx {name}: label {data['label']!r} != {labels[v]!r}")
        check(data["LabelGraphics"]["text"] == labels[v], f"networkx {name}: LabelGraphics text of {v}")
        check(data["cluster"] == membership[v], f"networkx {name}: cluster of {v}")
        check(data["graphics"]["x"] == expected["x"][v] and data["graphics"]["y"] == expected["y"][v],
              f"networkx {name}: coordinates of {v}")
    # Node sizes come from the layout's density: one size for all, twice that for the focus.
    sizes = {g.nodes[v]["graphics"]["w"] / (2.0 if v in focus else 1.0) for v in range(n)}
    check(len(sizes) == 1 and 0 < min(sizes) <= 30.0, f"networkx {name}: node sizes {sizes}")
    check_colours({v: g.nodes[v]["graphics"]["fill"] for v in range(n)}, f"networkx {name}")
    found = [(a, b, d["distance"]) for a, b, d in g.edges(data=True)]
    same_edges(found, f"networkx {name}")
    similar(g.edges(data=True), f"networkx {name}")
    arrows = {d["graphics"].get("targetArrow") for _, _, d in g.edges(data=True)}
    check(arrows == ({"standard"} if directed else {None}), f"networkx {name}: arrows {arrows}")

# networkx, GraphML.
g = networkx.read_graphml(os.path.join(directory, "graph.graphml"))
check(not g.is_directed(), "networkx graphml: directed")
for v in range(n):
    data = g.nodes[f"n{v}"]
    check(data["label"] == labels[v], f"networkx graphml: label {data['label']!r} != {labels[v]!r}")
    check(data["cluster"] == membership[v], f"networkx graphml: cluster of {v}")
    check(data["x"] == expected["x"][v] and data["y"] == expected["y"][v], f"networkx graphml: xy of {v}")
    check(data["focus"] == (v in focus), f"networkx graphml: focus of {v}")
same_edges([(int(a[1:]), int(b[1:]), d["distance"]) for a, b, d in g.edges(data=True)], "networkx graphml")
similar(g.edges(data=True), "networkx graphml")

# python-igraph, GML and GraphML. GML is ASCII with &-entities (the GML rule, which networkx
# enforces); igraph 0.10.2's GML reader decodes only &amp; &lt; &gt; &quot; and returns numeric
# entities (non-ASCII, control characters) verbatim, so those labels are compared decoded.
# Its GraphML reader gets the UTF-8 labels exactly. It ignores the nested graphics blocks.
warnings.simplefilter("ignore", RuntimeWarning)
for name in ("graph.gml", "graph.graphml"):
    path = os.path.join(directory, name)
    g = igraph.Graph.Read_GML(path) if name.endswith(".gml") else igraph.Graph.Read_GraphML(path)
    check(g.vcount() == n and not g.is_directed(), f"igraph {name}: {g.vcount()} vertices")
    got = [html.unescape(l) for l in g.vs["label"]] if name.endswith(".gml") else g.vs["label"]
    check(got == labels, f"igraph {name}: labels {g.vs['label']}")
    ascii_labels = [v for v in range(n) if labels[v].isascii() and labels[v].isprintable()]
    check(all(g.vs[v]["label"] == labels[v] for v in ascii_labels), f"igraph {name}: ASCII labels")
    check([int(c) for c in g.vs["cluster"]] == membership, f"igraph {name}: clusters")
    if name.endswith(".graphml"):
        check(g.vs["x"] == expected["x"] and g.vs["y"] == expected["y"], f"igraph {name}: coordinates")
    same_edges([(e.source, e.target, e["distance"]) for e in g.es], f"igraph {name}")

# .knn, by hand: exact doubles.
with open(os.path.join(directory, "graph.knn")) as f:
    header = f.readline().split()
    check(header == [str(n), str(len(edges))], f".knn header {header}")
    same_edges([(int(a), int(b), float(w)) for a, b, w in (line.split() for line in f)], ".knn")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"ok: GML, GraphML and .knn read back by networkx {networkx.__version__} "
      f"and python-igraph {igraph.__version__}")
