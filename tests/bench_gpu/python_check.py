#!/usr/bin/env python3
"""The Python package's GPU path, checked against its CPU path and the `knnwb` program.

Run by tests/bench_gpu/python_check.sh on a GPU machine (it installs the package first); prints
one PASS/FAIL line a check, timings as INFO lines, and exits 1 when anything failed.

usage: python_check.py PROGRAM

- knnwb.kneighbors(X, k, metric=m, backend="cuda") equals backend="cpu" byte for byte (indices
  and distances) for odd sizes, tied values and every metric; devices=[0]; query mode
  (reference=R); float64 and float32, C and Fortran order, SciPy CSR input;
- each of those GPU calls computed on the GPU: the public API returns no backend name, so the
  check wraps the extension's kneighbors, which returns the library's `backend_used` ("cuda..."),
  and knnwb.gpu_usable() must be true;
- KNNTransformer(backend="cuda") against scikit-learn's KNeighborsTransformer(mode="distance",
  algorithm="brute"): same sparse layout and neighbours, distances to float32 rounding;
- `PROGRAM knn X.npy -k K -m M --backend cuda -o lists.npz` equals kneighbors, every metric;
- 1,000,000 x 50 euclidean k = 30 from Python and from the program (wall times printed, not
  judged; the lists must be equal);
- SIGINT to a child process during a long GPU search raises KeyboardInterrupt within 5 s.

KNNWB_PYCHECK_CPU_ONLY=1 (a machine without a GPU, to try the script): "cuda" becomes "cpu",
the GPU evidence is not asked for, and the large case is 50,000 rows (KNNWB_PYCHECK_LARGE_N sets
it either way).
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import knnwb
from knnwb import _api

CPU_ONLY = os.environ.get("KNNWB_PYCHECK_CPU_ONLY") == "1"
GPU = "cpu" if CPU_ONLY else "cuda"
LARGE_N = int(os.environ.get("KNNWB_PYCHECK_LARGE_N", 50_000 if CPU_ONLY else 1_000_000))
METRICS = ["pearson", "abs-pearson", "spearman", "euclidean", "manhattan", "cosine"]
failed = []
passed = []

# The backend the library reports for each call (the public API drops it).
backends = []
_extension_kneighbors = _api._knnwb.kneighbors


def _recording_kneighbors(*args, **kwargs):
    result = _extension_kneighbors(*args, **kwargs)
    backends.append(result[2])
    return result


_api._knnwb.kneighbors = _recording_kneighbors


def check(ok, what, detail=""):
    (passed if ok else failed).append(what)
    print(f"{'PASS' if ok else 'FAIL'} {what}{': ' + detail if detail else ''}", flush=True)
    return ok


def info(text):
    print(f"INFO {text}", flush=True)


def same(a, b):
    """Byte equality of two (indices, distances) pairs, dtypes and shapes included."""
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
               for x, y in zip(a, b))


def differences(a, b):
    if a[0].shape != b[0].shape:
        return f"shapes {a[0].shape} and {b[0].shape}"
    rows = np.flatnonzero((a[0] != b[0]).any(axis=1) |
                          (a[1].view(np.int64) != b[1].view(np.int64)).any(axis=1))
    if rows.size == 0:
        return "dtypes differ"
    r = rows[0]
    return (f"{rows.size} rows differ, first {r}: {a[0][r][:5]} {a[1][r][:5]} against "
            f"{b[0][r][:5]} {b[1][r][:5]}")


def on_gpu(X, k, metric, **options):
    """kneighbors with the GPU backend: (lists, seconds, backend the library used)."""
    start = time.perf_counter()
    lists = knnwb.kneighbors(X, k, metric=metric, backend=GPU, **options)
    return lists, time.perf_counter() - start, backends[-1]


def used_gpu(backend):
    return CPU_ONLY or backend.startswith("cuda")


def compare(what, want, X, k, metric, **options):
    try:
        got, seconds, backend = on_gpu(X, k, metric, **options)
    except Exception as error:  # a failure of one case must not hide the others
        return check(False, what, f"{type(error).__name__}: {error}")
    check(used_gpu(backend), f"{what} ran on the GPU", f"backend {backend}")
    return check(same(got, want), f"{what} GPU = CPU bytes",
                 f"{seconds:.2f} s" if same(got, want) else differences(got, want))


def tied_rows(n, d, seed, levels=4):
    """Small integers: many tied distances and duplicate rows, no constant or zero row."""
    rows = np.random.default_rng(seed).integers(0, levels, size=(n, d)).astype(np.float32)
    rows[:, 0], rows[:, 1] = 0, 1
    return rows


def self_lists():
    cases = [("20011x37", np.random.default_rng(1).standard_normal((20011, 37)), 15),
             ("65537x50", np.random.default_rng(2).standard_normal((65537, 50)), 10),
             ("3001x295", np.random.default_rng(3).standard_normal((3001, 295)), 30),
             ("20011x37 ties", tied_rows(20011, 37, 4), 15)]
    for name, X, k in cases:
        X = X.astype(np.float32)
        for metric in METRICS:
            start = time.perf_counter()
            want = knnwb.kneighbors(X, k, metric=metric, backend="cpu")
            info(f"{name} {metric} k={k} CPU {time.perf_counter() - start:.2f} s")
            compare(f"{name} {metric} k={k}", want, X, k, metric)


def devices_query_layouts(scipy_sparse):
    rng = np.random.default_rng(5)
    R = rng.standard_normal((20011, 37)).astype(np.float32)
    Q = rng.standard_normal((5003, 37)).astype(np.float32)
    want = knnwb.kneighbors(R, 15, metric="pearson", backend="cpu")
    compare("devices=[0] pearson", want, R, 15, "pearson", devices=[0])
    for metric in METRICS:
        want = knnwb.kneighbors(Q, 12, metric=metric, backend="cpu", reference=R)
        compare(f"query 5003 against 20011 {metric}", want, Q, 12, metric, reference=R)
    for metric in ["pearson", "euclidean", "cosine"]:
        want = knnwb.kneighbors(R, 15, metric=metric, backend="cpu")
        layouts = {"float64 C": R.astype(np.float64),
                   "float32 F": np.asfortranarray(R),
                   "float64 F": np.asfortranarray(R.astype(np.float64))}
        for layout, X in layouts.items():
            compare(f"{layout} {metric}", want, X, 15, metric)
        if scipy_sparse is None:
            continue
        sparse = R.copy()
        sparse[np.random.default_rng(6).random(sparse.shape) < 0.8] = 0
        sparse[:, 0] = 1  # no zero or constant row
        want = knnwb.kneighbors(sparse, 15, metric=metric, backend="cpu")
        compare(f"scipy CSR float32 (20% filled) {metric}", want,
                scipy_sparse.csr_matrix(sparse), 15, metric)
        compare(f"scipy CSR float64 (20% filled) {metric}", want,
                scipy_sparse.csr_matrix(sparse.astype(np.float64)), 15, metric)


def transformer():
    try:
        from sklearn.neighbors import KNeighborsTransformer
    except ImportError:
        info("scikit-learn missing: KNNTransformer not compared")
        return
    X = np.random.default_rng(7).standard_normal((5003, 37)).astype(np.float32).astype(np.float64)
    for metric, theirs in [("euclidean", "euclidean"), ("pearson", "correlation")]:
        what = f"KNNTransformer(backend={GPU!r}) {metric} = scikit-learn brute"
        try:
            want = KNeighborsTransformer(n_neighbors=15, mode="distance", algorithm="brute",
                                         metric=theirs).fit_transform(X)
            count = len(backends)
            got = knnwb.KNNTransformer(n_neighbors=15, metric=metric,
                                       backend=GPU).fit_transform(X)
        except Exception as error:
            check(False, what, f"{type(error).__name__}: {error}")
            continue
        check(len(backends) > count and used_gpu(backends[-1]), f"{what}: ran on the GPU",
              f"backend {backends[-1] if len(backends) > count else 'none'}")
        layout = (got.format == "csr" and got.shape == want.shape and
                  np.array_equal(got.indptr, want.indptr) and
                  np.array_equal(got.indices, want.indices))
        close = layout and np.allclose(got.data, want.data, rtol=2e-6, atol=2e-6)
        check(layout and close, what,
              "same layout and neighbours, distances within 2e-6" if close else
              "layout or neighbours differ" if not layout else
              f"largest distance difference {np.abs(got.data - want.data).max():.3g}")


def program_lists(program, matrix, k, metric, out):
    start = time.perf_counter()
    subprocess.run([program, "knn", matrix, "-k", str(k), "-m", metric, "--backend", GPU, "-q",
                    "-o", out], check=True)
    seconds = time.perf_counter() - start
    with np.load(out) as lists:
        return (lists["indices"], lists["distances"]), seconds


def program_equals(program, work):
    X = np.random.default_rng(8).standard_normal((20011, 37)).astype(np.float32)
    matrix = os.path.join(work, "x.npy")
    np.save(matrix, X)
    for metric in METRICS:
        what = f"program knn --backend {GPU} 20011x37 {metric} = kneighbors"
        try:
            want, _, _ = on_gpu(X, 15, metric)
            got, seconds = program_lists(program, matrix, 15, metric, os.path.join(work, "l.npz"))
        except Exception as error:
            check(False, what, f"{type(error).__name__}: {error}")
            continue
        check(same(got, want), what, f"{seconds:.2f} s" if same(got, want) else
              differences(got, want))


def large(program, work):
    n = LARGE_N
    X = np.random.default_rng(9).standard_normal((n, 50)).astype(np.float32)
    what = f"{n}x50 euclidean k=30"
    matrix = os.path.join(work, "large.npy")
    np.save(matrix, X)
    try:
        lists, seconds, backend = on_gpu(X, 30, "euclidean")
        info(f"{what} from Python (backend {GPU}): {seconds:.2f} s wall")
        check(used_gpu(backend), f"{what} from Python ran on the GPU", f"backend {backend}")
        got, program_seconds = program_lists(program, matrix, 30, "euclidean",
                                             os.path.join(work, "large.npz"))
        info(f"{what} the program (--backend {GPU}, reading .npy and writing .npz, its own "
             f"start and device set-up): {program_seconds:.2f} s wall")
        check(same(got, lists), f"{what}: program = Python bytes")
    except Exception as error:
        check(False, what, f"{type(error).__name__}: {error}")
    return matrix


# The child of the Ctrl-C check: a long GPU search, interrupted by SIGINT from a thread once the
# progress callback has run (the search has started); it prints what happened.
CHILD = r"""
import os, signal, sys, threading, time
import numpy as np
import knnwb
X = np.load(sys.argv[1], mmap_mode="r")
X = np.ascontiguousarray(X[:int(sys.argv[3])])
started, running = threading.Event(), threading.Event()
sent = []
def progress(done, total):
    started.set()
def interrupt():
    started.wait(timeout=3.0)  # the first progress report, or 3 s (CUDA set up by then)
    if running.is_set():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)
running.set()
threading.Thread(target=interrupt, daemon=True).start()
start = time.perf_counter()
try:
    knnwb.kneighbors(X, 300, metric="spearman", backend=sys.argv[2], progress=progress,
                     gpu_memory=2 << 30)
except KeyboardInterrupt:
    print(f"interrupted {time.perf_counter() - sent[0]:.3f} s after SIGINT, "
          f"{sent[0] - start:.2f} s after the start", flush=True)
    sys.exit(0)
except Exception as error:
    running.clear()
    print(f"error: {type(error).__name__}: {error}", flush=True)
    sys.exit(4)
running.clear()
print(f"finished in {time.perf_counter() - start:.2f} s before the signal", flush=True)
try:
    time.sleep(1)  # a signal sent meanwhile lands here
except KeyboardInterrupt:
    pass
sys.exit(3)
"""


def ctrl_c(matrix):
    what = f"Ctrl-C during a GPU kneighbors (backend {GPU})"
    rows = LARGE_N if not CPU_ONLY else min(LARGE_N, 20_000)
    try:
        child = subprocess.run([sys.executable, "-c", CHILD, matrix, GPU, str(rows)],
                               capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return check(False, what, "the child did not end within 60 s")
    said = (child.stdout + child.stderr).strip().splitlines()
    said = said[-1] if said else ""
    if child.returncode == 3:
        return info(f"{what}: not judged, the search {said}")
    ok = child.returncode == 0 and said.startswith("interrupted")
    if ok:
        ok = float(said.split()[1]) < 5.0
    check(ok, what, said if child.returncode in (0, 4) else
          f"exit {child.returncode}: {(child.stdout + child.stderr)[-400:]}")


def main():
    program = sys.argv[1]
    info(f"knnwb {knnwb.__version__} from {os.path.dirname(knnwb.__file__)}; numpy "
         f"{np.__version__}; python {sys.version.split()[0]}")
    with open("/proc/self/maps") as maps:
        libraries = sorted({line.split()[-1] for line in maps if "libknnwb.so" in line})
    info(f"libknnwb loaded: {libraries}")
    if CPU_ONLY:
        info("KNNWB_PYCHECK_CPU_ONLY=1: 'cuda' is 'cpu' here, no GPU evidence asked for")
    else:
        check(knnwb.gpu_usable(), "knnwb.gpu_usable()")
    try:
        import scipy.sparse as scipy_sparse
    except ImportError:
        scipy_sparse = None
        info("SciPy missing: sparse input not checked")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        for step in (self_lists, lambda: devices_query_layouts(scipy_sparse), transformer,
                     lambda: program_equals(program, work)):
            step()
            info(f"{time.perf_counter() - started:.0f} s so far")
        matrix = large(program, work)
        ctrl_c(matrix)
    info(f"checks took {time.perf_counter() - started:.0f} s")
    print(f"{len(passed)} passed, {len(failed)} failed" +
          (": " + "; ".join(failed) if failed else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
