/* What core/partition/ offers the engine: the self lists of a large matrix searched cluster by
 * cluster, skipping the pairs of clusters that bounds prove too far apart. Its own pieces are in
 * partition_internal.h. */
#ifndef KNNWB_PARTITION_H
#define KNNWB_PARTITION_H

#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>
#include "engine/engine.h"

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
 * matrices without absent or degenerate rows, at least 262,144 rows on GPUs (40,000 on the CPU),
 * when a sample of rows says the bounds skip most pairs. The environment overrides the choice:
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

/* The nearest row in another group through cells of the rows (partition_outside.c): the exact
 * MST's question (knnwb_outside_search_run, core/engine/knn_outside.c) on rows of many columns,
 * where a k-d tree (core/tree/) does not help. */
typedef struct KnnwbPartitionOutside KnnwbPartitionOutside;

/* Rows from which the cells are made for the nearest-outside search without being asked to. */
#define KNNWB_OUTSIDE_MIN_ROWS ((size_t)20000)

/**
 * Whether the cells take a nearest-outside run of prepared's rows for n_asking rows: every row
 * kept (n_invalid 0), at least KNNWB_OUTSIDE_MIN_ROWS rows and 512 asking ones (fewer are
 * compared with every row sooner than the cells are made), any metric. The environment's
 * KNNWB_OUTSIDE_CELLS=0 says never, =1 always (and the cells answer every row), =pilot always
 * (the cells answer the pilot's rows and the tile search the others: the tests' way through both).
 * O(1).
 */
gboolean knnwb_partition_outside_applies(const KnnwbPrepared *prepared, size_t n_asking);

/**
 * The cells of prepared's rows (knnwb_prepared_init's, which must outlive them; n_invalid 0):
 * k-means on a sample of the rows in the metric's bound space (spearman's ranks as pearson's,
 * manhattan's rows in euclidean's), then every row to its nearest centroid, on options' threads.
 * NULL without error when they cannot be made (memory short, fewer than two cells): the tile search
 * answers. NULL with error when options' cancel is raised (KNNWB_ERROR_CANCELLED). Time O(s m d)
 * on a sample of s rows and O(n m d) for the rows, m = n / 1024 cells within [16, 256]; memory
 * O(n + m d).
 */
KnnwbPartitionOutside *knnwb_partition_outside_new(const KnnwbPrepared *prepared,
                                                   const KnnwbKnnOptions *options, GError **error);

/**
 * For the rows rows[0, n_rows), the nearest row whose group (group: n ids, checked by the caller)
 * differs, by (the engine's exact double distance, row), into out_index / out_distance (-1 and
 * +inf when every row shares the row's group; available[t]: how many rows lie outside row t's
 * group). A pilot of 128 rows spread over them is answered first, and stopped once it has compared
 * its rows with more than a tenth of the rows outside their groups; the rest only where it was not
 * (else the tile search is faster); after two runs in a row whose pilot said no, none (no pilot
 * either). answered[t] says which were answered; the answers are those of the tile search, bit for
 * bit. FALSE with error: options' cancel raised (KNNWB_ERROR_CANCELLED), memory
 * (KNNWB_ERROR_NO_MEMORY). Time O(n) for the cells' groups, then O(m d) a row for its bounds plus
 * O(d) for each row of the cells it cannot rule out.
 */
gboolean knnwb_partition_outside_run(KnnwbPartitionOutside *outside, const int32_t *group,
                                     const int64_t *rows, size_t n_rows, const size_t *available,
                                     int64_t *out_index, double *out_distance,
                                     unsigned char *answered, GError **error);
void knnwb_partition_outside_free(KnnwbPartitionOutside *outside);

#endif
