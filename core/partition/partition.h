/* What core/partition/ offers the engine: the self lists of a large matrix searched cluster by
 * cluster, skipping the pairs of clusters that bounds prove too far apart. Its own pieces are in
 * partition_internal.h. */
#ifndef KNNWB_PARTITION_H
#define KNNWB_PARTITION_H

#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>

/**
 * The exact self lists of data (the contract of knnwb_knn_self), searched cluster by cluster
 * when bounds say that is cheaper: the rows are split into clusters (k-means on a sample), each
 * cluster's rows are searched among themselves, then each row only against the other clusters
 * that a triangle-inequality bound cannot rule out (their nearest possible row is not beyond the
 * row's k-th distance so far). Every sub-search is the plain engine on a subset whose rows keep
 * their order, and every pair the bounds skip is farther than the row's k-th in the engine's own
 * double distances (with a margin for their rounding), so the lists are those of the plain
 * search, byte for byte, on every backend.
 *
 * Applies to one process, to ranks that each hold every row (the groups shared out,
 * partition_ranks.c) and to split-memory ranks, which put their blocks together where they may
 * and have room, else keep to them and bring the rows each searches (partition_gather.c,
 * partition_split.c), for the metrics euclidean,
 * cosine, pearson and abs-pearson,
 * matrices without absent or degenerate rows, at least KNNWB_PARTITION_MIN_ROWS rows, when a
 * sample of rows says the bounds skip most pairs. The environment overrides the choice:
 * KNNWB_PARTITION=off never, =on whenever it applies at all (any size, no sample: for tests);
 * KNNWB_PARTITION_ROWS sets the cluster size to aim at (default: the best of a few sizes).
 *
 * Returns TRUE with *result NULL when the path does not apply or gives up (the bounds skip too
 * little after all, memory is short): the caller runs the plain search. FALSE with error: as
 * knnwb_knn_self (the sub-searches' errors, KNNWB_ERROR_CANCELLED).
 * Complexity: O(n m d) for the bounds (m clusters), plus the sub-searches: about n s (1/2 + p) d
 * for clusters of s rows and p other clusters searched per row, instead of n^2 d / 2.
 * Memory: the lists, n ints, and one cluster's (or one cluster's visitors') rows at a time.
 */
gboolean knnwb_partition_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                              KnnwbNeighbors **result, GError **error);

#endif
