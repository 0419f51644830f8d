"""Shared fixtures of the knnwb package tests.

KNNWB_PROGRAM names the `knnwb` program to compare with (CTest sets it; otherwise `knnwb` on
PATH). With KNNWB_TESTS_STRICT=1 (as CTest runs them) a missing program or optional module fails
the test instead of skipping it, so CI runs every test.
"""
import importlib
import os
import shutil

import numpy as np
import pytest


def _missing(what):
    if os.environ.get("KNNWB_TESTS_STRICT") == "1":
        pytest.fail(f"{what} is needed (KNNWB_TESTS_STRICT=1)")
    pytest.skip(f"{what} is not available")


def need(module):
    """The module, or a skip (a failure when strict)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        _missing(f"Python module {module}")


@pytest.fixture
def program():
    path = os.environ.get("KNNWB_PROGRAM") or shutil.which("knnwb")
    if not path:
        _missing("the knnwb program (KNNWB_PROGRAM)")
    return path


def tied_rows(n, d, seed, levels=4):
    """n x d float32 rows of small integers: many tied distances and duplicate rows, and no
    constant or zero row (columns 0 and 1 hold 0 and 1), so every metric takes them."""
    rows = np.random.default_rng(seed).integers(0, levels, size=(n, d)).astype(np.float32)
    rows[:, 0], rows[:, 1] = 0, 1
    return rows


def brute_lists(queries, reference, k, exclude_self):
    """Exact euclidean lists in float64 of the float32 values, ties to the lower index."""
    q, r = queries.astype(np.float64), reference.astype(np.float64)
    squared = ((q[:, None, :] - r[None, :, :]) ** 2).sum(axis=2)
    if exclude_self:
        np.fill_diagonal(squared, np.inf)
    order = np.argsort(squared, axis=1, kind="stable")[:, :k]
    return order, np.sqrt(np.take_along_axis(squared, order, axis=1))
