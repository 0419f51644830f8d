/* Internal pieces of the kNN engine shared by its files: the run (knn.c) and its steps
 * (knn_check.c, knn_backend.c, knn_rounds.c, certify.c, knn_distinct.c, knn_result.c), the
 * preparation (prepare.c), the CPU backend (select_cpu.c), the refinement (refine.c) and the group
 * and split-memory runs. */
#ifndef KNNWB_KNN_INTERNAL_H
#define KNNWB_KNN_INTERNAL_H

#include <glib.h>
#include <stdint.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "knnwb_kernels.h"

/**
 * A point set made ready for one metric: the float32 rows a backend scores (centred and
 * normalised, ranked, or the raw data) and the double statistics the exact recomputation uses.
 */
typedef struct {
  KnnwbMetric metric;
  size_t n, d;
  const float *scored; /* n x d rows given to the backend (may alias the input) */
  float *scored_owned; /* what scored points to, when knnwb allocated it */
  const float *exact;  /* n x d rows the exact distance is computed from */
  float *ranks_owned;  /* spearman ranks (exact points here) */
  float *sqnorms;      /* n squared norms of scored rows (euclidean), rounded from double */
  double *mean;        /* n means (pearson family) */
  double *sum_squares; /* n |centred row|^2 (pearson family) or |row|^2 (cosine) */
  double max_norm;     /* largest |scored row| in data units (euclidean error bound) */
  double *norm;        /* n |scored row| in data units (euclidean error bound) */
  /* Euclidean: the scored rows are the column-centred rows times 2^-e (exact, and distances do not
   * change under a common shift), so offsets and huge or tiny magnitudes cost no float precision.
   * column_mean (d) and scale_exponent e are shared by query and reference. A score times
   * score_scale (2^2e) is in squared data units. */
  double *column_mean;
  int scale_exponent;
  double score_scale;
  unsigned char *invalid; /* n flags: degenerate rows left out, or NULL when none */
  size_t n_invalid;
  /* The run's screening precision (knnwb_prepared_set_screen; zero-initialised = FP32 with its
   * bound), the bound on |screened score - exact| per unit the certificate uses, and a bound on
   * every scored row's norm (the FP16 screen's scale). */
  KnnwbScreen screen;
  double screen_slack;
  double screen_row_norm;
} KnnwbPrepared;

/**
 * Prepares data for metric. Degenerate rows (constant for the pearson family, zero for cosine)
 * are an error naming the first one, or, with drop_degenerate, flagged invalid with a warning.
 * role names the matrix in messages ("data", "query", "reference"). like (NULL, or the prepared
 * reference when preparing a query) supplies the shared euclidean centring and scale.
 * Complexity: O(n d) (O(n d log d) for spearman), multi-threaded. cancel (may be NULL) is polled
 * every 1024 rows: a raised flag gives KNNWB_ERROR_CANCELLED (1,533,876 x 295 rows take 2 s here).
 */
gboolean knnwb_prepared_init(KnnwbPrepared *prepared, const KnnwbMatrix *data, KnnwbMetric metric,
                             gboolean drop_degenerate, const char *role, int n_threads,
                             const KnnwbPrepared *like, const volatile gint *cancel,
                             GError **error);
/** knnwb_prepared_init of a block of rows whose first is row first_row of a larger matrix (the
 * messages name rows by their number there). */
gboolean knnwb_prepared_init_rows(KnnwbPrepared *prepared, const KnnwbMatrix *data,
                                  size_t first_row, KnnwbMetric metric, gboolean drop_degenerate,
                                  const char *role, int n_threads, const KnnwbPrepared *like,
                                  const volatile gint *cancel, GError **error);
void knnwb_prepared_clear(KnnwbPrepared *prepared);
/** knnwb_prepared_clear, the blocks freed by knnwb_release_later (a helper thread when large). */
void knnwb_prepared_release(KnnwbPrepared *prepared);

/** The bound on a screened score's error, per unit |q||r| (see screen.c for the derivation). */
double knnwb_screen_slack(KnnwbScreen screen, size_t d);
/** Whether a screen keeps its scores in half precision (FP16 unless KNNWB_SCREEN_FLOAT_SCORES=1);
 * the slack then includes their rounding, and jobs ask the backend for them. */
gboolean knnwb_screen_half_scores(KnnwbScreen screen);
/** Candidates per row for k neighbours under screen (k plus a margin for the bound's window). */
size_t knnwb_screen_candidates(KnnwbScreen screen, size_t k);
/** The precision a run uses for requested on backend ("cpu", "cuda:N"); fp16/tf32 on the CPU is
 * an error. */
gboolean knnwb_screen_resolve(KnnwbScreen requested, const char *backend, KnnwbMetric metric,
                              size_t k, KnnwbScreen *screen, GError **error);
/** The KnnwbScreenPrecision of the kernels for screen. */
int knnwb_screen_kernel_precision(KnnwbScreen screen);
/** Records screen, its slack and the rows' norm bound on query and reference (may be the same). */
void knnwb_prepared_set_screen(KnnwbPrepared *query, KnnwbPrepared *reference, KnnwbScreen screen);

/** The score kind the backends compute for metric. */
KnnwbScoreKind knnwb_metric_score_kind(KnnwbMetric metric);

/** The formula of knnwb_pair_distance for metric, as the backends name it. */
KnnwbExactKind knnwb_metric_exact_kind(KnnwbMetric metric);

/** Exact distance between row i of a and row j of b (same metric and d), in double. */
double knnwb_prepared_distance(const KnnwbPrepared *a, size_t i, const KnnwbPrepared *b, size_t j);

/** The per-row statistics both the engine and knnwb_distance_exact use, so they agree bit for bit.
 */
void knnwb_row_statistics(KnnwbMetric metric, const float *row, size_t d, double *mean,
                          double *sum_squares);
double knnwb_pair_distance(KnnwbMetric metric, const float *x, const float *y, size_t d,
                           double mean_x, double squares_x, double mean_y, double squares_y);
/** Average ranks (1-based, ties averaged) of row into ranks. O(d log d). */
void knnwb_row_ranks(const float *row, size_t d, float *ranks);

typedef int (*KnnwbSelectFunc)(const KnnwbSelectJob *job, char *message, size_t message_size);

/** Picks the backend for options (auto: CUDA when usable, else CPU with a notice). */
gboolean knnwb_knn_choose_backend(const KnnwbKnnOptions *options, KnnwbSelectFunc *select,
                                  char **name, GError **error);
/** Turns a KNNWB_KERNELS_* status into a GError (TRUE when OK). */
gboolean knnwb_knn_status_to_error(int status, const char *message, const char *backend,
                                   GError **error);

/** The CPU backend of a selection job. Returns a KNNWB_KERNELS_* status. */
int knnwb_cpu_select(const KnnwbSelectJob *job, char *message, size_t message_size);

/**
 * Scratch memory the refine reuses from row to row (one per thread; {0} to start, cleared with
 * knnwb_refine_scratch_clear). Aborts like g_malloc when memory runs out: m is bounded by the
 * run's memory budget.
 */
typedef struct {
  void *block;
  size_t bytes;
} KnnwbRefineScratch;

void knnwb_refine_scratch_clear(KnnwbRefineScratch *scratch);

/**
 * Refines one query row: exact distances of its m candidates (self_index, when >= 0, skipped),
 * sorted by (distance, index), the first k into out_index/out_distance. candidate_distance (NULL,
 * or m distances a backend computed bit for bit as knnwb_prepared_distance) saves computing them.
 * scratch: reused buffers, or NULL. Returns TRUE when a rounding-error bound proves no
 * non-candidate is nearer than the k-th (or every valid reference was a candidate).
 * O(m d + k log k) expected.
 */
gboolean knnwb_refine_row(const KnnwbPrepared *query, size_t query_row,
                          const KnnwbPrepared *reference, int64_t self_index,
                          const int64_t *candidate_index, const float *candidate_score,
                          const double *candidate_distance, size_t m, size_t available, size_t k,
                          KnnwbRefineScratch *scratch, int64_t *out_index, double *out_distance);

/**
 * The exact list of one query row against every valid reference row (self_index, when >= 0,
 * skipped): exact distances of all of them, the k best by (distance, index), padded with -1 and
 * +inf past the valid ones. For rows whose screening window holds a large part of all rows (dense
 * ties), where screening costs more than it saves. O(n d + k log k) expected; scratch as above.
 */
void knnwb_refine_row_exhaustive(const KnnwbPrepared *query, size_t query_row,
                                 const KnnwbPrepared *reference, int64_t self_index, size_t k,
                                 KnnwbRefineScratch *scratch, int64_t *out_index,
                                 double *out_distance);

/**
 * A lower bound of the exact distance of a pair (query_row, any reference row) whose float score
 * is at least score, by the certificate's error model (0 for a score that overflowed). O(1).
 */
double knnwb_refine_lower_bound(const KnnwbPrepared *query, size_t query_row,
                                const KnnwbPrepared *reference, float score);

/**
 * The certificate of knnwb_refine_row for a row a backend refined itself: out_index/out_distance
 * hold its first min(k, valid) neighbours by (distance, index) from valid candidates (index >= 0,
 * not the row itself) whose largest float score was worst; the slots past them are set empty.
 * Returns what knnwb_refine_row would for the same candidates. O(k).
 */
gboolean knnwb_refine_certify_row(const KnnwbPrepared *query, size_t query_row,
                                  const KnnwbPrepared *reference, float worst, size_t valid,
                                  size_t available, size_t k, int64_t *out_index,
                                  double *out_distance);

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
 * The thresholds of a shared self job made common between the ranks (knn_group_bounds.c), as
 * KnnwbSelectJob.share_bounds / share_bounds_data / share_bound_rounds. init is collective (the
 * ranks agree on the rounds: none unless every rank wanted them) and allocates n int64; when
 * ready() is FALSE the allocation failed (the caller agrees on that before selecting). finish
 * completes the rounds the backend did not use (collective) and frees. Each round: O(n) and one
 * reduction of n int64.
 */
typedef struct {
  const KnnwbKnnGroup *group;
  size_t n;
  int rounds, done;
  gboolean failed;
  int64_t *keys;
  int64_t tightened;
  double seconds;
} KnnwbGroupBounds;
/** A float as an int64 key in the same order (an int64 reduction finds the smallest), and back. */
int64_t knnwb_group_bound_key(float value);
float knnwb_group_bound_value(int64_t key);
gboolean knnwb_group_bounds_init(KnnwbGroupBounds *bounds, const KnnwbKnnGroup *group, size_t n,
                                 gboolean wanted, GError **error);
gboolean knnwb_group_bounds_ready(const KnnwbGroupBounds *bounds);
int knnwb_group_bounds_share(float *values, size_t n, void *data);
void knnwb_group_bounds_finish(KnnwbGroupBounds *bounds);

/** Every rank's lists of its own rows (first_row = its first) into all n rows, on every rank.
 * Collective. Returns NULL (error set, the same on every rank) on failure. */
KnnwbNeighbors *knnwb_knn_group_gather(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                       size_t n, GError **error);
/** The same for blocks of any sizes: rank r's rows are [first[r], first[r] + count[r]). */
KnnwbNeighbors *knnwb_knn_group_gather_blocks(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                              size_t n, const size_t *first, const size_t *count,
                                              GError **error);

/** Fails (KNNWB_ERROR_INVALID_ARGUMENT) when k exceeds available, the rows each query row can
 * choose from once absent rows (missing values, dropped constant rows) are left out: n_valid of
 * the n_reference reference rows hold values. Says so when absent rows are the cause. O(1). */
gboolean knnwb_knn_check_available(size_t k, size_t available, size_t n_valid, size_t n_reference,
                                   gboolean self, GError **error);

/** The request checks of knnwb_knn_self/query from sizes: n (n_reference) rows of d (d_reference)
 * columns in the run, held (held_reference) of them in this process (the memory estimate). */
gboolean knnwb_knn_check_sizes(size_t n, size_t n_reference, size_t d, size_t d_reference,
                               size_t held, size_t held_reference, gboolean self,
                               const KnnwbKnnOptions *options, GError **error);

/** Lists for rows [first, first + rows) with every slot empty (index -1, distance +inf). */
KnnwbNeighbors *knnwb_knn_result_new(size_t first, size_t rows, size_t k, GError **error);
/** knnwb_knn_result_new, or with clear FALSE every index and distance left unset for a caller that
 * writes them all (knn_result.c). Errors: KNNWB_ERROR_NO_MEMORY. O(rows k) when clearing, on every
 * core. */
KnnwbNeighbors *knnwb_knn_result_alloc(size_t first, size_t rows, size_t k, gboolean clear,
                                       GError **error);
/** A knnwb_parallel_for body emptying slots [first, last) of the KnnwbNeighbors user. */
void knnwb_knn_result_clear(size_t first, size_t last, void *user);

/**
 * How a search certifies its rows (certify.c): reselect selects rows (the caller's numbering)
 * again with kc candidates each, refines and certifies them into the caller's lists, and appends
 * those left uncertified to left; exhaustive (NULL: never) writes the exact lists of rows compared
 * with every reference row; pending (NULL: this process alone) sums mine over the ranks of a
 * search whose hooks are collective. total: the candidates that are every reference row (a round
 * that wide certifies every row). chosen_from: the reference rows one selection job chooses among
 * (0: total; a split rank: its share); a round whose candidates are a quarter of them or more goes
 * exhaustive. data: the hooks' own.
 */
typedef struct {
  gboolean (*reselect)(void *data, const int64_t *rows, size_t n_rows, size_t kc, GArray *left,
                       GError **error);
  gboolean (*exhaustive)(void *data, const int64_t *rows, size_t n_rows, GError **error);
  gboolean (*pending)(void *data, size_t mine, size_t *all, GError **error);
  void *data;
  size_t total, chosen_from;
  const volatile gint *cancel;
} KnnwbCertify;

/** Rows sent back (all rounds), and of those, rows compared with every row. */
typedef struct {
  size_t reselected, exhaustive;
} KnnwbCertifyCounts;

/**
 * The certify loop: the rows in *uncertified (those the first round, kc candidates wide, left;
 * taken over, *uncertified set NULL; NULL: none here) selected again with four times the
 * candidates until every row (on every rank, with pending) is certified, the last round compared
 * with every row once its window would hold a quarter of all rows or more. Adds to counts. Errors:
 * the hooks', KNNWB_ERROR_CANCELLED after an exhaustive round, KNNWB_ERROR_FAILED when rows stay
 * uncertified with every reference a candidate. Time: the hooks'; one pending call a round.
 */
gboolean knnwb_certify_run(const KnnwbCertify *certify, size_t kc, GArray **uncertified,
                           KnnwbCertifyCounts *counts, GError **error);
/** The rows of a re-selection batch whose candidate lists (index, score, exact distance: 20 bytes
 * a candidate, on each of ranks ranks) fit memory_bytes (0: 256 MiB); at least 1. O(1). */
size_t knnwb_certify_batch_rows(size_t memory_bytes, size_t kc, size_t ranks);

/**
 * The search (knn_rounds.c): select, refine and certify rows [row0, row0 + n_rows) of query into
 * result, then the certify loop (knnwb_certify_run: the uncertified rows re-selected with four
 * times the candidates until all are certified, or compared with every row once that would take a
 * quarter of all rows); with a group the first round's self tiles are shared (collective), and
 * each rank certifies its own rows alone. Errors: the backend's, KNNWB_ERROR_NO_MEMORY,
 * KNNWB_ERROR_CANCELLED, KNNWB_ERROR_FAILED for a certificate that cannot succeed.
 * Time: the backend's selection plus O(rows kc d) exact distances per round (fewer when the
 * backend computed them); memory: rows x kc candidates in the first round, re-selection batches
 * within options->memory_bytes.
 */
gboolean knnwb_knn_rounds(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                          const char *backend, const KnnwbPrepared *query,
                          const KnnwbPrepared *reference, gboolean self, size_t available,
                          int threads, const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                          gboolean lists_fresh, KnnwbNeighbors *result, GError **error);

/**
 * The split-memory run of a group (options->group_split, knn_split.c): query_block (and
 * reference_block, NULL for the self graph) are this rank's blocks. given must be NULL.
 * Collective; the same result or error on every rank.
 */
gboolean knnwb_knn_split_run(const KnnwbMatrix *query_block, const KnnwbMatrix *reference_block,
                             const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                             const KnnwbKnnGroup *group, KnnwbNeighbors **result, GError **error);

/** Exact duplicate rows of a matrix (duplicates.c). */
typedef struct {
  size_t n_unique; /* distinct rows; n_rows when there is no duplicate (then all else NULL) */
  int64_t *representative; /* n_unique: the first row of each group, increasing */
  int64_t *group_of;       /* n: each row's group */
  int64_t *members;        /* n: rows by (group, row index) */
  size_t *group_start;     /* n_unique + 1: each group's range in members */
} KnnwbDuplicates;

/**
 * Groups the rows of data whose bytes are identical (hashing, then comparing equal hashes).
 * O(n d + n log n) time (0.5 s at 1,533,876 x 295 rows here), O(n) memory. cancel (may be NULL) is
 * polled every 4096 rows and once per bucket of about 512 rows, in every thread.
 * Errors: KNNWB_ERROR_NO_MEMORY; KNNWB_ERROR_CANCELLED when cancel was raised. On error duplicates
 * holds nothing (no rows grouped, nothing to free).
 */
gboolean knnwb_duplicates_find(const KnnwbMatrix *data, int n_threads, const volatile gint *cancel,
                               KnnwbDuplicates *duplicates, GError **error);
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
                                      KnnwbNeighbors *result, GError **error);

/* Host work off a GPU run's critical path (background.c). */
typedef struct KnnwbPrefault KnnwbPrefault;
/**
 * Faults in the whole pages of blocks[b] (bytes[b] each; NULL blocks skipped) writable, on a
 * helper thread that uses up to threads threads, without changing their values: other threads
 * (a GPU's download) may write them meanwhile. Needs Linux >= 5.14 (MADV_POPULATE_WRITE); else,
 * or when no thread can start, nothing is done. Returns the handle for knnwb_prefault_finish,
 * or NULL when nothing was started. O(bytes) time, on the helpers.
 */
KnnwbPrefault *knnwb_prefault_start(void *const *blocks, const size_t *bytes, size_t n_blocks,
                                    int threads);
/** Stops the helper after the pieces (64 MiB) it is faulting in, waits for it (NULL: nothing to
 * wait for) and frees the handle. */
void knnwb_prefault_finish(KnnwbPrefault *prefault);

/** Below this many bytes in all, knnwb_release_later frees at once (a thread costs more). */
#define KNNWB_RELEASE_LATER_MIN ((size_t)64 << 20)
/**
 * Hands blocks[0 .. n_blocks) (bytes[b] each, for the total; NULL allowed) over to be freed: at
 * once when the total is small or memory is short (a quarter of knnwb_memory_available), else
 * queued, and freed by a helper thread from knnwb_release_start on, so that unmapping gigabytes
 * holds up neither the caller nor a GPU's next pinned allocations.
 */
void knnwb_release_later(void *const *blocks, const size_t *bytes, size_t n_blocks);
/** Starts a helper thread freeing every queued block (frees them here when none can start). */
void knnwb_release_start(void);
/** knnwb_release_start, then waits until every block handed over so far is freed. */
void knnwb_release_wait(void);

/** knnwb_matrix_check_finite over rows [first, last) only (messages name the global row). */
gboolean knnwb_matrix_check_finite_rows(const KnnwbMatrix *matrix, size_t first, size_t last,
                                        GError **error);

/**
 * Manhattan: the power of two e by which rows are scaled (scored as x 2^-e) so that float L1 sums
 * of data's rows cannot overflow; 0 unless values come near the float limit. A query and its
 * reference must share one e: pass the larger of the two, as the frame (like) of the reference.
 * O(n d).
 */
int knnwb_prepare_manhattan_exponent(const KnnwbMatrix *data);

/* Matrix annotations (matrix_annotations.c), for matrix.c. */
/** Frees every annotation (their strings live in the matrix's chunk). */
void knnwb_matrix_annotations_clear(KnnwbMatrix *matrix);
/** Copies from's annotations along from_axis to to's along to_axis, entry i kept when keep is NULL
 * or keep[i] (kept entries packed in order). */
void knnwb_matrix_annotations_copy(KnnwbMatrix *to, KnnwbMatrixAxis to_axis,
                                   const KnnwbMatrix *from, KnnwbMatrixAxis from_axis,
                                   const gboolean *keep);

#endif
