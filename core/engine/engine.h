/* What the exact search (core/engine/) offers the other units of core: a point set prepared for a
 * metric (KnnwbPrepared), the screen's precision, the backend choice, the refinement of one row and
 * the certify loop, and the request checks and empty lists every mode shares. core/split/ runs
 * its split-memory search on these, core/group/ fills KnnwbNeighbors with knnwb_knn_result_new;
 * tests read them too. The engine's own steps are in engine_internal.h. */
#ifndef KNNWB_ENGINE_H
#define KNNWB_ENGINE_H

#include <glib.h>
#include <math.h>
#include <stdint.h>
#include <knnwb/knn.h>
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
  /* the degenerate rows among them (not the absent ones) and the first of them (0 when none) */
  size_t n_degenerate, first_degenerate;
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
/** knnwb_prepared_init_rows for rows whose degenerate ones a group of ranks reports once
 * (core/split/'s blocks, core/tree/'s rows held by every rank): degenerate rows are flagged and
 * left out without a message (n_degenerate and first_degenerate count them), for
 * knnwb_prepare_report_degenerate once the ranks agree on them. Errors: as
 * knnwb_prepared_init_rows (role names the rows in them), but never for degenerate rows. */
gboolean knnwb_prepared_init_block(KnnwbPrepared *prepared, const KnnwbMatrix *data,
                                   size_t first_row, KnnwbMetric metric, const char *role,
                                   int n_threads, const KnnwbPrepared *like,
                                   const volatile gint *cancel, GError **error);
/**
 * What n_degenerate (> 0) degenerate rows, the first of them row first_row (label: its label or
 * NULL), mean for metric: without drop, an error that names the first and counts them
 * (KNNWB_ERROR_INVALID_DATA, FALSE); with drop, one warning (TRUE). role names the matrix ("data",
 * "query", "reference", or a file name for the data). O(1).
 */
gboolean knnwb_prepare_report_degenerate(KnnwbMetric metric, const char *role, gboolean drop,
                                         size_t n_degenerate, size_t first_row, const char *label,
                                         GError **error);
/**
 * Scored rows derived from the exact ones. A prepared view whose scored is NULL (a split run's
 * rows packed without their scored copy, core/split/) gives its scored rows on demand, the same
 * bits knnwb_prepared_init wrote: the centred and normalised (or centred and scaled) exact row,
 * computed in double and rounded once, zeros for rows left out. knnwb_prepared_derivable: whether
 * metric's scored rows follow from its exact rows and statistics so (all but manhattan, whose
 * scored rows are either the exact ones or their scaled copy). O(1).
 */
gboolean knnwb_prepared_derivable(KnnwbMetric metric);
/** Rows [first, first + count) of p's scored rows into out (count x d floats): copied, or derived
 * where p->scored is NULL (p->exact, the statistics, the flags and the frame must be there).
 * O(count d). */
void knnwb_prepared_scored_rows(const KnnwbPrepared *p, size_t first, size_t count, float *out);
/** knnwb_prepared_scored_rows as a KnnwbRowsFill (source: a KnnwbPrepared), for backends. */
void knnwb_prepared_scored_fill(const void *source, size_t first, size_t count, float *out);
/** Rows [first, first + count) of p's scored rows: a pointer into p->scored, or scratch (count x d
 * floats) filled by knnwb_prepared_scored_rows where they are derived. */
const float *knnwb_prepared_scored_at(const KnnwbPrepared *p, size_t first, size_t count,
                                      float *scratch);
void knnwb_prepared_clear(KnnwbPrepared *prepared);
/** knnwb_prepared_clear, the blocks freed by knnwb_release_later (a helper thread when large). */
void knnwb_prepared_release(KnnwbPrepared *prepared);
/** The per-row arrays knnwb allocated (the scored copy, ranks, norms, means, sums of squares,
 * flags) freed as knnwb_prepared_release frees them, and every row pointer (scored, exact too)
 * set to NULL; the frame (column_mean) and the scalars stay, so prepared can still be the like
 * of a view (a split run's rows packed in shared memory) and is cleared as before. */
void knnwb_prepared_release_rows(KnnwbPrepared *prepared);

/**
 * Manhattan: the power of two e by which rows are scaled (scored as x 2^-e) so that float L1 sums
 * of data's rows cannot overflow; 0 unless values come near the float limit. A query and its
 * reference must share one e: pass the larger of the two, as the frame (like) of the reference.
 * O(n d).
 */
int knnwb_prepare_manhattan_exponent(const KnnwbMatrix *data);

/** The bound on a screened score's error, per unit |q||r| (see screen.c for the derivation). */
double knnwb_screen_slack(KnnwbScreen screen, size_t d);
/** Whether a screen keeps its scores in half precision (FP16 unless KNNWB_SCREEN_FLOAT_SCORES=1);
 * the slack then includes their rounding, and jobs ask the backend for them. */
gboolean knnwb_screen_half_scores(KnnwbScreen screen);
/**
 * One margin decision for many searches of similar rows (the sub-searches of a partitioned run,
 * core/partition/): while a memo is set on the calling thread, the first search whose first round
 * would consult the margin planner stores the candidates per row it chose (kc > 0), and the later
 * ones take them without sampling. Only the speed depends on it (the certify loop re-selects rows
 * whose margin was short). NULL unsets. Thread-local; the memo is the caller's.
 */
typedef struct {
  gint kc; /* 0 until a search planned */
} KnnwbMarginMemo;
void knnwb_knn_margin_memo_set(KnnwbMarginMemo *memo);
/** Whether a memo is set on the calling thread (it runs a partitioned run's sub-search). */
gboolean knnwb_knn_margin_memo_active(void);

/*
 * The margin planner's steps (margin.c), for a first round whose reference rows lie in pieces (the
 * blocks of split ranks, core/split/): sample rows' heaps of their smallest distances are built
 * against each piece, merged (the keep smallest of the pieces' keep smallest are the whole's), and
 * counted where the sample rows live. knnwb_margin_choose (engine_internal.h) is the three steps on
 * one process's rows; pieces prepared as one process prepares the rows give its counts bit for bit.
 */
/* Rows below which the first round keeps the screen's fixed margin: re-selecting is cheap there. */
#define KNNWB_MARGIN_MIN_ROWS 65536
/* Sample rows a planner takes (a rank: of its own rows). */
#define KNNWB_MARGIN_SAMPLE 32
typedef struct {
  size_t k, kc; /* neighbours, the screen's candidates */
  size_t most;  /* the largest count the plan may take */
  size_t keep;  /* distances each sample row's heap keeps */
} KnnwbMarginPlan;
/** Whether a first round of rows query rows under screen is planned: a half-precision screen and
 * at least KNNWB_MARGIN_MIN_ROWS rows; never for manhattan or with KNNWB_MARGIN_PILOT=0; with
 * KNNWB_MARGIN_PILOT=always every screen and any rows (tests reach the planner on the CPU). O(1).
 */
gboolean knnwb_margin_wanted(KnnwbScreen screen, KnnwbMetric metric, size_t rows);
/** The plan's sizes for k, the screen's kc, the rows available and a memory cap max_kc: at most
 * 4 kc, available and max_kc (kc at least). O(1). */
KnnwbMarginPlan knnwb_margin_plan(size_t k, size_t kc, size_t available, size_t max_kc);
/** n_sample rows spread evenly over [row0, row0 + n_rows) into rows (n_sample <= n_rows). */
void knnwb_margin_sample_rows(size_t row0, size_t n_rows, size_t n_sample, size_t *rows);
/** The heaps (heap: n_sample x keep, size: n_sample, both the caller's) of the keep smallest
 * estimated distances of samples' rows rows[s] to the rows of reference, which are rows
 * reference_first.. of the whole run; ids[s] is row rows[s]'s number there (self: a row is not its
 * own neighbour). Reads samples' scored rows and sqnorms only. FALSE once cancel is raised (the
 * heaps are then partial). Time O(n_sample n d) on threads, the reference rows read once. */
gboolean knnwb_margin_heaps(const KnnwbPrepared *samples, const size_t *rows, const size_t *ids,
                            size_t n_sample, const KnnwbPrepared *reference, size_t reference_first,
                            gboolean self, size_t keep, int threads, const volatile gint *cancel,
                            double *heap, size_t *size);
/** count values offered to a heap of the keep smallest (*size so far). O(count log keep). */
void knnwb_margin_heap_add(double *heap, size_t *size, size_t keep, const double *values,
                           size_t count);
/** The plan from full heaps of query's rows rows[0, n_sample) (sorted in place): each row's count
 * of rows inside its certificate's window plus one into needed, and the count seven eighths of
 * them need when more than an eighth need more than kc (within plan->most), else kc. reference
 * gives the window's global norm bound. O(n_sample keep log keep). */
size_t knnwb_margin_decide(const KnnwbPrepared *query, const size_t *rows, size_t n_sample,
                           const KnnwbPrepared *reference, const KnnwbMarginPlan *plan,
                           double *heap, const size_t *size, size_t *needed);
/** The plan from the sample rows' counts (needed, n_sample of them, as knnwb_margin_decide gives
 * them; any order): the count seven eighths of them need when more than an eighth need more than
 * plan->kc (within plan->most), else plan->kc. O(n_sample log n_sample). */
size_t knnwb_margin_rule(const KnnwbMarginPlan *plan, const size_t *needed, size_t n_sample);
/** knnwb_margin_rule over every rank's sample counts (count of them on this rank, needed), into
 * *chosen, the same on every rank. Collective; errors: the group's transport. */
gboolean knnwb_margin_rule_group(const KnnwbKnnGroup *group, const KnnwbMarginPlan *plan,
                                 const size_t *needed, size_t count, size_t *chosen,
                                 GError **error);

/**
 * knnwb_knn_query for query rows that already hold k neighbours elsewhere (a partitioned search's
 * visitors, core/partition/): within[i] is the k-th distance query row i holds (an exact distance;
 * +inf or NaN for none), so only reference rows within it can enter its merged list. Row i's list
 * holds the k best reference rows by (distance, index) among those at distance <= within[i]: fewer
 * than k (-1 and +inf after them, n_found their count) when fewer lie within. The k best of its
 * union with the row's other lists are the exact ones, ties included, and the lists are the same
 * bytes on every backend. Each row's selection starts from the score beyond which no pair can lie
 * within (knnwb_refine_score_bound), so pairs beyond cost a product and no more. Not for groups.
 * Errors and cost: knnwb_knn_query's, less the candidates the bounds leave out.
 */
gboolean knnwb_knn_query_within(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                const KnnwbKnnOptions *options, const double *within,
                                KnnwbNeighbors **result, GError **error);

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
/** The formula of knnwb_pair_distance for metric, as the backends name it (a job's exact distances
 * on the device). */
KnnwbExactKind knnwb_metric_exact_kind(KnnwbMetric metric);

/* Clones for wider vector units: the same IEEE operations in the same order per lane (no FMA
 * contraction, see CMakeLists.txt), so every clone returns the same bits, only faster (the engine's
 * exact sums, and the other units' loops over them). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) &&                  \
    !defined(__clang__)
#define KNNWB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KNNWB_VECTOR_CLONES
#endif

/* Eight independent accumulators, always combined in the same order: deterministic, and the
 * compiler can vectorise them. Every exact sum of the engine (metric.c) is made this way, so every
 * caller gets bit-identical results. */
#define KNNWB_LANES 8
static inline double knnwb_lanes_sum(const double *acc)
{
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
/* The same order over float lanes (the float screens of core/partition/partition_outside.c). */
static inline float knnwb_lanes_sum_float(const float *acc)
{
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/** knnwb_pair_distance (so knnwb_distance_exact) of x and y under the euclidean (euclidean TRUE)
 * or manhattan metric, inline for the k-d tree's inner loop (core/tree/) and the cells' (core/
 * partition/partition_outside.c); metric.c's is this one, so they agree bit for bit. Always
 * inlined, so that a caller built for wider vector units (KNNWB_VECTOR_CLONES) keeps its eight sums
 * in their registers: called, it ran the plain build's code with the sums in memory. O(d). */
#if defined(__GNUC__)
#define KNNWB_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define KNNWB_ALWAYS_INLINE inline
#endif
static KNNWB_ALWAYS_INLINE double knnwb_distance_lp(gboolean euclidean, const float *x,
                                                    const float *y, size_t d)
{
  double acc[KNNWB_LANES] = {0};
  size_t j = 0;
  double tail = 0.0;
  if (euclidean) {
    for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
      for (int t = 0; t < KNNWB_LANES; t++) {
        double c = (double)x[j + t] - (double)y[j + t];
        acc[t] += c * c;
      }
    for (; j < d; j++)
      tail += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
    return sqrt(knnwb_lanes_sum(acc) + tail);
  }
  for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
    for (int t = 0; t < KNNWB_LANES; t++)
      acc[t] += fabs((double)x[j + t] - (double)y[j + t]);
  for (; j < d; j++)
    tail += fabs((double)x[j] - y[j]);
  return knnwb_lanes_sum(acc) + tail;
}

/** Exact distance between row i of a and row j of b (same metric and d), in double. */
double knnwb_prepared_distance(const KnnwbPrepared *a, size_t i, const KnnwbPrepared *b, size_t j);

/** A select backend (knnwb_cpu_select, knnwb_cuda_select): fills a job's candidates and returns a
 * KNNWB_KERNELS_* status, with message set when it is not OK. */
typedef int (*KnnwbSelectFunc)(const KnnwbSelectJob *job, char *message, size_t message_size);

/** Picks the backend for options (auto: CUDA when usable, else CPU with a notice). */
gboolean knnwb_knn_choose_backend(const KnnwbKnnOptions *options, KnnwbSelectFunc *select,
                                  char **name, GError **error);
/**
 * The share of its host's GPUs a run of options takes where it names none (no --devices): rank
 * share of the shares ranks its group runs on this host (knnwb_device_share), so that ranks
 * started alike (mpirun gives every rank the same CUDA_VISIBLE_DEVICES) do not each take every GPU
 * and take turns on all of them; (0, 1), every visible GPU, for a run alone on its host, one of a
 * group with a rank a host, or one that names its GPUs. O(1).
 */
void knnwb_knn_gpu_share(const KnnwbKnnOptions *options, int *share, int *shares);
/**
 * The GPUs a run of options uses: those it names, else its share of the visible ones
 * (knnwb_knn_gpu_share). Fills the first max ordinals and returns how many there are (0 without a
 * GPU). Waits for the driver's count of GPUs (knnwb_cuda_device_count). Never fails.
 */
int knnwb_knn_run_gpus(const KnnwbKnnOptions *options, int *ordinals, int max);
/**
 * Once a process, in debug logs: which of its host's GPUs this rank's run of options takes
 * (devices of them, knnwb_knn_run_gpus), which is otherwise not seen (a rank other than 0 writes
 * nothing). Nothing for a run that takes no share (knnwb_knn_gpu_share).
 */
void knnwb_knn_gpus_log(const KnnwbKnnOptions *options, int devices);
/** Whether this process has begun starting CUDA's driver or its GPUs (knnwb_knn_devices_start
 * with a backend other than cpu, or knnwb_knn_uses_gpu counting them), whether or not it found
 * any: for the tests that check that a run on the CPU's tree left them alone. O(1). */
gboolean knnwb_knn_devices_begun(void);
/**
 * Begins the GPUs' start (knnwb_knn_devices_start) and the choice of the tile GEMM for a search of
 * n_query x n_reference rows of dim columns with options (knnwb_cuda_gemm_start), where that
 * search will score in half-precision tiles on GPUs with the default memory budget; else nothing.
 * Returns at once; never fails. The search waits for it; knnwb_knn_devices_wait too.
 */
void knnwb_knn_gemm_start(const KnnwbKnnOptions *options, size_t n_query, size_t n_reference,
                          size_t dim);
/**
 * Begins the upload of a self search's prepared rows to its one GPU (knnwb_cuda_rows_start), where
 * the search will hold them there in half precision: a GPU backend of one GPU with the default
 * memory budget, an FP16 screen, at least 262,144 rows (fewer upload in a few ms;
 * KNNWB_CUDA_ROWS_START=1: any, =0: none). rows (scored) must stay allocated until
 * knnwb_knn_rows_drop. early: before the backend is chosen, so without waiting for the driver's
 * count of GPUs (nothing begins while it is unknown). Returns whether it began; never fails.
 */
gboolean knnwb_knn_rows_start(const KnnwbKnnOptions *options, const KnnwbPrepared *rows,
                              gboolean early);
/** Frees rows begun by knnwb_knn_rows_start that no select took (stops their upload at its next
 * chunk). */
void knnwb_knn_rows_drop(void);
/** Turns a KNNWB_KERNELS_* status into a GError (TRUE when OK). */
gboolean knnwb_knn_status_to_error(int status, const char *message, const char *backend,
                                   GError **error);

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

/** Rows compared with every reference row (exhaustive.c). */
typedef struct {
  const KnnwbPrepared *query, *reference;
  const int64_t *rows;       /* the query rows; NULL: rows 0 .. n_rows - 1 */
  const int64_t *self_index; /* per row: a reference row to leave out, or -1; NULL: none */
  /* Per row of query and reference (the same rows: query == reference): the rows of a row's own
   * group are left out. NULL: none. */
  const int32_t *group;
  size_t n_rows, k;
  /* Row t's list at out_index/out_distance + slot k: slot rows[t] - out_first, or t without rows
   * or with in_order. */
  int64_t *out_index;
  double *out_distance;
  size_t out_first;
  gboolean in_order;
  int threads;
  const volatile gint *cancel;
} KnnwbExhaustiveJob;

/**
 * The exact list of each of job's query rows against every valid reference row, the bytes of
 * knnwb_refine_row_exhaustive (k best by (distance, index), padded with -1 and +inf); query rows
 * flagged invalid are left untouched. Many rows run a row per thread; fewer than 4 per thread run
 * the reference rows in one slice per thread (knnwb_exhaustive_slices), each slice's k best per
 * row merged, so that one row uses every thread. cancel is polled every 1,024 reference rows of a
 * row (of every row, in a slice); returns FALSE when it was raised (the lists then partly
 * written). Time O(rows n (d + log k)) over threads; memory k x 16 bytes per thread, and with
 * slices, slices x rows x k x 16 bytes (at most 256 MiB).
 */
gboolean knnwb_exhaustive_run(const KnnwbExhaustiveJob *job);
/** The reference slices knnwb_exhaustive_run uses for n_rows rows (1: a row per thread). O(1). */
size_t knnwb_exhaustive_slices(size_t n_rows, size_t n_reference, size_t k, int threads);

/**
 * A lower bound of the exact distance of a pair (query_row, any reference row) whose float score
 * is at least score, by the certificate's error model (0 for a score that overflowed). O(1).
 */
double knnwb_refine_lower_bound(const KnnwbPrepared *query, size_t query_row,
                                const KnnwbPrepared *reference, float score);

/**
 * The certificate of knnwb_refine_row for a row refined elsewhere (a backend
 * on its device, a split run's first pass): out_index/out_distance
 * hold its first min(k, valid) neighbours by (distance, index) from valid candidates (index >= 0,
 * not the row itself) whose largest float score was worst; the slots past them are set empty.
 * Returns what knnwb_refine_row would for the same candidates. O(k).
 */
gboolean knnwb_refine_certify_row(const KnnwbPrepared *query, size_t query_row,
                                  const KnnwbPrepared *reference, float worst, size_t valid,
                                  size_t available, size_t k, int64_t *out_index,
                                  double *out_distance);

/**
 * The least float score whose knnwb_refine_lower_bound exceeds within: every pair the screen
 * scores at or above it is provably farther than within (an exact distance), so a row that already
 * holds k neighbours within that distance elsewhere need not take such pairs as candidates
 * (KnnwbSelectJob.query_bounds). +inf when within is +inf, NaN or past float's range. O(1).
 */
float knnwb_refine_score_bound(const KnnwbPrepared *query, size_t query_row,
                               const KnnwbPrepared *reference, double within);

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
/** The same for the k-d tree's search (core/tree/), which holds no candidate lists: the memory
 * estimate leaves them out without asking whether the run is on GPUs (asking starts CUDA's
 * driver, which a run on the CPU's tree never uses). */
gboolean knnwb_knn_check_sizes_tree(size_t n, size_t n_reference, size_t d, size_t d_reference,
                                    size_t held, size_t held_reference, gboolean self,
                                    const KnnwbKnnOptions *options, GError **error);

/** Lists for rows [first, first + rows) with every slot empty (index -1, distance +inf). */
KnnwbNeighbors *knnwb_knn_result_new(size_t first, size_t rows, size_t k, GError **error);

/** As knnwb_knn_result_new, with the slots left unset (n_found is zero): for a caller that writes
 * every row's list, or empties the rows it does not write (knnwb_knn_result_empty_rows), perhaps
 * beside other work. Emptying 10,000,000 rows at k = 30 writes 4.8 GB (0.13-0.45 s on an H200
 * host, most of it faulting the pages in). */
KnnwbNeighbors *knnwb_knn_result_new_unset(size_t first, size_t rows, size_t k, GError **error);

/** Empties every slot of rows [first, last) of lists (positions in its arrays, from 0). O(rows k),
 * on the calling thread. */
void knnwb_knn_result_empty_rows(KnnwbNeighbors *lists, size_t first, size_t last);

/** knnwb_knn_self and knnwb_knn_query_within without the last check of their lists
 * (knnwb_knn_result_check): for the partitioned search's sub-searches, whose combined lists
 * knnwb_knn_self checks once. Same contracts and errors otherwise. */
gboolean knnwb_knn_self_unchecked(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                                  KnnwbNeighbors **result, GError **error);
gboolean knnwb_knn_query_within_unchecked(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                          const KnnwbKnnOptions *options, const double *within,
                                          KnnwbNeighbors **result, GError **error);

/* Split ranks that put their rows together for a search of the whole rows (knn_together.c): the
 * engine's own rule on GPUs (knnwb_knn_self), the partitioned search's on clustered rows
 * (core/partition/partition_gather.c). */
/* The split ranks' blocks, and whether they put their rows together. */
typedef struct {
  int64_t *counts; /* every rank's rows, in rank order */
  size_t n;        /* their sum */
  gboolean held;   /* every rank holds every row already (an input every rank read whole) */
  gboolean go;     /* the ranks put their rows together */
  gboolean apply;  /* every rank wants to, and the whole rows pass the checks (room or not) */
} KnnwbTogether;
/** Every rank's row count into t (emptied first: knnwb_knn_together_clear). Collective: one
 * gather. FALSE: the group's errors. */
gboolean knnwb_knn_together_counts(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                   KnnwbTogether *t, GError **error);
/** Whether the ranks put their rows together (t->go): every rank wants to (want) and has room for
 * the whole run's rows, with the lists and arrays of a whole-input run, in half of its share of
 * the memory available (KNNWB_PARTITION_GATHER_ROOM=BYTES: the host's, for tests), the whole run
 * passes the request's checks, no block has absent rows or ranks as read (only the values travel),
 * and the blocks have one width (else the split search's checks say so; nothing travels first).
 * Where every rank's block is its share of a whole matrix it holds (knnwb_matrix_new_block_of:
 * an input every rank read whole, the same input on every rank), t->held, and the rows do not
 * count. t->apply: the same but for the room (split ranks that keep to their blocks need none).
 * Collective: one reduction. FALSE: the group's errors. */
gboolean knnwb_knn_together_agree(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                  gboolean want, KnnwbTogether *t, GError **error);
/** The rows put together into *whole on every rank: a view of the whole matrix each holds
 * (t->held; no copy, valid while block is, not to be written), else every rank's block
 * (knnwb_knn_group_gather_rows). TRUE with *whole NULL on every rank alike when a rank could not
 * allocate them (the caller goes on with the split search); FALSE: the group's errors. Collective
 * unless t->held. O(n d), O(1) for the view. */
gboolean knnwb_knn_together_rows(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                 const KnnwbTogether *t, KnnwbMatrix **whole, GError **error);
/** Frees t's counts and empties it. */
void knnwb_knn_together_clear(KnnwbTogether *t);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(KnnwbTogether, knnwb_knn_together_clear)
/** A whole-input run's lists (*result: this rank's even share, or NULL: none) made this rank's
 * block's (t's counts) when the run returns own rows (knnwb_knn_group_recut). Collective when
 * *result is set and own rows are asked for (the same on every rank). FALSE with *result freed:
 * allocation, the group's errors. O(rows k). */
gboolean knnwb_knn_together_lists(const KnnwbKnnOptions *options, const KnnwbTogether *t,
                                  KnnwbNeighbors **result, GError **error);

/**
 * Lists' arrays kept for the next search on the same thread (the sub-searches of a partitioned
 * run, core/partition/): while a keep is set on the calling thread, a search's lists take its
 * arrays when they are large enough, instead of fresh memory whose first touch (page faults)
 * cost 0.1-0.2 s a 200,000-row sub-search with six searches at once. Thread-local; the keep is
 * the caller's, zeroed before use. Only where memory comes from changes, never the lists.
 */
typedef struct {
  int64_t *indices;
  double *distances;
  size_t cells;        /* room in both, 0 when empty */
  const int64_t *lent; /* the indices a search took last, with their room: given back, */
  size_t lent_cells;   /* they count as that large again */
} KnnwbResultKeep;
void knnwb_knn_result_keep_set(KnnwbResultKeep *keep);
/** Frees lists (NULL ignored), their index and distance arrays going to keep when they are larger
 * than what it holds. */
void knnwb_knn_result_keep_put(KnnwbResultKeep *keep, KnnwbNeighbors *lists);
/** Frees what keep holds. */
void knnwb_knn_result_keep_clear(KnnwbResultKeep *keep);

/**
 * How a search certifies its rows (certify.c): reselect selects rows (the caller's numbering)
 * again with kc candidates each, refines and certifies them into the caller's lists, and appends
 * those left uncertified to left; exhaustive (NULL: never) writes the exact lists of rows compared
 * with every reference row; pending (NULL: this process alone) sums mine over the ranks of a
 * search whose hooks are collective. total: the candidates that are every reference row (a round
 * that wide certifies every row). chosen_from: the reference rows one selection job chooses among
 * (0: total; a split rank: its share); a round whose candidates are a quarter of them or more goes
 * exhaustive, and so does a small round: its pending rows (on every rank) times chosen_from, at
 * dim columns, within what the host computes in a fraction of a second (knnwb_certify_small).
 * data: the hooks' own.
 */
typedef struct {
  gboolean (*reselect)(void *data, const int64_t *rows, size_t n_rows, size_t kc, GArray *left,
                       GError **error);
  gboolean (*exhaustive)(void *data, const int64_t *rows, size_t n_rows, GError **error);
  gboolean (*pending)(void *data, size_t mine, size_t *all, GError **error);
  void *data;
  size_t total, chosen_from;
  const volatile gint *cancel;
  size_t dim;       /* the rows' columns (0: the small rounds stay screened) */
  gboolean on_host; /* reselect selects on the CPU (a smaller limit for small rounds) */
} KnnwbCertify;

/** Rows sent back (all rounds), and of those, rows compared with every row. */
typedef struct {
  size_t reselected, exhaustive;
} KnnwbCertifyCounts;

/**
 * The certify loop: the rows in *uncertified (those the first round, kc candidates wide, left;
 * taken over, *uncertified set NULL; NULL: none here) selected again with four times the
 * candidates until every row (on every rank, with pending) is certified, the last round compared
 * with every row once its window would hold a quarter of all rows or more, or once its rows are
 * few enough (knnwb_certify_small). Adds to counts. Errors:
 * the hooks', KNNWB_ERROR_CANCELLED after an exhaustive round, KNNWB_ERROR_FAILED when rows stay
 * uncertified with every reference a candidate. Time: the hooks'; one pending call a round.
 */
gboolean knnwb_certify_run(const KnnwbCertify *certify, size_t kc, GArray **uncertified,
                           KnnwbCertifyCounts *counts, GError **error);
/** The rows of a re-selection batch whose candidate lists (index, score, exact distance: 20 bytes
 * a candidate, on each of ranks ranks) fit memory_bytes (0: 256 MiB); at least 1. O(1). */
size_t knnwb_certify_batch_rows(size_t memory_bytes, size_t kc, size_t ranks);
/** Whether a round of pending rows (on every rank), each choosing among chosen_from rows of dim
 * columns, is compared with every row instead of screened: pending x chosen_from x (dim + 64)
 * within 2^33 (about 1.3 CPU seconds) when the rounds select on a GPU, 2^28 on the CPU (on_host),
 * or KNNWB_CERTIFY_SMALL_WORK's number (tests; 0: never). The same answer on every rank for the
 * same arguments. O(1). */
gboolean knnwb_certify_small(size_t pending, size_t chosen_from, size_t dim, gboolean on_host);

#endif
