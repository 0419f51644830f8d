#!/usr/bin/env python3
"""The single-cell inputs and output against the same values in NumPy.

usage: single_cell.py KNNWB READ_DUMP DIRECTORY

AnnData .h5ad files (written by anndata: dense X of several dtypes, CSR and CSC X, a layer,
obsm['X_pca']) and 10x Genomics directories (written with scipy.io.mmwrite and gzip) are read by
knnwb; the matrix (dumped by READ_DUMP), its labels and obs annotations must equal what anndata
holds, and `knnwb knn` on each must write the same bytes as on the same values saved as .npy.
Malformed files must fail with exit 1 and `path: what is wrong`. The .h5ad output must open in
anndata with scanpy's neighbors layout and UMAP connectivities equal to a NumPy transcription of
umap-learn's fuzzy_simplicial_set.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
try:
    import anndata  # noqa: E402
    import h5py  # noqa: E402
except ImportError as missing:  # a GPU machine set up by hand; CI installs both
    print(f"skipped: {missing}")
    sys.exit(77)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scipy.io  # noqa: E402
import scipy.sparse as sp  # noqa: E402

knnwb, read_dump, directory = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(directory, ignore_errors=True)
os.makedirs(directory)
environment = dict(os.environ, LANG="C", LC_ALL="C")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def path(name):
    return os.path.join(directory, name)


def run(*arguments):
    return subprocess.run([knnwb, *arguments], capture_output=True, text=True, env=environment)


def dump(file, *options):
    result = subprocess.run([read_dump, file, *options], capture_output=True, text=True,
                            env=environment)
    if result.returncode != 0:
        check(False, f"read_dump {file} {options}: {result.stderr.strip()}")
        return None
    return json.loads(result.stdout)


def same_graph(input_path, options, npy, labels_file, what, k=5):
    """knnwb knn on input_path and on the .npy of the same values: identical .knn and .tsv (only
    .knn, which holds no labels, when labels_file is None)."""
    labels = ["--labels", labels_file] if labels_file else []
    for extension in ("knn", "tsv") if labels_file else ("knn",):
        got, want = path(f"got.{extension}"), path(f"want.{extension}")
        a = run("knn", "-q", "-m", "euclidean", "-k", str(k), input_path, *options, "-o", got)
        b = run("knn", "-q", "-m", "euclidean", "-k", str(k), npy, *labels, "-o", want)
        check(a.returncode == 0, f"{what}: knn failed: {a.stderr.strip()}")
        check(b.returncode == 0, f"{what}: knn on npy failed: {b.stderr.strip()}")
        if a.returncode == 0 and b.returncode == 0:
            with open(got, "rb") as f1, open(want, "rb") as f2:
                check(f1.read() == f2.read(), f"{what}: .{extension} differs from the .npy's")


def save_npy(values, labels, stem):
    np.save(path(stem + ".npy"), np.asarray(values, dtype=np.float32))
    with open(path(stem + ".labels.txt"), "w", encoding="utf-8") as f:
        f.write("".join(label + "\n" for label in labels))
    return path(stem + ".npy"), path(stem + ".labels.txt")


def check_matrix(got, values, row_labels, col_labels, what):
    if got is None:
        return
    values = np.asarray(values, dtype=np.float32)
    check((got["rows"], got["cols"]) == values.shape, f"{what}: shape {got['rows']}x{got['cols']}")
    check(np.array_equal(np.array(got["values"], dtype=np.float32).reshape(values.shape), values),
          f"{what}: values differ")
    check(got["row_labels"] == list(row_labels), f"{what}: row labels {got['row_labels'][:3]}")
    check(got["col_labels"] == list(col_labels), f"{what}: column labels {got['col_labels'][:3]}")


def bad(file, phrase, *options):
    """knnwb knn on a malformed file: exit 1, one message naming the file and what is wrong."""
    result = run("knn", "-q", "-k", "2", file, *options, "-o", path("bad.knn"))
    message = result.stderr.strip()
    check(result.returncode == 1, f"{file}: exit {result.returncode} ({message})")
    check(message.startswith(f"knnwb: {file}:") or message.startswith(f"knnwb: {file}/"),
          f"{file}: message does not start with the file: {message}")
    check(phrase in message, f"{file}: '{phrase}' not in: {message}")
    check(not os.path.exists(path("bad.knn")), f"{file}: an output was left")


# ---- AnnData .h5ad ----
rng = np.random.default_rng(32)
n, m = 37, 11  # odd sizes: no tile or piece divides them
counts = rng.poisson(0.8, size=(n, m)).astype(np.float32)
counts[3] = 0  # an empty cell
cells = [f"cell-{i}" for i in range(n)]
genes = [f"g{j}" for j in range(m)]
obs = pd.DataFrame(
    {"cell_type": pd.Categorical(rng.choice(["T", "B", "NK"], n)),
     "n_counts": counts.sum(1),
     "batch": rng.integers(0, 3, n),
     "donor": [f"d{i % 4}" for i in range(n)],
     "doublet": rng.random(n) > 0.7,
     "score": np.where(np.arange(n) % 5 == 0, np.nan, rng.random(n))},
    index=cells)
adata = anndata.AnnData(X=sp.csr_matrix(counts), obs=obs, var=pd.DataFrame(index=genes))
adata.obsm["X_pca"] = rng.normal(size=(n, 5))
adata.layers["counts"] = counts.astype(np.int32)
variants = {
    "csr32": sp.csr_matrix(counts),
    "csr64": sp.csr_matrix(counts.astype(np.float64)),
    "csc32": sp.csc_matrix(counts),
    "dense32": counts,
    "dense64": counts.astype(np.float64),
    "dense_int": counts.astype(np.int64),
}
npy, labels_file = save_npy(counts, cells, "counts")
for name, x in variants.items():
    variant = adata.copy()
    variant.X = x
    file = path(f"{name}.h5ad")
    variant.write_h5ad(file)
    got = dump(file)
    check_matrix(got, counts, cells, genes, name)
    same_graph(file, [], npy, labels_file, name)
# int64 indptr and indices (scipy's choice for large matrices), written by h5py directly.
with h5py.File(path("csr32.h5ad"), "r") as source, h5py.File(path("csr_i64.h5ad"), "w") as f:
    for key in source:
        source.copy(key, f)
    for key, value in source.attrs.items():
        f.attrs[key] = value
    for part in ("indices", "indptr"):
        data = f["X"][part][()].astype(np.int64)
        del f["X"][part]
        f["X"][part] = data
check_matrix(dump(path("csr_i64.h5ad")), counts, cells, genes, "csr with int64 indices")
# Fixed-length (numpy S) names, as older writers stored them, and a nullable integer column.
shutil.copy(path("csr32.h5ad"), path("fixed.h5ad"))
with h5py.File(path("fixed.h5ad"), "r+") as f:
    del f["obs/_index"]
    f["obs/_index"] = np.array([cell.encode() for cell in cells])
    group = f["obs"].create_group("umis")
    group.attrs["encoding-type"] = "nullable-integer"
    group.attrs["encoding-version"] = "0.1.0"
    group["values"] = np.arange(n) * 10
    group["mask"] = np.arange(n) % 3 == 0
    f["obs"].attrs["column-order"] = np.array(["umis"], dtype=h5py.string_dtype())
got = dump(path("fixed.h5ad"))
check_matrix(got, counts, cells, genes, "fixed-length names")
if got is not None:
    check(got["annotations"].get("umis") == [None if i % 3 == 0 else str(i * 10) for i in range(n)],
          f"nullable integer obs: {got['annotations'].get('umis')}")

got = dump(path("csr32.h5ad"))
if got is not None:
    annotations = got["annotations"]
    check(annotations.get("cell_type") == list(obs["cell_type"].astype(str)), "categorical obs")
    check(annotations.get("batch") == [str(v) for v in obs["batch"]], "integer obs")
    check(annotations.get("donor") == list(obs["donor"]), "string obs")
    check(annotations.get("doublet") == [str(bool(v)) for v in obs["doublet"]], "boolean obs")
    check(annotations.get("n_counts") == [f"{v:g}" for v in obs["n_counts"]], "float32 obs")
    score = annotations.get("score") or [None] * n
    check(all((s is None) == np.isnan(v) for s, v in zip(score, obs["score"])), "NaN obs unknown")
    check(all(s is None or float(s) == v for s, v in zip(score, obs["score"])), "float64 obs")

pca = adata.obsm["X_pca"].astype(np.float32)
pca_npy, _ = save_npy(pca, cells, "pca")
check_matrix(dump(path("csr32.h5ad"), "--use-rep", "X_pca"), pca, cells, [], "obsm X_pca")
same_graph(path("csr32.h5ad"), ["--use-rep", "X_pca"], pca_npy, labels_file, "--use-rep X_pca")
check_matrix(dump(path("csr32.h5ad"), "--layer", "counts"), counts, cells, genes, "layer")
same_graph(path("csr32.h5ad"), ["--layer", "counts"], npy, labels_file, "--layer counts")
# The same through a pipeline's load-matrix step (knnwb classify's and the XML's reader).
a = run("knn", "-q", "-k", "1", path("csr32.h5ad"), "--use-rep", "X_pca", "-o", path("one.knn"))
check(a.returncode == 0, f"k = 1 on obsm: {a.stderr}")

# Missing values: refused by default, rows left without edges with --drop-missing.
with_nan = counts.copy()
with_nan[7, 4] = np.nan
variant = adata.copy()
variant.X = sp.csr_matrix(with_nan)
variant.write_h5ad(path("nan.h5ad"))
bad(path("nan.h5ad"), "row 7, column 4: NaN")
got = dump(path("nan.h5ad"), "--drop-missing")
check(got is not None and got["absent"] == [7], "--drop-missing marks row 7 absent")

# Malformed and foreign files.
with open(path("text.h5ad"), "w") as f:
    f.write("a,b\n1,2\n")
bad(path("text.h5ad"), "not an HDF5 file")
with open(path("csr32.h5ad"), "rb") as f:
    whole = f.read()
with open(path("truncated.h5ad"), "wb") as f:
    f.write(whole[: len(whole) // 2])
bad(path("truncated.h5ad"), "HDF5")
with gzip.open(path("zipped.h5ad.gz"), "wb") as f:
    f.write(whole)
bad(path("zipped.h5ad.gz"), "gzip-compressed HDF5")
bad(path("csr32.h5ad"), "no obsm[X_umap] (obsm: X_pca)", "--use-rep", "X_umap")
bad(path("csr32.h5ad"), "no layers[spliced] (layers: counts)", "--layer", "spliced")
bad(npy, "--use-rep applies to AnnData .h5ad inputs, and this is npy", "--use-rep", "X_pca")


def damaged(name, change):
    file = path(name + ".h5ad")
    shutil.copy(path("csr32.h5ad"), file)
    with h5py.File(file, "r+") as f:
        change(f)
    return file


def replace(f, key, values):
    del f[key]
    f[key] = values


bad(damaged("indices", lambda f: replace(f, "X/indices", f["X/indices"][()] + 40)),
    "X/indices: entry 0 is")
bad(damaged("indptr", lambda f: replace(f, "X/indptr", f["X/indptr"][()][::-1])),
    "X/indptr: entry 0 is")
bad(damaged("short_indptr", lambda f: replace(f, "X/indptr", f["X/indptr"][()][:-3])),
    "indptr has 35 entries")
bad(damaged("codes", lambda f: replace(f, "obs/cell_type/codes",
                                       np.full(n, 9, dtype=np.int8))),
    "obs/cell_type/codes: entry 0 is 9")
bad(damaged("names", lambda f: replace(f, "obs/_index", np.array([b"x"] * 5))),
    "obs/_index has 5 names")
bad(damaged("no_obs", lambda f: f.__delitem__("obs")), "not AnnData: no obs")
bad(damaged("no_x", lambda f: f.__delitem__("X")), "no X (this AnnData has no main matrix)")
bad(damaged("coo", lambda f: f["X"].attrs.__setitem__("encoding-type", "coo_matrix")),
    "encoding 'coo_matrix'")
bad(damaged("x3d", lambda f: replace(f, "obsm/X_pca", np.zeros((n, 2, 2)))),
    "expected a 2-D array of numbers", "--use-rep", "X_pca")
bad(damaged("tenx", lambda f: f.create_group("matrix/barcodes")), "a 10x Genomics HDF5 matrix")

# ---- 10x Genomics Market Exchange ----
def tenx_directory(name, compressed, features_name="features.tsv"):
    folder = path(name)
    os.makedirs(folder)
    opener = gzip.open if compressed else open
    suffix = ".gz" if compressed else ""
    scipy.io.mmwrite(path("matrix.mtx"), sp.coo_matrix(counts.T.astype(np.int64)))
    with open(path("matrix.mtx"), "rb") as f, opener(os.path.join(folder, "matrix.mtx" + suffix),
                                                     "wb") as out:
        out.write(f.read())
    with opener(os.path.join(folder, "barcodes.tsv" + suffix), "wt") as f:
        f.write("".join(cell + "\n" for cell in cells))
    with opener(os.path.join(folder, features_name + suffix), "wt") as f:
        f.write("".join(f"ENSG{j:05d}\t{gene}\tGene Expression\n"
                        for j, gene in enumerate(genes)))
    return folder


v3 = tenx_directory("v3", True)
v2 = tenx_directory("v2", False, "genes.tsv")
for folder in (v3, v2, os.path.join(v3, "matrix.mtx.gz")):
    got = dump(folder)
    check_matrix(got, counts, cells, genes, folder)
    if got is not None:
        check(got["annotations"] == {}, f"{folder}: no row annotations")
    same_graph(folder, [], npy, labels_file, folder)
shutil.copy(os.path.join(v2, "matrix.mtx"), path("bare.mtx"))
got = dump(path("bare.mtx"))
if got is not None:
    check(np.array_equal(np.array(got["values"], dtype=np.float32), counts), "bare .mtx values")
    check(got["row_labels"] == [] and got["col_labels"] == [], "bare .mtx has no labels")
same_graph(path("bare.mtx"), [], npy, None, "bare .mtx")


def tenx_damaged(name, file, text):
    folder = path(name)
    shutil.copytree(v2, folder)
    with open(os.path.join(folder, file), "w") as f:
        f.write(text)
    return folder


with open(os.path.join(v2, "matrix.mtx")) as f:
    mtx_lines = f.read().splitlines(keepends=True)
os.makedirs(path("empty_dir"))
bad(path("empty_dir"), "a directory without matrix.mtx")
bad(tenx_damaged("few_barcodes", "barcodes.tsv", "a\nb\n"), "2 lines for the matrix's 37 barcodes")
bad(tenx_damaged("array", "matrix.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n"),
    "dense arrays, complex and symmetric matrices are not read")
size_line = f"{m} {n} 1\n"
entries = int(mtx_lines[2].split()[2])
bad(tenx_damaged("outside", "matrix.mtx", "".join(mtx_lines[:2]) + size_line + "12 1 5\n"),
    "matrix.mtx:4:1: expected a feature (row) number from 1 to 11")
bad(tenx_damaged("short", "matrix.mtx", "".join(mtx_lines[:-2])), f"of the {entries} entries")
bad(tenx_damaged("huge", "matrix.mtx", "".join(mtx_lines[:2]) + "11 37 99999999999\n"),
    "entries cannot fit in a file of this size")
bad(tenx_damaged("word", "matrix.mtx", "".join(mtx_lines[:2]) + size_line + "1 1 many\n"),
    "expected a number after the feature and barcode")

# Ctrl-C: every reader polls the cancel flag between pieces.
for file in (path("csr32.h5ad"), path("csc32.h5ad"), path("dense32.h5ad"), v3):
    result = subprocess.run([read_dump, file, "--cancelled"], capture_output=True, text=True,
                            env=environment)
    check(result.returncode == 1 and "interrupted while reading" in result.stderr,
          f"{file}: a raised cancel flag stops the read: {result.stderr.strip()}")

# ---- the .h5ad output: scanpy's neighbors layout ----
def umap_connectivities(indices, distances, n_obs):
    """umap-learn's fuzzy_simplicial_set as scanpy calls it (the cell itself first, at distance 0;
    n_neighbors = k + 1; local_connectivity 1; set_op_mix_ratio 1), transcribed into NumPy."""
    k1 = indices.shape[1]
    target = np.log2(k1)
    dists = distances.astype(np.float32)
    mean_all = dists.mean()
    rows, cols, vals = [], [], []
    for i in range(n_obs):
        row = dists[i]
        nonzero = row[row > 0]
        rho = np.float32(nonzero[0] if len(nonzero) else 0)
        lo, hi, mid = 0.0, np.inf, 1.0
        for _ in range(64):
            d = row[1:] - rho
            psum = float(np.sum(np.where(d > 0, np.exp(-(d.astype(np.float64) / mid)), 1.0)))
            if abs(psum - target) < 1e-5:
                break
            if psum > target:
                hi = mid
                mid = (lo + hi) / 2
            else:
                lo = mid
                mid = mid * 2 if hi == np.inf else (lo + hi) / 2
        sigma = np.float32(mid)
        floor = 1e-3 * (row.mean() if rho > 0 else mean_all)
        sigma = max(sigma, np.float32(floor))
        for j in range(k1):
            if indices[i, j] == i:
                continue
            shifted = row[j] - rho
            value = 1.0 if shifted <= 0 or sigma == 0 else np.exp(-(shifted / sigma))
            rows.append(i)
            cols.append(indices[i, j])
            vals.append(np.float32(value))
    a = sp.coo_matrix((np.array(vals, dtype=np.float32), (rows, cols)), shape=(n_obs, n_obs))
    a.eliminate_zeros()
    t = a.transpose()
    return (a + t - a.multiply(t)).tocsr()


k = 14
out = path("graph.h5ad")
result = run("knn", "-q", "-m", "euclidean", "-k", str(k), path("csr32.h5ad"), "--use-rep",
             "X_pca", "-o", out)
check(result.returncode == 0, f".h5ad output: {result.stderr}")
lists = path("lists.npz")
run("knn", "-q", "-m", "euclidean", "-k", str(k), pca_npy, "-o", lists)
if result.returncode == 0:
    graph = anndata.read_h5ad(out)
    arrays = np.load(lists)
    indices, distances = arrays["indices"], arrays["distances"]
    check(list(graph.obs_names) == cells, ".h5ad output: obs_names")
    neighbors = graph.uns["neighbors"]
    check(neighbors["connectivities_key"] == "connectivities"
          and neighbors["distances_key"] == "distances", ".h5ad output: uns keys")
    params = neighbors["params"]
    check(params["n_neighbors"] == k + 1 and params["method"] == "umap"
          and params["metric"] == "euclidean" and params["use_rep"] == "X_pca",
          f".h5ad output: params {dict(params)}")
    want = sp.csr_matrix((distances.ravel(), (np.repeat(np.arange(n), k), indices.ravel())),
                         shape=(n, n))
    got_distances = graph.obsp["distances"]
    check((got_distances != want).nnz == 0, ".h5ad output: distances equal the .npz lists")
    check(got_distances.getnnz(axis=1).tolist() == [k] * n, ".h5ad output: k per row")
    self_first = np.hstack([np.arange(n)[:, None], indices])
    dist_first = np.hstack([np.zeros((n, 1)), distances])
    reference = umap_connectivities(self_first, dist_first, n)
    connectivities = graph.obsp["connectivities"]
    check(connectivities.dtype == np.float32, ".h5ad output: float32 connectivities")
    difference = abs(connectivities - reference)
    check(difference.max() <= 2e-7 and connectivities.nnz == reference.nnz,
          f".h5ad output: UMAP connectivities differ from the reference by {difference.max()}")
    check((connectivities != connectivities.T).nnz == 0, ".h5ad output: symmetric")
    # --into: a copy of the input with the keys added; the input's bytes stay.
    into = path("into.h5ad")
    before = open(path("csr32.h5ad"), "rb").read()
    result = run("knn", "-q", "-m", "euclidean", "-k", str(k), path("csr32.h5ad"), "--use-rep",
                 "X_pca", "--into", path("csr32.h5ad"), "-o", into)
    check(result.returncode == 0, f"--into: {result.stderr}")
    check(open(path("csr32.h5ad"), "rb").read() == before, "--into changed its input")
    if result.returncode == 0:
        copy = anndata.read_h5ad(into)
        check((copy.obsp["connectivities"] != connectivities).nnz == 0, "--into: connectivities")
        check(copy.obs["cell_type"].tolist() == adata.obs["cell_type"].tolist(), "--into: obs")
        check(np.array_equal(copy.obsm["X_pca"], adata.obsm["X_pca"]), "--into: obsm")
    for weights in ("gauss", "jaccard", "similarity"):
        result = run("knn", "-q", "-m", "euclidean", "-k", "5", path("csr32.h5ad"), "--weights",
                     weights, "-o", path(weights + ".h5ad"))
        check(result.returncode == 0, f"--weights {weights}: {result.stderr}")
        if result.returncode == 0:
            w = anndata.read_h5ad(path(weights + ".h5ad")).obsp["connectivities"]
            check((abs(w - w.T) > 1e-7).nnz == 0 and w.max() <= 1 and w.min() >= 0,
                  f"--weights {weights}: symmetric weights in [0, 1]")
            if weights == "jaccard":
                lists5 = path("lists5.npz")
                run("knn", "-q", "-m", "euclidean", "-k", "5", npy, "-o", lists5)
                near = np.load(lists5)["indices"]
                sets = [set(near[i]) | {i} for i in range(n)]
                coo = w.tocoo()
                want_j = [len(sets[a] & sets[b]) / len(sets[a] | sets[b])
                          for a, b in zip(coo.row, coo.col)]
                check(np.allclose(coo.data, want_j, rtol=1e-6, atol=0),
                      "--weights jaccard: shared over all neighbours")
    result = run("knn", "-q", "-k", "3", path("csr32.h5ad"), "--into", path("csr32.h5ad"), "-o",
                 path("csr32.h5ad"))
    check(result.returncode != 0 and "only reads" in result.stderr, "-o equal to --into refused")
    check(open(path("csr32.h5ad"), "rb").read() == before, "-o equal to --into changed it")
    anndata.AnnData(X=np.ones((5, 2), dtype=np.float32)).write_h5ad(path("five.h5ad"))
    result = run("knn", "-q", "-k", "3", "-m", "euclidean", path("v3"), "--into",
                 path("five.h5ad"), "-o", path("other.h5ad"))
    check(result.returncode == 1 and "5 cells, but the graph has 37" in result.stderr,
          f"--into with another cell count refused: {result.stderr}")
    check(not os.path.exists(path("other.h5ad")), "--into refused: no output left")
    result = run("knn", "-q", "-k", "3", "-m", "euclidean", path("nan.h5ad"), "--drop-missing",
                 "-o", path("dropped.h5ad"))
    check(result.returncode == 0, f".h5ad output with a row without edges: {result.stderr}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
