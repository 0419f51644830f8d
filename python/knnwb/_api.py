"""kneighbors, graph and cluster: user input checked and made float32 rows, then the C library."""

import sys

import numpy as np

from . import _knnwb

#: The metrics knnwb computes (distance = 1 - r for the correlations, 1 - cos for cosine).
METRICS = ("pearson", "abs-pearson", "spearman", "euclidean", "manhattan", "cosine")

# scikit-learn / SciPy names of the same distances, accepted too.
_ALIASES = {"correlation": "pearson", "cityblock": "manhattan", "l1": "manhattan",
            "l2": "euclidean", "abs_pearson": "abs-pearson"}

# A sparse matrix is densified this many bytes of float64 at a time (never whole).
_BLOCK_BYTES = 64 << 20


class KnnwbWarning(UserWarning):
    """A warning of the knnwb library (for example rows left out of the graph)."""


def _metric(metric):
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a name such as 'pearson', not {type(metric).__name__}")
    return _ALIASES.get(metric, metric)


def _is_sparse(x):
    try:
        import scipy.sparse
    except ImportError:
        return False
    return scipy.sparse.issparse(x)


def _rows(x, what="X"):
    """x as a C-contiguous float32 matrix: the array itself when it already is one (no copy); a
    sparse matrix is filled in by blocks of rows, so no dense float64 copy of it is ever made."""
    if _is_sparse(x):
        if x.ndim != 2:
            raise ValueError(f"{what} must be 2-D (rows x features)")
        x = x.tocsr()
        n, d = x.shape
        rows = np.empty((n, d), dtype=np.float32)
        block = max(1, _BLOCK_BYTES // max(1, 8 * d))
        for start in range(0, n, block):
            rows[start:start + block] = x[start:start + block].toarray()
        return rows
    array = np.asarray(x)
    if array.ndim != 2:
        raise ValueError(f"{what} must be 2-D (rows x features), not {array.ndim}-D")
    if array.dtype.kind not in "fiub":
        raise TypeError(f"{what} must hold real numbers, not {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.float32)


class _TextProgress:
    """progress=True without tqdm: one line on stderr, rewritten."""

    def __init__(self, what):
        self.what = what

    def __call__(self, done, total):
        if total > 0:
            sys.stderr.write(f"\r{self.what}: {100 * done // total:3d}% ({done}/{total} tiles)")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _progress(progress, what):
    """The callable the C side calls with (done, total): the user's, or a bar for progress=True
    (tqdm when installed). Returns (callable or None, object to close or None)."""
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _TextProgress(what), None
    bar = tqdm(desc=what, unit="tile", total=0)

    def update(done, total):
        if bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    return update, bar


def _knn_keywords(metric, backend, screen, threads, memory, gpu_memory, devices,
                  drop_degenerate):
    return dict(metric=_metric(metric), backend=backend, screen=screen, threads=threads,
                memory=memory, gpu_memory=gpu_memory, devices=None if devices is None else [int(d) for d in devices],
                drop_degenerate=bool(drop_degenerate))


def kneighbors(X, k, metric="pearson", backend="auto", devices=None, threads=None, reference=None,
               *, screen="auto", memory=None, gpu_memory=None, drop_degenerate=False,
               progress=None):
    """The k nearest rows of every row of X: ``(indices, distances)``, int64 and float64, n x k.

    Without ``reference``: every row against the other rows of X (itself excluded), the lists
    ``knnwb knn X -k K`` writes. With ``reference=R``: every row of X (the queries) against the
    rows of R (nothing excluded). Lists are sorted by (distance, index): ties go to the lower
    index. The distances are exact (computed in double from the float32 values).

    X, R: any 2-D real array (a C-contiguous float32 array is used as it is, anything else is
    converted to float32 once) or a SciPy sparse matrix (densified block by block into float32).
    metric: one of METRICS (also "correlation" = pearson, "cityblock" = manhattan).
    backend: "auto" (CUDA when built in and a GPU is usable), "cpu" or "cuda".
    devices: GPU numbers (None: every visible GPU). threads: CPU threads (None or 0: all).
    screen: the screening precision ("auto", "fp32", "tf32", "fp16", "bf16"; the lists never
    depend on it). memory: the CPU tile budget in bytes (None: 256 MiB); gpu_memory: the
    per-GPU budget in bytes (None: 90% of free memory).
    drop_degenerate: constant rows (pearson, spearman) or zero rows (cosine) get no neighbours
    (index -1, distance inf) with a KnnwbWarning instead of a ValueError.
    progress: a callable progress(done, total) called on this thread, or True for a bar.

    The GIL is released while the library computes; Ctrl-C raises KeyboardInterrupt.
    """
    data = _rows(X)
    ref = None if reference is None else _rows(reference, "reference")
    callback, bar = _progress(progress, "knn")
    try:
        indices, distances, _ = _knnwb.kneighbors(
            data, int(k), reference=ref, progress=callback,
            **_knn_keywords(metric, backend, screen, threads, memory, gpu_memory, devices,
                            drop_degenerate))
    finally:
        if bar is not None:
            bar.close()
    return indices, distances


def _similarity(distances, similarity):
    if similarity == "inverse":
        return 1.0 / (1.0 + distances)
    if similarity == "exp":
        scale = distances.mean() if distances.size else 0.0
        return np.exp(-distances / (scale if scale > 0 else 1.0))
    if similarity == "unit":
        return np.ones_like(distances)
    raise ValueError(f"unknown similarity '{similarity}' (expected inverse, exp or unit)")


def graph(X, k, metric="pearson", mode="union", backend="auto", devices=None, threads=None, *,
          similarity="inverse", names=None, screen="auto", memory=None, gpu_memory=None,
          drop_degenerate=False, progress=None):
    """The kNN graph of the rows of X as a python-igraph ``Graph`` (python-igraph must be
    installed): one vertex per row, edges as ``knnwb knn -g MODE`` makes them.

    mode: "directed" (k edges per row, in rank order), "union" (i-j when either lists the other)
    or "mutual" (when both do); undirected edges are sorted by their ends. Edge attributes:
    "distance" (the exact distance) and "weight", a similarity for igraph's community methods
    (bigger = closer): "inverse" 1/(1+d) as knnwb's GML and GraphML writers, "exp" exp(-d/mean d)
    or "unit" 1. names: optional vertex names (the "name" attribute), one per row.
    Other arguments as kneighbors.
    """
    import igraph

    indices, distances = kneighbors(X, k, metric=metric, backend=backend, devices=devices,
                                    threads=threads, screen=screen, memory=memory,
                                    gpu_memory=gpu_memory, drop_degenerate=drop_degenerate, progress=progress)
    edges, edge_distances = _knnwb.graph_edges(indices, distances, mode)
    g = igraph.Graph(n=indices.shape[0], edges=edges.tolist(), directed=(mode == "directed"))
    g.es["distance"] = edge_distances.tolist()
    g.es["weight"] = _similarity(edge_distances, similarity).tolist()
    if names is not None:
        names = [str(name) for name in names]
        if len(names) != indices.shape[0]:
            raise ValueError(f"names: {len(names)} names for {indices.shape[0]} rows")
        g.vs["name"] = names
    return g


def cluster(X, method="leiden", k=None, metric="pearson", backend="auto", devices=None,
            threads=None, *, graph="union", snn_weight="rank", similarity="inverse",
            resolution=1.0, objective="modularity", seed=42, steps=4, height=None,
            n_clusters=None, screen="auto", memory=None, gpu_memory=None, drop_degenerate=False,
            progress=None, return_modularity=False):
    """Clusters the rows of X as ``knnwb cluster X --method METHOD`` does: an int64 membership,
    clusters numbered 0, 1, ... in the order of their lowest row.

    method: "leiden", "louvain" (igraph's multilevel), "walktrap" or "components" on the kNN
    graph (k neighbours, default 10; graph "directed", "union", "mutual" or "snn", the SNN graph
    with snn_weight "rank", "number" or "jaccard"; distance graphs weighted by similarity
    "inverse", "exp" or "unit"; resolution, objective "modularity" or "cpm", seed, steps as the
    command's options); "mst-knn" (MST-kNN on the exact minimum spanning tree, k chosen by the
    method; k here is the length of the lists it starts from); "single-linkage" (the exact MST
    cut at distance ``height`` or into ``n_clusters`` clusters). return_modularity: return
    (membership, modularity of the partition on the clustered graph; NaN for the MST methods).
    """
    if k is not None and int(k) < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    if height is not None and not float(height) >= 0:
        raise ValueError(f"height must be a distance >= 0, not {height}")
    data = _rows(X)
    callback, bar = _progress(progress, "knn")
    try:
        membership, modularity = _knnwb.cluster(
            data, method, k=0 if k is None else int(k), progress=callback, graph=graph,
            snn_weight=snn_weight, similarity=similarity, resolution=float(resolution),
            objective=objective, seed=int(seed), steps=int(steps),
            height=-1.0 if height is None else float(height),
            n_clusters=0 if n_clusters is None else int(n_clusters),
            **_knn_keywords(metric, backend, screen, threads, memory, gpu_memory, devices,
                            drop_degenerate))
    finally:
        if bar is not None:
            bar.close()
    return (membership, modularity) if return_modularity else membership
