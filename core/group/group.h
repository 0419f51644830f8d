/* What core/group/ (the collectives over a KnnwbKnnGroup that the engine builds on) offers the
 * engine and the split-memory run: merging a shared self job's candidates, the thresholds shared
 * between ranks during a selection, and gathering every rank's lists. The group itself and its
 * public helpers are in <knnwb/knn_group.h>. */
#ifndef KNNWB_GROUP_H
#define KNNWB_GROUP_H

#include <glib.h>
#include <stdint.h>
#include <knnwb/knn.h>
#include <knnwb/knn_group.h>

/**
 * A shared self job's candidates (index, score and, when not NULL, the backend's exact distances:
 * n x kc on every rank, each from its share of the tiles) become the candidates of this rank's
 * rows [row0, row0 + rows), written over those rows of the same arrays: every rank sends each
 * other rank the block of its rows, and each row keeps the kc best by (score, index) (threads:
 * host threads packing and merging). Distances are merged only when every rank had them
 * (*distances_kept). Collective. Memory: about 2 x (ranks - 1) x rows x kc packed entries (8 to 20
 * bytes; one copy when the group shares memory), nothing for the result; time linear in the
 * entries.
 */
gboolean knnwb_knn_group_merge(const KnnwbKnnGroup *group, size_t n, size_t kc, int64_t *index,
                               float *score, double *distance, size_t row0, size_t rows,
                               int threads, gboolean *distances_kept, GError **error);

/**
 * A shared self job's lists refined to k on this rank (for every row of n, its k best of this
 * rank's share of the tiles by (distance, index), -1 and +inf past the valid; the worst score of
 * its kc candidates; how many valid ones it had), gathered as they come into what travels: each
 * other rank's rows' records ready to send, and this rank's rows [row0, row0 + rows) (the others'
 * as knnwb_knn_group_rows cuts n), 16 k + 8 bytes a row (knn_group_best.c).
 * new: NULL when memory is short (not collective; row0 and rows must be this rank's
 * knnwb_knn_group_rows, as every rank sends by that cut). put: rows [first, first + count) of n,
 * laid out as count x k indices and distances, count worst scores and valid counts; from several
 * threads at once for disjoint rows; every row once before merge. merge: the k best of every
 * rank's lists of this rank's rows into out_index/out_distance (rows x k), their valid counts
 * summed into out_valid, and into out_bound the least worst score of the ranks' full lists (+inf:
 * none; NaN: a worst score that overflowed), which certifies the row as knnwb_refine_certify_row's
 * worst; collective; the others' records are freed once sent. Memory: n x (16 k + 8) bytes, and
 * (ranks - 1) x rows records received; time O(rows ranks k log k).
 */
typedef struct KnnwbGroupBestLists KnnwbGroupBestLists;
KnnwbGroupBestLists *knnwb_group_best_lists_new(const KnnwbKnnGroup *group, size_t n, size_t k,
                                                size_t row0, size_t rows);
void knnwb_group_best_lists_put(KnnwbGroupBestLists *lists, size_t first, size_t count,
                                const int64_t *index, const double *distance, const float *worst,
                                const int32_t *valid);
gboolean knnwb_group_best_lists_merge(const KnnwbKnnGroup *group, KnnwbGroupBestLists *lists,
                                      size_t kc, int threads, int64_t *out_index,
                                      double *out_distance, float *out_bound, int32_t *out_valid,
                                      GError **error);
void knnwb_group_best_lists_free(KnnwbGroupBestLists *lists);

/**
 * The thresholds of a shared self job made common between the ranks (knn_group_bounds.c), as
 * KnnwbSelectJob.share_bounds / share_bounds_data / share_bound_rounds. init is collective (the
 * ranks agree on the rounds: none unless every rank wanted them). Where the group has a board
 * (ranks of one host), a round posts this rank's bounds and takes the others' without waiting
 * (O(n x ranks)); else it is a reduction of n int64 (collective, O(n)), for which init allocates
 * n int64: when ready() is FALSE that allocation failed (the caller agrees on that before
 * selecting). finish completes the reductions the backend did not use and gives the board back
 * (collective) and frees; clear does the same for a job that stopped before its end (collective:
 * after an agreed failure).
 */
typedef struct {
  const KnnwbKnnGroup *group;
  size_t n;
  int rounds, done;
  gboolean failed, board;
  int64_t *keys;
  int64_t tightened;
  double seconds;
} KnnwbGroupBounds;
gboolean knnwb_group_bounds_init(KnnwbGroupBounds *bounds, const KnnwbKnnGroup *group, size_t n,
                                 gboolean wanted, GError **error);
gboolean knnwb_group_bounds_ready(const KnnwbGroupBounds *bounds);
int knnwb_group_bounds_share(float *values, size_t n, void *data);
void knnwb_group_bounds_finish(KnnwbGroupBounds *bounds);
void knnwb_group_bounds_clear(KnnwbGroupBounds *bounds);

/**
 * The plan of a shared self job made common between the ranks (knn_group_plan.c), as
 * KnnwbSelectJob.share_plan / share_plan_data: share is one reduction (minimum) of
 * KNNWB_SELECT_SHARE_PLAN_VALUES int64, collective, at most once per job; finish takes part with
 * no plan (-1s) where the backend did not call it (collective: every rank of a shared job calls
 * finish after its select). O(1).
 */
typedef struct {
  const KnnwbKnnGroup *group;
  gboolean done;
} KnnwbGroupPlan;
void knnwb_group_plan_init(KnnwbGroupPlan *plan, const KnnwbKnnGroup *group);
int knnwb_group_plan_share(int64_t *values, size_t n, void *data);
void knnwb_group_plan_finish(KnnwbGroupPlan *plan);

/**
 * group->agree on ok, and on one kind of backend: every rank that chose one (has_backend) passes
 * whether it runs on GPUs (on_gpu). A mix (a rank without a usable GPU among ranks with GPUs: more
 * ranks than GPUs, a node without its driver) fails on every rank with an error that says so:
 * ranks that went on with different backends take different collective paths (kernels' own
 * panels, kc, the certify loop's rounds) and would wait for each other for ever. Collective: every
 * rank calls it, whatever ok. O(1) besides two reductions.
 */
gboolean knnwb_knn_group_agree_backend(const KnnwbKnnGroup *group, gboolean ok,
                                       gboolean has_backend, gboolean on_gpu, GError **error);

/** Every rank's lists of its own rows (first_row = its first) into all n rows, on every rank.
 * Collective. Returns NULL (error set, the same on every rank) on failure. */
KnnwbNeighbors *knnwb_knn_group_gather(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                       size_t n, GError **error);
/** The same for blocks of any sizes: rank r's rows are [first[r], first[r] + count[r]). */
KnnwbNeighbors *knnwb_knn_group_gather_blocks(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                              size_t n, const size_t *first, const size_t *count,
                                              GError **error);

/** Every rank's block's row labels (rows in rank order, as knnwb_knn_group_gather_rows puts the
 * rows) set on whole, on every rank; nothing when no block has labels. A row without a label stays
 * without one. Collective. FALSE with error on every rank alike: memory for the labels
 * (KNNWB_ERROR_NO_MEMORY), the group's transport. O(bytes of every label). */
gboolean knnwb_knn_group_gather_labels(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                       KnnwbMatrix *whole, GError **error);

/** The lists of a whole-input run over the ranks (*lists, not NULL, k the same on every rank: this
 * rank's even share of n rows, knnwb_knn_group_rows) made the lists of this rank's block of the
 * blocks counts gives (rank r's counts[r] rows, in rank order: split ranks' blocks of any sizes),
 * in place of *lists. Nothing when the blocks are the even shares. Collective (every rank, whatever
 * the blocks: the counts are the same everywhere). FALSE with *lists freed and error set on every
 * rank alike: allocation, the group's transport. O(rows k) time and memory a rank, three exchanges.
 */
gboolean knnwb_knn_group_recut(const KnnwbKnnGroup *group, const int64_t *counts, size_t n,
                               KnnwbNeighbors **lists, GError **error);

#endif
