/* core/tree/: the exact lists of rows of a few columns (spatial coordinates, embeddings, genes of
 * a few samples) through a k-d tree on the CPU, for the engine's self and query searches
 * (core/engine/knn.c) and the exact MST's nearest row outside a group (knn_outside.c). Where rows
 * have few columns the pairs' products are cheap and a tile search's n^2 pairs are the cost; a tree
 * visits about k log n of them a row. The lists are the bytes of every other path: the k nearest by
 * (distance, row), each distance knnwb_distance_exact's double from the rows as stored. */
#ifndef KNNWB_TREE_H
#define KNNWB_TREE_H

#include <glib.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>
#include "engine/engine.h"

/* The most columns the tree search takes on the CPU, and where the run is on GPUs. The leaves a
 * row opens grow fast with its columns: 200,000 rows in 50 overlapping Gaussian clusters, k = 30,
 * two cores, took the tree 1.0 s at 3 columns, 3.0 s at 5 and 9.4 s at 8, the tile search 28-35 s
 * at each (SciPy's cKDTree 1.6, 2.9 and 10.6 s). On a GPU host the tiles' products are fast but
 * rows of a few columns lie close and tie, so the screen keeps many candidates: 1,000,000 rows in
 * the same clusters, k = 30, one H100 against the tree on its host's 16 cores
 * (tests/bench_gpu/lowd_gpu_check.sh): 2 columns over 300 s against 0.44 s, 3 columns 26.9 s
 * against 0.63 s, 4: 10.1 s against 0.93 s, 6: 7.4 s against 2.7 s, 8: 3.7 s against 6.3 s. */
#define KNNWB_TREE_MAX_COLUMNS 8
#define KNNWB_TREE_MAX_COLUMNS_GPU 6
/* Below this many rows the tile search's start is cheap and takes the run (KNNWB_TREE=1 sends
 * any run the tree can take there, for the tests). */
#define KNNWB_TREE_MIN_ROWS ((size_t)20000)
/* A query run takes the tree from this many query rows on (and KNNWB_TREE_MIN_ROWS reference
 * rows): fewer are compared with every reference row faster than the tree is built. */
#define KNNWB_TREE_MIN_QUERIES ((size_t)1024)

/** Whether knnwb_tree_self takes a self run of data with options: any metric (the pearson family,
 * spearman and cosine through their rows as the engine scores them), in one process or over ranks
 * that each hold every row (split ranks, knnwb_knn_self_together, put their blocks together first:
 * see knnwb_tree_applies_shape); rows and columns within the limits above,
 * 1 <= k < rows, and the environment's KNNWB_TREE not 0 (1: at any row count) nor KNNWB_PARTITION
 * on (a partitioned search asked for by name), unless KNNWB_TREE is 1. O(1). */
gboolean knnwb_tree_applies(const KnnwbMatrix *data, const KnnwbKnnOptions *options);
/** The same for a self run of n rows of d columns in all (over the ranks, however they hold
 * them), before the rows are read. O(1). */
gboolean knnwb_tree_applies_shape(size_t n, size_t d, const KnnwbKnnOptions *options);
/** What of knnwb_tree_applies_shape the options and the environment alone say (the metric,
 * KNNWB_TREE, KNNWB_PARTITION): the same on every rank, so that ranks may take a collective step
 * on it. O(1). */
gboolean knnwb_tree_may_apply(const KnnwbKnnOptions *options);

/** Whether knnwb_tree_query takes a query run of query's rows against reference's with options:
 * as knnwb_tree_applies for reference's rows (1 <= k <= its rows, no split ranks), query rows
 * of reference's columns, at least KNNWB_TREE_MIN_QUERIES of them unless KNNWB_TREE is 1. O(1). */
gboolean knnwb_tree_applies_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                  const KnnwbKnnOptions *options);

/**
 * The exact lists of every row of data against the others (a row's own place left out, its
 * copies kept), as knnwb_knn_self's: k slots a row, by (distance, row), n_found = k. Data must
 * hold finite values only: *result stays NULL, and TRUE comes back, when one is not (the tile
 * search then says where). Progress (this process's rows done) and cancel as options say.
 * With a group of ranks that each hold every row (options->group, not group_split): every rank
 * builds the same tree and searches its even share of the rows (knnwb_knn_group_rows), the host's
 * cores shared among its ranks; it keeps that share's lists (group_own_rows) or gathers every
 * row's. Collective then: every rank calls it, and the ranks agree on the outcome, an error on
 * one stopping all with its message. FALSE with error: memory (KNNWB_ERROR_NO_MEMORY), cancelled
 * (KNNWB_ERROR_CANCELLED), the group's transport. Time O(n log n) to build and about
 * O(n k log n d) to search (divided among the ranks) on rows of low intrinsic dimension; memory
 * O(n) besides the lists.
 */
gboolean knnwb_tree_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                         KnnwbNeighbors **result, GError **error);

/**
 * The same for the rows of query against those of reference (knnwb_knn_query's lists): the tree
 * of reference's rows, rows absent as read in reference never a neighbour, those of query without
 * a list; k checked against reference's other rows. With a group that holds every row, each rank
 * searches its even share of the query rows. Errors, collective calls and cost as
 * knnwb_tree_self's, with n reference rows to build and query's rows to search.
 */
gboolean knnwb_tree_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                          const KnnwbKnnOptions *options, KnnwbNeighbors **result, GError **error);

/* The nearest row in another group, through a tree of the rows (knnwb_outside_search_run's
 * question: the exact MST's Borůvka rounds on rows of a few columns). */
typedef struct KnnwbTreeOutside KnnwbTreeOutside;

/** Whether knnwb_tree_outside_new takes n rows of d columns with options: as
 * knnwb_tree_applies_shape for a self run of k = 1 (n >= 2). O(1). */
gboolean knnwb_tree_outside_applies(size_t n, size_t d, const KnnwbKnnOptions *options);

/**
 * The tree of prepared's rows (knnwb_prepared_init's; its rows and prepared must outlive the
 * search, and no row may be left out: n_invalid 0), built on options' threads. The answers are
 * knnwb_outside_search_run's: each distance the engine's exact double, ties to the lower row.
 * NULL with error: memory (KNNWB_ERROR_NO_MEMORY), options' cancel raised
 * (KNNWB_ERROR_CANCELLED). Time O(n d log n), memory O(n d).
 */
KnnwbTreeOutside *knnwb_tree_outside_new(const KnnwbPrepared *prepared,
                                         const KnnwbKnnOptions *options, GError **error);

/**
 * For each of rows[0, n_rows), the nearest row whose group (group: n ids, checked by the caller)
 * differs, into out_index (-1 when every row shares its group) and out_distance (+inf then). A
 * node whose rows all lie in the row's group is never opened, so a row deep inside a large group
 * passes over its group's nodes instead of reading their rows. FALSE with error when options'
 * cancel is raised (KNNWB_ERROR_CANCELLED). Time O(n) for the nodes' groups, then about O(log n d)
 * a row on rows of low intrinsic dimension.
 */
gboolean knnwb_tree_outside_run(KnnwbTreeOutside *outside, const int32_t *group,
                                const int64_t *rows, size_t n_rows, int64_t *out_index,
                                double *out_distance, GError **error);
void knnwb_tree_outside_free(KnnwbTreeOutside *outside);

#endif
