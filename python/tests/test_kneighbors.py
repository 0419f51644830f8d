"""knnwb.kneighbors: the lists `knnwb knn` writes, for every input layout, with the library's
errors as Python exceptions, progress callbacks and Ctrl-C."""
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import knnwb
from conftest import brute_lists, need, tied_rows

METRICS = ["pearson", "abs-pearson", "spearman", "euclidean", "manhattan", "cosine"]


def cli_lists(program, tmp_path, rows, k, metric, *extra):
    matrix = tmp_path / "x.npy"
    np.save(matrix, rows)
    out = tmp_path / "lists.npz"
    subprocess.run([program, "knn", str(matrix), "-k", str(k), "-m", metric, "-q", "-o",
                    str(out), *extra], check=True)
    with np.load(out) as lists:
        return lists["indices"], lists["distances"]


@pytest.mark.parametrize("metric", METRICS)
def test_equals_the_program_with_ties(program, tmp_path, metric):
    rows = tied_rows(203, 7, seed=5)
    want_indices, want_distances = cli_lists(program, tmp_path, rows, 11, metric)
    indices, distances = knnwb.kneighbors(rows, 11, metric=metric, threads=2)
    assert indices.dtype == np.int64 and distances.dtype == np.float64
    assert indices.shape == (203, 11)
    assert np.array_equal(indices, want_indices)
    assert np.array_equal(distances, want_distances)  # bit for bit


def test_equals_the_program_float64_input(program, tmp_path):
    # The program reads float64 .npy values as float32, as the module converts them.
    rows = np.random.default_rng(3).standard_normal((131, 9))
    want = cli_lists(program, tmp_path, rows, 6, "pearson")
    got = knnwb.kneighbors(rows, 6)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_float32_rows_are_not_copied():
    rows = tied_rows(50, 4, seed=1)
    assert knnwb._api._rows(rows) is rows
    assert knnwb._api._rows(rows.astype(np.float64)) is not rows


def test_layouts_give_the_same_lists():
    scipy_sparse = need("scipy.sparse")
    rows = tied_rows(97, 13, seed=2)
    rows[rows == 2] = 0  # sparse-looking
    want = knnwb.kneighbors(rows, 5, metric="euclidean")
    for variant in (rows.astype(np.float64), np.asfortranarray(rows), rows.astype(np.int32),
                    rows.astype(">f4"), rows[:, None, :][:, 0, :],
                    scipy_sparse.csr_matrix(rows), scipy_sparse.csc_matrix(rows.astype(np.float64)),
                    scipy_sparse.coo_matrix(rows), rows.tolist()):
        got = knnwb.kneighbors(variant, 5, metric="euclidean")
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_sparse_is_densified_by_blocks(monkeypatch):
    scipy_sparse = need("scipy.sparse")
    rows = tied_rows(61, 5, seed=4)
    monkeypatch.setattr(knnwb._api, "_BLOCK_BYTES", 8 * 5 * 7)  # 7 rows a block
    got = knnwb._api._rows(scipy_sparse.csr_matrix(rows))
    assert got.dtype == np.float32 and np.array_equal(got, rows)


def test_query_mode_against_a_reference():
    rng = np.random.default_rng(8)
    reference = rng.standard_normal((151, 6)).astype(np.float32)
    queries = rng.standard_normal((37, 6)).astype(np.float32)
    indices, distances = knnwb.kneighbors(queries, 9, metric="euclidean", reference=reference)
    want_indices, want_distances = brute_lists(queries, reference, 9, exclude_self=False)
    assert indices.shape == (37, 9)
    assert np.array_equal(indices, want_indices)
    assert np.allclose(distances, want_distances, rtol=1e-12, atol=1e-12)
    # Querying the reference itself: each row first (distance 0), then its self-excluded list.
    own_indices, own_distances = knnwb.kneighbors(reference, 4, metric="euclidean",
                                                  reference=reference)
    self_indices, self_distances = knnwb.kneighbors(reference, 3, metric="euclidean")
    assert np.array_equal(own_indices[:, 0], np.arange(151))
    assert np.array_equal(own_indices[:, 1:], self_indices)
    assert np.array_equal(own_distances[:, 1:], self_distances)


def test_self_lists_equal_a_brute_force_oracle():
    rows = tied_rows(120, 6, seed=9)
    indices, distances = knnwb.kneighbors(rows, 7, metric="euclidean")
    want_indices, want_distances = brute_lists(rows, rows, 7, exclude_self=True)
    assert np.array_equal(indices, want_indices)
    assert np.allclose(distances, want_distances, rtol=1e-12, atol=0)


def test_the_library_errors_are_python_exceptions():
    rows = tied_rows(40, 5, seed=6)
    with pytest.raises(ValueError, match="only 39 other rows"):
        knnwb.kneighbors(rows, 40)
    with pytest.raises(ValueError, match="unknown metric"):
        knnwb.kneighbors(rows, 3, metric="hamming")
    with pytest.raises(ValueError, match="k must be at least 1"):
        knnwb.kneighbors(rows, 0)
    bad = rows.copy()
    bad[7, 2] = np.nan
    with pytest.raises(ValueError, match="row 7"):
        knnwb.kneighbors(bad, 3)
    with pytest.raises(ValueError, match="same number of columns|columns"):
        knnwb.kneighbors(rows, 3, reference=rows[:, :4])
    with pytest.raises(ValueError, match="2-D"):
        knnwb.kneighbors(rows[0], 3)
    with pytest.raises(ValueError, match="memory must be"):
        knnwb.kneighbors(rows, 3, memory=0)
    with pytest.raises(ValueError, match="gpu_memory must be"):
        knnwb.kneighbors(rows, 3, gpu_memory=-5)
    with pytest.raises(ValueError, match="threads must be"):
        knnwb.kneighbors(rows, 3, threads=-1)
    with pytest.raises(ValueError, match="devices"):
        knnwb.kneighbors(rows, 3, devices=[])
    with pytest.raises(ValueError, match="unknown backend|backend"):
        knnwb.kneighbors(rows, 3, backend="tpu")
    if not knnwb.gpu_usable():
        with pytest.raises(RuntimeError, match="no usable GPU"):
            knnwb.kneighbors(rows, 3, backend="cuda")


def test_degenerate_rows_dropped_with_a_warning():
    rows = tied_rows(30, 5, seed=7)
    rows[4] = 2.0  # constant: no correlation
    with pytest.raises(ValueError, match="row 4"):
        knnwb.kneighbors(rows, 3)
    with pytest.warns(knnwb.KnnwbWarning, match="row 4"):
        indices, distances = knnwb.kneighbors(rows, 3, drop_degenerate=True)
    assert np.all(indices[4] == -1) and np.all(np.isinf(distances[4]))
    assert not np.any(indices == 4)


def test_progress_callback_sees_the_tiles():
    rows = np.random.default_rng(1).standard_normal((3001, 8)).astype(np.float32)
    seen = []
    knnwb.kneighbors(rows, 5, progress=lambda done, total: seen.append((done, total)),
                     memory=1 << 20)
    assert seen, "no progress reported"
    done, total = seen[-1]
    assert total > 0 and done == total
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))


def test_progress_callback_exception_stops_the_call():
    rows = np.random.default_rng(2).standard_normal((60000, 64)).astype(np.float32)

    class Stop(Exception):
        pass

    def progress(done, total):
        raise Stop()

    with pytest.raises(Stop) as raised:
        knnwb.kneighbors(rows, 30, progress=progress, threads=2, memory=8 << 20)
    if sys.version_info >= (3, 11):
        assert any("stopped early" in note for note in raised.value.__notes__)
    # The module is usable again afterwards.
    assert knnwb.kneighbors(rows[:50], 3)[0].shape == (50, 3)


def test_ctrl_c_interrupts_a_long_search():
    # A search of minutes; SIGINT arrives once it reports progress, and the call must end with
    # KeyboardInterrupt (the library polls the flag the interpreter's handler sets through us).
    rows = np.random.default_rng(2).standard_normal((60000, 64)).astype(np.float32)
    started = threading.Event()

    def progress(done, total):
        started.set()

    def interrupt():
        started.wait()
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            knnwb.kneighbors(rows, 30, progress=progress, threads=2, memory=8 << 20)
    finally:
        started.set()
        sender.join()
    if sys.version_info >= (3, 11):  # the library returned "cancelled", not the finished lists
        assert any("stopped early" in note for note in raised.value.__notes__)
    assert knnwb.kneighbors(rows[:50], 3)[0].shape == (50, 3)


def test_searches_on_two_threads_give_the_same_lists():
    # The GIL is released during a search, so two Python threads search at once.
    rows = np.random.default_rng(3).standard_normal((4001, 16)).astype(np.float32)
    results = {}

    def search(name):
        results[name] = knnwb.kneighbors(rows, 5, threads=1, memory=1 << 20)

    threads = [threading.Thread(target=search, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert np.array_equal(results["a"][0], results["b"][0])


def test_progress_true_without_tqdm_writes_a_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: the plain line
    rows = np.random.default_rng(5).standard_normal((2001, 8)).astype(np.float32)
    knnwb.kneighbors(rows, 5, progress=True, memory=1 << 20)
    assert "knn: 100%" in capsys.readouterr().err
