"""knnwb.KNNTransformer against scikit-learn's KNeighborsTransformer(mode="distance",
algorithm="brute"): the same sparse layout, neighbours and distances (to float32 rounding)."""
import numpy as np
import pytest

import knnwb
from conftest import need, tied_rows

# knnwb's metric name -> scikit-learn's name of the same distance.
SKLEARN_METRICS = {"euclidean": "euclidean", "manhattan": "manhattan", "cosine": "cosine",
                   "pearson": "correlation"}


def sklearn_transformer(**parameters):
    neighbors = need("sklearn.neighbors")
    return neighbors.KNeighborsTransformer(algorithm="brute", **parameters)


def assert_same_graph(got, want):
    assert got.shape == want.shape and got.format == "csr"
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)  # neighbour order, not sorted columns
    assert np.allclose(got.data, want.data, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("metric", sorted(SKLEARN_METRICS))
def test_fit_transform_equals_sklearn(metric):
    # Continuous values: no tied distances, so the neighbour order is unique.
    rows = np.random.default_rng(11).standard_normal((233, 12)).astype(np.float32)
    x = rows.astype(np.float64)  # the same values for both
    want = sklearn_transformer(n_neighbors=9, mode="distance",
                               metric=SKLEARN_METRICS[metric]).fit_transform(x)
    got = knnwb.KNNTransformer(n_neighbors=9, metric=metric).fit_transform(x)
    assert got.getnnz(axis=1).tolist() == [10] * 233  # the row itself plus n_neighbors
    assert np.array_equal(got.indices.reshape(233, 10)[:, 0], np.arange(233))
    assert_same_graph(got, want)


@pytest.mark.parametrize("metric", ["euclidean", "pearson"])
def test_transform_of_new_rows_equals_sklearn(metric):
    rng = np.random.default_rng(12)
    fit = rng.standard_normal((180, 7)).astype(np.float32).astype(np.float64)
    new = rng.standard_normal((41, 7)).astype(np.float32).astype(np.float64)
    want = sklearn_transformer(n_neighbors=6, metric=SKLEARN_METRICS[metric]).fit(fit)
    got = knnwb.KNNTransformer(n_neighbors=6, metric=metric).fit(fit)
    assert_same_graph(got.transform(new), want.transform(new))
    want_distances, want_indices = want.kneighbors(new)
    got_distances, got_indices = got.kneighbors(new)
    assert np.array_equal(got_indices, want_indices)
    assert np.allclose(got_distances, want_distances, rtol=2e-6, atol=2e-6)
    # kneighbors() without X: each fitted row's neighbours, itself excluded, as scikit-learn.
    want_distances, want_indices = want.kneighbors()
    got_distances, got_indices = got.kneighbors()
    assert np.array_equal(got_indices, want_indices)
    assert np.allclose(got_distances, want_distances, rtol=2e-6, atol=2e-6)


def test_connectivity_mode_equals_sklearn():
    rows = np.random.default_rng(13).standard_normal((90, 5)).astype(np.float32)
    want = sklearn_transformer(n_neighbors=4, mode="connectivity").fit_transform(rows)
    got = knnwb.KNNTransformer(n_neighbors=4, mode="connectivity").fit_transform(rows)
    assert_same_graph(got, want)


def test_self_first_with_duplicate_rows():
    # Exact duplicates: scanpy reads column 0 as the row itself; the transformer keeps it first
    # and the duplicates follow at distance 0 (by index).
    rows = tied_rows(64, 3, seed=14, levels=2)
    graph = knnwb.KNNTransformer(n_neighbors=5, metric="euclidean").fit_transform(rows)
    indices = graph.indices.reshape(64, 6)
    assert np.array_equal(indices[:, 0], np.arange(64))
    assert np.all(graph.data.reshape(64, 6)[:, 0] == 0)
    lists, _ = knnwb.kneighbors(rows, 5, metric="euclidean")
    assert np.array_equal(indices[:, 1:], lists)


def test_sklearn_estimator_protocol():
    need("sklearn")
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline
    t = knnwb.KNNTransformer(n_neighbors=3, metric="correlation", threads=1)
    assert clone(t).get_params() == t.get_params()
    rows = np.random.default_rng(15).standard_normal((40, 6))
    graph = make_pipeline(t).fit_transform(rows)
    want = sklearn_transformer(n_neighbors=3, metric="correlation").fit_transform(rows)
    assert_same_graph(graph, want)
    with pytest.raises(ValueError, match="mode"):
        knnwb.KNNTransformer(mode="weights").fit(rows)


def test_rows_left_out_keep_only_themselves():
    need("sklearn")
    rows = tied_rows(30, 5, seed=16)
    rows[3] = 1.0  # constant: no correlation
    with pytest.warns(knnwb.KnnwbWarning):
        graph = knnwb.KNNTransformer(n_neighbors=4, metric="pearson",
                                     drop_degenerate=True).fit_transform(rows)
    counts = graph.getnnz(axis=1)
    assert counts[3] == 1 and graph[3, 3] == 0 and graph.indices[graph.indptr[3]] == 3
    assert np.all(np.delete(counts, 3) == 5)
