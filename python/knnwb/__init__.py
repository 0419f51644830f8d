"""knnwb: exact k-nearest-neighbour lists and graphs (CPU and CUDA) from Python.

The same C library as the ``knnwb`` program: every backend, thread count and memory budget gives
the same lists, byte for byte, as ``knnwb knn``. Functions:

- :func:`kneighbors` -- the neighbour lists of a matrix's rows (or of queries against a reference);
- :func:`graph` -- the kNN graph as a python-igraph ``Graph``;
- :func:`cluster` -- Leiden, Louvain, walktrap, components, MST-kNN or single linkage;
- :class:`KNNTransformer` -- a scikit-learn transformer (``sc.pp.neighbors(adata, transformer=...)``).

Errors raise ``ValueError`` (bad arguments or data), ``MemoryError``, ``RuntimeError`` (devices,
igraph) with the library's message; Ctrl-C stops a long call with ``KeyboardInterrupt``. The
library's warnings (rows left out of the graph, the CPU fallback notice) are issued as
:class:`KnnwbWarning`.
"""

from ._knnwb import version as __version__, gpu_usable
from ._api import KnnwbWarning, METRICS, kneighbors, graph, cluster

__all__ = ["kneighbors", "graph", "cluster", "KNNTransformer", "KnnwbWarning", "METRICS",
           "gpu_usable", "__version__"]


def __getattr__(name):
    # scikit-learn is needed only by the transformer: import it on first use.
    if name == "KNNTransformer":
        from ._sklearn import KNNTransformer
        return KNNTransformer
    raise AttributeError(f"module 'knnwb' has no attribute {name!r}")
