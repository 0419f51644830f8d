"""KNNTransformer: knnwb's exact lists as scikit-learn's KNeighborsTransformer gives them."""

import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from . import _api


class KNNTransformer(TransformerMixin, BaseEstimator):
    """A drop-in for ``sklearn.neighbors.KNeighborsTransformer(mode="distance",
    algorithm="brute")`` computed by knnwb: exact lists on the CPU or GPUs, any k, correlation
    metrics, the same lists for every backend and thread count.

    ``fit_transform(X)`` (and ``transform(X)`` on the fitted X itself) returns an n x n CSR
    matrix with n_neighbors + 1 entries per row in scikit-learn's layout: the row itself first
    (an explicit 0 distance), then its n_neighbors nearest other rows in order of (distance,
    index), columns in that order (not sorted), as ``kneighbors_graph`` builds it.
    ``transform(Y)`` on other rows gives each row of Y its n_neighbors + 1 nearest fitted rows.
    With ``mode="connectivity"`` there are n_neighbors entries per row (self included), all 1.
    Rows left without neighbours (``drop_degenerate=True``) have only the self entry.

    It is the ``transformer`` scanpy takes: ``sc.pp.neighbors(adata,
    transformer=knnwb.KNNTransformer(n_neighbors=15))`` (scanpy takes n_neighbors from the
    transformer and counts the cell itself; see docs/python.md).

    Parameters: n_neighbors; metric, a knnwb metric ("euclidean", "pearson" = scikit-learn's
    "correlation", "abs-pearson", "spearman", "manhattan", "cosine"); mode; backend, devices,
    threads, screen, memory, gpu_memory, drop_degenerate and
    progress as :func:`knnwb.kneighbors`.
    """

    def __init__(self, n_neighbors=15, metric="euclidean", mode="distance", backend="auto",
                 devices=None, threads=None, screen="auto", memory=None, gpu_memory=None,
                 drop_degenerate=False, progress=None):
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.mode = mode
        self.backend = backend
        self.devices = devices
        self.threads = threads
        self.screen = screen
        self.memory = memory
        self.gpu_memory = gpu_memory
        self.drop_degenerate = drop_degenerate
        self.progress = progress

    def _search(self, X, k, reference=None):
        return _api.kneighbors(X, k, metric=self.metric, backend=self.backend,
                               devices=self.devices, threads=self.threads, reference=reference,
                               screen=self.screen, memory=self.memory,
                               gpu_memory=self.gpu_memory,
                               drop_degenerate=self.drop_degenerate, progress=self.progress)

    def _check_params(self):
        if self.mode not in ("distance", "connectivity"):
            raise ValueError(f"mode must be 'distance' or 'connectivity', not {self.mode!r}")
        if int(self.n_neighbors) < 1:
            raise ValueError(f"n_neighbors must be at least 1, not {self.n_neighbors}")

    def fit(self, X, y=None):
        """Keeps the rows of X (float32) as the reference of later transforms."""
        self._check_params()
        self._fit_X = _api._rows(X)
        self._fit_source = X
        self.n_samples_fit_, self.n_features_in_ = self._fit_X.shape
        self.effective_metric_ = _api._metric(self.metric)
        return self

    def _graph(self, indices, distances, n_columns):
        """The CSR matrix of the lists (rank order kept, missing neighbours left out)."""
        keep = indices >= 0
        counts = keep.sum(axis=1)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        data = distances[keep] if self.mode == "distance" else np.ones(int(counts.sum()))
        return scipy.sparse.csr_matrix((data, indices[keep], indptr),
                                       shape=(indices.shape[0], n_columns))

    def _self_lists(self, k):
        """Each fitted row itself, then its k nearest other rows: n x (k + 1) lists."""
        n = self.n_samples_fit_
        if k > 0:
            indices, distances = self._search(self._fit_X, k)
        else:
            indices, distances = np.empty((n, 0), np.int64), np.empty((n, 0))
        rows = np.arange(n, dtype=np.int64)[:, None]
        return (np.hstack([rows, indices]), np.hstack([np.zeros((n, 1)), distances]))

    def transform(self, X):
        """The sparse neighbour graph of the rows of X against the fitted rows."""
        check_is_fitted(self, "_fit_X")
        self._check_params()
        k = int(self.n_neighbors) + (self.mode == "distance")
        if X is self._fit_source:
            indices, distances = self._self_lists(k - 1)
        else:
            indices, distances = self._search(X, k, reference=self._fit_X)
        return self._graph(indices, distances, self.n_samples_fit_)

    def fit_transform(self, X, y=None):
        """fit(X) then the graph of X against itself (the row itself first)."""
        return self.fit(X).transform(X)

    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """As scikit-learn's: X=None gives each fitted row's nearest other rows (itself
        excluded), otherwise the nearest fitted rows of each row of X. (distances, indices)."""
        check_is_fitted(self, "_fit_X")
        k = int(self.n_neighbors if n_neighbors is None else n_neighbors)
        if X is None:
            indices, distances = self._search(self._fit_X, k)
        else:
            indices, distances = self._search(X, k, reference=self._fit_X)
        return (distances, indices) if return_distance else indices

    def _more_tags(self):
        return {"preserves_dtype": [np.float64]}
