/* The engine's own steps (core/engine/), shared between its files: the metric's exact formulas
 * (metric.c), the certificate of a backend-refined row (refine.c), result allocation
 * (knn_result.c), the search of one mode (knn_rounds.c), exact duplicate rows (duplicates.c) and
 * the search of the distinct rows (knn_distinct.c). What other units use is in engine.h. */
#ifndef KNNWB_ENGINE_INTERNAL_H
#define KNNWB_ENGINE_INTERNAL_H

#include "engine/engine.h"

/** The per-row statistics both the engine and knnwb_distance_exact use, so they agree bit for bit.
 */
void knnwb_row_statistics(KnnwbMetric metric, const float *row, size_t d, double *mean,
                          double *sum_squares);
double knnwb_pair_distance(KnnwbMetric metric, const float *x, const float *y, size_t d,
                           double mean_x, double squares_x, double mean_y, double squares_y);

/**
 * The exact distance up to which other rows can keep query_row from being certified when its k-th
 * neighbour lies at kth: a row's list is certified only when its candidates reach past this (the
 * certificate's error window, twice its bound, refine.c). O(1).
 */
double knnwb_refine_window_limit(const KnnwbPrepared *query, size_t query_row,
                                 const KnnwbPrepared *reference, double kth);

/**
 * The margin planner (margin.c): the candidates per row of a first round under a half-precision
 * screen. The distances of sample rows to every reference row (estimated in float from the rows
 * the screen scores; manhattan keeps kc) count, per sampled row, the rows within its certificate's
 * window (knnwb_refine_window_limit); when more than an eighth of the sample needs more than kc,
 * the first round takes the count that seven eighths of the sample need (rounded up to 8), at most
 * 4 kc (what the certify loop's first re-selection would take), available, and max_kc. Otherwise
 * kc. A larger first round costs its selection once, where rows left uncertified cost a second pass
 * over every reference row each (half the rows of a self job re-selected cost more than the whole
 * first round). The lists are exact either way. n_sample rows spread evenly over query rows [row0,
 * row0 + n_rows); counts in needed (n_sample, may be NULL). Time O(n_sample n_reference d) on
 * threads (the reference rows read once; counts stop past 4 kc + 1), memory O(n_sample kc) per
 * thread. cancel (may be NULL) is polled at every block of 4,096 reference rows: once raised, the
 * planner returns kc (needed all 0), and the caller's next step sees the flag.
 */
size_t knnwb_margin_choose(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                           gboolean self, size_t row0, size_t n_rows, size_t k, size_t kc,
                           size_t available, size_t max_kc, size_t n_sample, int threads,
                           const volatile gint *cancel, size_t *needed);

/* Candidates a row past which a half-precision window is too wide to screen with: KNNWB_MARGIN_WIDE
 * times the screen's kc. */
#define KNNWB_MARGIN_WIDE 16
/**
 * Whether a half-precision (FP16 or TF32) screen of query against reference is too wide for these
 * rows: more than an eighth of KNNWB_MARGIN_SAMPLE sample rows (spread over query's n_rows rows)
 * hold more than KNNWB_MARGIN_WIDE kc rows inside their certificate's window (the margin
 * planner's count, knnwb_margin_choose). Rows far from the origin against the distances between
 * neighbours do (clusters far apart: 200,000 x 50 in clusters 12 standard deviations apart, one
 * H100, re-selected 596,057 rows in FP16 over 27.5 s, against 0.70 s screening in FP32), and
 * re-selection never narrows the window. FALSE for other screens, manhattan, fewer than
 * KNNWB_MARGIN_MIN_ROWS rows, or when cancel is raised. Only the speed depends on it. Time: the
 * planner's, with heaps of KNNWB_MARGIN_WIDE kc + 1 distances.
 */
gboolean knnwb_margin_too_wide(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                               gboolean self, size_t n_rows, size_t k, size_t kc, size_t available,
                               int threads, const volatile gint *cancel);

/**
 * The centroids a GPU's tile loop groups the rows of a self search by (KnnwbSelectJob
 * .order_centroids; row_order.c): *cells (64, KNNWB_ROW_ORDER_CELLS) centroids, cells x d floats in
 * the space of the scored rows, k-means of an evenly spaced sample of the valid rows. Only the
 * speed depends on them. NULL (*cells 0) when there is nothing to group (fewer than 4 valid rows,
 * no columns, KNNWB_ROW_ORDER_CELLS below 2) or memory is short; g_free the result. Time
 * O(s m d) for a sample of s = 8,192 rows, on threads (OpenBLAS); memory O(s d).
 */
float *knnwb_row_order_centroids(const KnnwbPrepared *rows, int threads, size_t *cells);

/**
 * The dot products the margin planner estimates its distances from: the scored query rows
 * rows[0, n_sample) with reference rows [first, first + n), into dots[r * n_sample + s], each the
 * float sum of one pair at a time (eight lanes over whole groups of eight elements, then the rest
 * in order, then the lanes in order) bit for bit, on any CPU. For tests. O(n_sample n d).
 */
void knnwb_margin_score(const KnnwbPrepared *query, const size_t *rows, size_t n_sample,
                        const KnnwbPrepared *reference, size_t first, size_t n, float *dots);

/** knnwb_knn_result_new, or with clear FALSE every index and distance left unset for a caller that
 * writes them all (knn_result.c). Errors: KNNWB_ERROR_NO_MEMORY. O(rows k) when clearing, on every
 * core. */
KnnwbNeighbors *knnwb_knn_result_alloc(size_t first, size_t rows, size_t k, gboolean clear,
                                       GError **error);
/** A knnwb_parallel_for body emptying slots [first, last) of the KnnwbNeighbors user. */
void knnwb_knn_result_clear(size_t first, size_t last, void *user);

/**
 * Whether every list of result keeps the contract every search path must keep: n_found entries,
 * each a row below n_reference (and not the row itself when self), at a number, in strictly
 * increasing (distance, index) order (ties by the lower index, no row twice), then empty slots
 * (-1). The search paths (one process, GPUs, shares of a group, split blocks, clusters) merge
 * lists that must not overlap; this is the last line against one that does, so that a wrong graph
 * is refused instead of written. Errors: KNNWB_ERROR_FAILED naming the lowest such row. O(n k),
 * on threads (<= 0: all cores).
 */
gboolean knnwb_knn_result_check(const KnnwbNeighbors *result, gboolean self, size_t n_reference,
                                int threads, GError **error);

/**
 * The search (knn_rounds.c): select, refine and certify rows [row0, row0 + n_rows) of query into
 * result, then the certify loop (knnwb_certify_run: the uncertified rows re-selected with four
 * times the candidates until all are certified, or compared with every row once that would take a
 * quarter of all rows or the rows are few, knnwb_certify_small); with a group the first round's
 * self tiles are shared (collective), and each rank certifies its own rows alone. Errors: the
 * backend's, KNNWB_ERROR_NO_MEMORY, KNNWB_ERROR_CANCELLED, KNNWB_ERROR_FAILED for a certificate
 * that cannot succeed. Time: the backend's selection plus O(rows kc d) exact distances per round
 * (fewer when the backend computed them); memory: rows x kc candidates in the first round,
 * re-selection batches within options->memory_bytes.
 */
gboolean knnwb_knn_rounds(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                          const char *backend, const KnnwbPrepared *query,
                          const KnnwbPrepared *reference, gboolean self, size_t available,
                          int threads, const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                          gboolean lists_fresh, const double *within, KnnwbNeighbors *result,
                          GError **error);

/**
 * A split-memory self run on the whole rows (knn_together.c): rows of a few columns that the k-d
 * tree takes (knnwb_tree_applies_shape of every rank's rows), or a run on GPUs (or with
 * KNNWB_PARTITION_GATHER_ALWAYS=1) that may put its rows together (options->group_split_gather).
 * Where every rank agrees and has room (knnwb_knn_together_agree), the ranks put their blocks
 * together and run the whole-input search (the tree; the partitioned one where it pays; else the
 * shared tiles), each keeping its block's lists. TRUE with *result NULL on every rank alike: not
 * taken (the CPU, no room, blocks of different widths), the caller goes on; *no_room also when a
 * rank could not allocate the rows after all (the caller then goes on with the split search, as the
 * partition would find no room either). Collective. Errors: the search's, the group's. Time: the
 * transfer of every row (none for an input every rank read whole) and the whole-input search;
 * memory: every row and a whole-input run's.
 */
gboolean knnwb_knn_self_together(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                 KnnwbNeighbors **result, gboolean *no_room, GError **error);

/**
 * The candidates per row of knnwb_knn_rounds' first round (knn_rounds.c): the screen's margin, or
 * under a half-precision screen on at least 65,536 rows what a sample of them needs
 * (knnwb_margin_choose), or what the calling thread's margin memo holds. Ranks sharing a self
 * graph's first round (a group, self) plan each for its own rows and agree on the largest plan
 * within the smallest cap: collective for them (one reduction, two when they plan); a group's
 * query rounds keep the screen's margin. Not with KNNWB_MARGIN_PILOT=0 (comparisons). At most
 * available. Time: O(1) with a memo that holds a value or a screen that keeps its margin, else the
 * planner's.
 */
size_t knnwb_knn_rounds_candidates(const KnnwbKnnOptions *options, const KnnwbPrepared *query,
                                   const KnnwbPrepared *reference, gboolean self, size_t available,
                                   int threads, const KnnwbKnnGroup *group, size_t row0,
                                   size_t n_rows);

/** Rows [row0, row0 + n_rows) of result (lists by (distance, index)) cut to the neighbours at
 * distance <= within[i] (NaN: none cut): -1 and +inf after them, n_found their count. What
 * knnwb_knn_query_within returns whichever candidates past within a backend kept. O(rows k). */
void knnwb_knn_trim_within(KnnwbNeighbors *result, const double *within, size_t row0, size_t n_rows,
                           int threads);

/** Exact duplicate rows of a matrix (duplicates.c). */
typedef struct {
  size_t n_unique; /* distinct rows; n_rows when there is no duplicate (then all else NULL) */
  int64_t *representative; /* n_unique: the first row of each group, increasing */
  int64_t *group_of;       /* n: each row's group */
  int64_t *members;        /* n: rows by (group, row index) */
  size_t *group_start;     /* n_unique + 1: each group's range in members */
} KnnwbDuplicates;

/**
 * Groups the rows of data whose bytes are identical (hashing, then comparing equal hashes): the
 * values, or for metric spearman the ranks a reader kept (knnwb_matrix_row_ranks) when it kept
 * them; an absent row (knnwb_matrix_row_is_absent) only with absent rows. O(n d + n log n) time
 * (0.5 s at 1,533,876 x 295 rows here), O(n) memory. cancel (may be NULL) is polled every 4096 rows
 * and every 4096 steps of a bucket's sort and comparisons (a bucket holds about 512 rows, or every
 * copy of a row), in every thread. Errors: KNNWB_ERROR_NO_MEMORY;
 * KNNWB_ERROR_CANCELLED when cancel was raised. On error duplicates holds nothing (no rows grouped,
 * nothing to free).
 */
gboolean knnwb_duplicates_find(const KnnwbMatrix *data, KnnwbMetric metric, int n_threads,
                               const volatile gint *cancel, KnnwbDuplicates *duplicates,
                               GError **error);
/** What the prepare pass of a self search also does while each row is in cache (one read of the
 * rows for what took three): it checks every row for NaN and infinities, as
 * knnwb_matrix_check_finite_rows does, and leaves such rows unprepared. */
typedef struct {
  /* such rows without an error (an MPI group, whose ranks check their own rows apart and fail
   * together, names the rank that holds the row; the other ranks must not rank or scale its
   * values meanwhile: spearman's sort of NaN is undefined); else the call fails at the first */
  gboolean skip_bad;
  guint64 *hash; /* NULL, or n: each row's knnwb_duplicates_row_hash */
} KnnwbPrepareAlso;

/** knnwb_prepared_init (no like: a self search's rows) doing what also asks in the same pass.
 * Errors: KNNWB_ERROR_NO_MEMORY for the prepared copy, KNNWB_ERROR_CANCELLED, then the finite
 * check's (KNNWB_ERROR_INVALID_DATA, before any degenerate row's), then knnwb_prepared_init's. */
gboolean knnwb_prepared_init_also(KnnwbPrepared *p, const KnnwbMatrix *data, KnnwbMetric metric,
                                  gboolean drop_degenerate, const char *role, int n_threads,
                                  const volatile gint *cancel, const KnnwbPrepareAlso *also,
                                  GError **error);

/** knnwb_duplicates_find with the rows' hashes made already (n of knnwb_duplicates_row_hash, as
 * the prepare pass makes them: one read of the rows fewer), or NULL to make them. */
gboolean knnwb_duplicates_find_hashed(const KnnwbMatrix *data, KnnwbMetric metric,
                                      const guint64 *hashes, int n_threads,
                                      const volatile gint *cancel, KnnwbDuplicates *duplicates,
                                      GError **error);
/** The rows the duplicate search compares for metric: data's values, or the ranks a reader kept
 * (spearman). */
const float *knnwb_duplicates_values(const KnnwbMatrix *data, KnnwbMetric metric);
/** Row i's hash for the duplicate search (values: knnwb_duplicates_values): equal rows, equal
 * hashes; an absent row's differs from a row of zeros. O(d). */
guint64 knnwb_duplicates_row_hash(const KnnwbMatrix *data, const float *values, size_t i);
void knnwb_duplicates_clear(KnnwbDuplicates *duplicates);

/** A prepared copy of rows of from (all per-row arrays gathered, the frame shared). */
gboolean knnwb_prepared_gather(KnnwbPrepared *out, const KnnwbPrepared *from, const int64_t *rows,
                               size_t n_rows, GError **error);

/**
 * The self lists of every row (result: n x k, allocated) from the self lists of the distinct rows
 * (distinct: n_unique x k' with k' = min(k, the valid distinct rows - 1), NULL when k' = 0): each
 * row's neighbours are the other copies of itself and the copies of its distinct neighbours, by
 * (distance, row index). Rows flagged invalid in prepared get none. O(n k log k) typical.
 */
void knnwb_duplicates_expand(const KnnwbDuplicates *duplicates, const KnnwbPrepared *prepared,
                             const KnnwbNeighbors *distinct, int n_threads, KnnwbNeighbors *result);

/**
 * The query lists against a reference with copies (duplicates: the reference's groups) from the
 * lists against its distinct rows (distinct: one list per query row, k' = min(k, the valid
 * distinct rows)): each distinct neighbour stands for its group's rows, all at its distance, and
 * the first k by (distance, row index) are kept (result: same rows, k). O(rows k log k) typical.
 */
void knnwb_duplicates_expand_query(const KnnwbDuplicates *duplicates,
                                   const KnnwbNeighbors *distinct, int n_threads,
                                   KnnwbNeighbors *result);

/**
 * Self lists of query (all n rows, into result) when it has exact duplicate rows (knn_distinct.c):
 * knnwb_knn_rounds on the distinct rows, then knnwb_duplicates_expand. Collective with a group.
 * Errors: those of knnwb_knn_rounds and of the group's gather. Time: the search of the distinct
 * rows plus O(n k log k).
 */
gboolean knnwb_knn_distinct(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                            const char *backend, const KnnwbPrepared *query,
                            const KnnwbDuplicates *duplicates, int threads,
                            const KnnwbKnnGroup *group, KnnwbNeighbors *result, GError **error);
/** The query lists of rows [row0, row0 + n_rows) against a reference with exact duplicate rows:
 * the search against its distinct rows, then knnwb_duplicates_expand_query. Errors and time as
 * knnwb_knn_distinct. */
gboolean knnwb_knn_distinct_reference(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                      const char *backend, KnnwbPrepared *query,
                                      const KnnwbPrepared *reference,
                                      const KnnwbDuplicates *duplicates, int threads,
                                      const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                                      const double *within, KnnwbNeighbors *result, GError **error);

/* knn_shared_best.c: a shared self job's lists refined to k before they travel. */
struct KnnwbGroupBestLists; /* group/group.h */
/** Whether a shared self job's lists are refined to k before they travel: on GPUs (on_device),
 * unless KNNWB_GROUP_REFINED says otherwise. */
gboolean knnwb_knn_shared_best_wanted(gboolean on_device);
/** A self job's kc lists of every row (cand_distance: the backend's exact distances, or NULL:
 * computed here) refined to k as a GPU refines them on the device, each row put into lists
 * (knnwb_group_best_lists_put: its k best by (distance, index), the worst score of its candidates
 * and how many valid ones it had). O(n kc log kc) on threads, plus the distances. */
void knnwb_knn_shared_best_host(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                                size_t kc, size_t k, const int64_t *cand_index,
                                const float *cand_score, const double *cand_distance, int threads,
                                struct KnnwbGroupBestLists *lists);

#endif
