#!/usr/bin/env python3
"""Checks a large run's lists against a float64 brute-force oracle on a sample of rows: for each
sampled row, every other row of the input is scored in float64 (on a GPU with PyTorch where one
is there, else with NumPy), the closest candidates are rescored one by one in float64, and their
k nearest (ties by the lower row number) must be the row's list in the output, in order, with the
output's distances those float64 distances rounded to the output's dtype (one step allowed where
the two float64 sums round apart; for 1 - r, 8 d float64 roundings, since it is computed another
way). Inputs too large for a whole oracle (10^7-10^8 rows) are
checked this way; the unit tests check every row of small inputs.

    python3 tests/bench_gpu/sample_oracle.py X.npy G.npy K [METRIC] [ROWS] [SEED]

X.npy: the float32 rows given to `knnwb knn`; G.npy: its `-o G.npy` output (G.distances.npy
beside it); METRIC: euclidean (default), cosine or pearson; ROWS: rows sampled (1000). Prints one
line of counts; exit status 1 if a row's list differs, or if the float64 products could not
keep enough candidates clearly apart to confirm it (a list of distinct rows, each as near as
the oracle's at its place to within 1e-12, is reported as a near tie, not a failure: float64 sums
in another order may order such rows apart).
"""
import os
import sys

import numpy as np

try:
    import torch

    GPU = torch.cuda.is_available()
except ImportError:  # the checker runs with NumPy alone, more slowly
    GPU = False

CHUNK = int(os.environ.get("ORACLE_CHUNK", 1 << 20))  # input rows scored at once
SPARE = 16  # candidates kept beyond k, rescored exactly


def prepared(rows, metric):
    """float64 rows as the metric compares them: as given, normalised, or centred and normalised
    (a NumPy array, or a PyTorch tensor on the GPU)."""
    tensor = GPU and torch.is_tensor(rows)
    x = rows.double() if tensor else np.asarray(rows, dtype=np.float64)
    if metric == "pearson":
        x = x - x.mean(1)[:, None]
    if metric in ("pearson", "cosine"):
        norm = ((x * x).sum(1) ** 0.5)[:, None]
        x = x / (norm + (norm == 0)) * (norm > 0)
    return x


def distances(q, x, metric):
    """Exact float64 distances from one prepared row q to prepared rows x."""
    if metric == "euclidean":
        diff = x - q
        return np.sqrt((diff * diff).sum(axis=1))
    return 1.0 - x @ q


def candidates(data, sample_rows, k, metric):
    """For each sampled row, the k + SPARE rows of smallest approximate float64 distance (products
    of the prepared rows: |q - c|^2 + |x - c|^2 - 2 (q - c).(x - c) with c the sampled rows' mean,
    or 1 - q.x), itself left out; and a bound on those scores' rounding error."""
    queries = np.asarray(data[sample_rows], dtype=np.float64)
    # euclidean: rows shifted by one vector (distances do not change) so that an offset common
    # to the rows (raw intensities) does not swamp the products' float64 precision
    centre = queries.mean(0) if metric == "euclidean" else np.zeros(queries.shape[1])
    centre_dev = torch.from_numpy(centre).cuda() if GPU else centre

    def rows(block):
        x = prepared(torch.from_numpy(block).cuda() if GPU else block, metric)
        return x - centre_dev if metric == "euclidean" else x

    m, keep = len(sample_rows), k + SPARE
    best_score = np.full((m, keep), np.inf)
    best_index = np.full((m, keep), -1, dtype=np.int64)
    q_dev = rows(queries)
    q_norm = (q_dev * q_dev).sum(1)
    largest = float(q_norm.max())
    for first in range(0, data.shape[0], CHUNK):
        last = min(first + CHUNK, data.shape[0])
        x = rows(np.array(data[first:last]))  # a copy: PyTorch wants writable arrays
        dots = q_dev @ x.T
        if metric == "euclidean":
            x_norm = (x * x).sum(1)
            largest = max(largest, float(x_norm.max()))
            score = q_norm[:, None] + x_norm[None, :] - 2.0 * dots
        else:
            score = 1.0 - dots
        own = [(t, r - first) for t, r in enumerate(sample_rows) if first <= r < last]
        for t, col in own:
            score[t, col] = float("inf")
        take = min(keep, score.shape[1])
        if GPU:
            value, index = torch.topk(score, take, dim=1, largest=False)
            value, index = value.cpu().numpy(), index.cpu().numpy()
        else:
            index = np.argpartition(score, take - 1, axis=1)[:, :take]
            value = np.take_along_axis(score, index, axis=1)
        merged_score = np.concatenate([best_score, value], axis=1)
        merged_index = np.concatenate([best_index, index + first], axis=1)
        order = np.argsort(merged_score, axis=1, kind="stable")[:, :keep]
        best_score = np.take_along_axis(merged_score, order, axis=1)
        best_index = np.take_along_axis(merged_index, order, axis=1)
    # products of d terms and three sums: a few d roundings of the largest squared norm
    error = 4.0 * (data.shape[1] + 3) * np.finfo(np.float64).eps * (2.0 * largest if metric == "euclidean" else 1.0)
    return best_index, best_score, error


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    x_path, g_path, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
    metric = sys.argv[4] if len(sys.argv) > 4 else "euclidean"
    n_sample = int(sys.argv[5]) if len(sys.argv) > 5 else 1000
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    data = np.load(x_path, mmap_mode="r")
    lists = np.load(g_path, mmap_mode="r")
    dists = np.load(g_path[: -len(".npy")] + ".distances.npy", mmap_mode="r")
    n = data.shape[0]
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, size=min(n_sample, n), replace=False))
    index, approx, error = candidates(data, rows, k, metric)
    # euclidean: the same float64 terms, summed in another order, round to the same float32 or
    # one step apart; 1 - r is computed another way (normalised rows), within d roundings of 1
    slack = 0.0 if metric == "euclidean" else 8.0 * data.shape[1] * np.finfo(np.float64).eps
    equal = near = wrong = 0
    for t, row in enumerate(rows):
        found = index[t][index[t] >= 0]
        q = prepared(data[row : row + 1], metric)[0]
        exact = distances(q, prepared(data[found], metric), metric)
        order = np.lexsort((found, exact))
        want, want_d = found[order][:k], exact[order][:k]
        # every row was a candidate, or the last one kept scores clearly beyond the k-th
        kth = want_d[-1] ** 2 if metric == "euclidean" else want_d[-1]
        sure = len(found) == n - 1 or approx[t][len(found) - 1] > kth + 2.0 * error
        got, got_d = np.asarray(lists[row]), np.asarray(dists[row])
        used = got >= 0
        got, got_d = got[used], got_d[used]
        rounded = want_d.astype(got_d.dtype)
        close = len(got) == len(want) and bool(
            np.all(np.abs(rounded - got_d) <= np.spacing(np.abs(rounded)) + slack)
        )
        if np.array_equal(got, want) and close and sure:
            equal += 1
            continue
        # near ties: knnwb's own neighbours, distinct and not the row, each as near as the
        # oracle's at its place to within 1e-12 (float64 sums in another order may swap them)
        if sure and close and len(set(got.tolist())) == len(got) and row not in got:
            mine = distances(q, prepared(data[got], metric), metric)
            if np.all(np.abs(mine - want_d) <= 1e-12 * (1.0 + np.abs(want_d))):
                near += 1
                continue
        wrong += 1
        if wrong <= 5:
            print("row %d: knnwb %s %s; oracle %s %s%s" % (row, got.tolist(), got_d.tolist(),
                  want.tolist(), want_d.tolist(), "" if sure else " (candidates too few)"))
    print(
        "sample oracle: %d rows of %d checked (%s), %d equal, %d near ties, %d differ"
        % (len(rows), n, "GPU float64" if GPU else "CPU float64", equal, near, wrong)
    )
    sys.exit(1 if wrong else 0)


if __name__ == "__main__":
    main()
