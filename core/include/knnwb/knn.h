/* The exact kNN engine: every row's k nearest rows (or a query set against a reference set). */
#ifndef KNNWB_KNN_H
#define KNNWB_KNN_H

#include <glib.h>
#include <stdint.h>
#include <knnwb/enum_names.h>
#include <knnwb/knn_group.h>
#include <knnwb/matrix.h>

G_BEGIN_DECLS

/** Distance between two rows x and y of length d. */
typedef enum {
  KNNWB_METRIC_PEARSON,     /**< 1 - r (Pearson correlation); nearest = most correlated */
  KNNWB_METRIC_ABS_PEARSON, /**< 1 - |r|; anti-correlated rows are near too */
  KNNWB_METRIC_SPEARMAN,    /**< 1 - rho, Pearson on per-row ranks, ties get average ranks */
  KNNWB_METRIC_EUCLIDEAN,   /**< sqrt(sum (x-y)^2) */
  KNNWB_METRIC_MANHATTAN,   /**< sum |x-y| */
  KNNWB_METRIC_COSINE,      /**< 1 - x.y / (|x||y|) */
  KNNWB_METRIC_COUNT
} KnnwbMetric;

/** Where the distance tiles are computed. */
typedef enum {
  KNNWB_BACKEND_AUTO, /**< CUDA when built in and a GPU is usable, otherwise CPU (with a notice) */
  KNNWB_BACKEND_CPU,
  KNNWB_BACKEND_CUDA /**< CUDA or an error */
} KnnwbBackend;

/**
 * The arithmetic a backend screens candidates in. The lists never depend on it: candidates are
 * re-scored in double and certified against the screen's rounding-error bound (rows that fail are
 * selected again with more candidates), so only the speed changes.
 */
typedef enum {
  KNNWB_SCREEN_AUTO, /**< FP16 on the GPU for k <= 256; on the CPU BF16 for k <= 256 where the
                          CPU has BF16 instructions (and knnwb has oneDNN), except euclidean
                          and cosine; FP32 otherwise (and for the CPU's re-selected rows) */
  KNNWB_SCREEN_FP32, /**< float32 FMA: bound (d + 16) 2^-23 on unit rows */
  KNNWB_SCREEN_TF32, /**< GPU tensor cores, TF32 inputs: bound about 2^-9 on unit rows */
  KNNWB_SCREEN_FP16, /**< GPU tensor cores, scaled FP16 rows: bound about 2^-10 on unit rows */
  KNNWB_SCREEN_BF16  /**< CPU AVX512_BF16 or AMX (oneDNN), BF16 rows: bound about 2^-7 */
} KnnwbScreen;

/* The names of KnnwbMetric, KnnwbBackend and KnnwbScreen (<knnwb/enum_names.h>). */
/* clang-format off */
#define KNNWB_METRIC_NAMES(X)                                                                      \
  X(KNNWB_METRIC_PEARSON, "pearson")                                                               \
  X(KNNWB_METRIC_ABS_PEARSON, "abs-pearson")                                                       \
  X(KNNWB_METRIC_SPEARMAN, "spearman")                                                             \
  X(KNNWB_METRIC_EUCLIDEAN, "euclidean")                                                           \
  X(KNNWB_METRIC_MANHATTAN, "manhattan")                                                           \
  X(KNNWB_METRIC_COSINE, "cosine")
#define KNNWB_BACKEND_NAMES(X)                                                                     \
  X(KNNWB_BACKEND_AUTO, "auto")                                                                    \
  X(KNNWB_BACKEND_CPU, "cpu")                                                                      \
  X(KNNWB_BACKEND_CUDA, "cuda")
#define KNNWB_SCREEN_NAMES(X)                                                                      \
  X(KNNWB_SCREEN_AUTO, "auto")                                                                     \
  X(KNNWB_SCREEN_FP32, "fp32")                                                                     \
  X(KNNWB_SCREEN_TF32, "tf32")                                                                     \
  X(KNNWB_SCREEN_FP16, "fp16")                                                                     \
  X(KNNWB_SCREEN_BF16, "bf16")
/* clang-format on */

/** The tables of KnnwbMetric, KnnwbBackend and KnnwbScreen. */
extern const KnnwbEnumTable knnwb_metric_table;
extern const KnnwbEnumTable knnwb_backend_table;
extern const KnnwbEnumTable knnwb_screen_table;

/** Parses "pearson", "abs-pearson", "spearman", "euclidean", "manhattan", "cosine". */
gboolean knnwb_metric_from_string(const char *name, KnnwbMetric *metric, GError **error);
/** The name knnwb_metric_from_string accepts. */
const char *knnwb_metric_to_string(KnnwbMetric metric);
/** Parses "auto", "cpu", "cuda". */
gboolean knnwb_backend_from_string(const char *name, KnnwbBackend *backend, GError **error);
/** Parses "auto", "fp32", "tf32", "fp16", "bf16". */
gboolean knnwb_screen_from_string(const char *name, KnnwbScreen *screen, GError **error);
/** The name knnwb_screen_from_string accepts. */
const char *knnwb_screen_to_string(KnnwbScreen screen);

/**
 * Progress callback: done of total tiles. Called from one thread at a time, at most ~10 times a
 * second. It must be cheap.
 */
typedef void (*KnnwbProgressFunc)(uint64_t done, uint64_t total, void *data);

/** A kNN run's options. Initialise with knnwb_knn_options_init(); each field has a safe default. */
typedef struct {
  KnnwbMetric metric;         /**< default pearson */
  size_t k;                   /**< neighbours per row, 1 <= k <= (reference rows - self) */
  KnnwbBackend backend;       /**< default auto */
  KnnwbScreen screen;         /**< screening precision; default auto (manhattan: always fp32) */
  int n_threads;              /**< CPU threads; 0 = all cores; clamped to knnwb_thread_limit() */
  size_t memory_bytes;        /**< CPU working-memory budget for tiles; 0 = 256 MiB */
  size_t gpu_memory_bytes;    /**< per-GPU budget; 0 = 90% of free memory */
  const int *devices;         /**< GPU ordinals; NULL = all visible */
  int n_devices;              /**< length of devices */
  gboolean drop_degenerate;   /**< constant rows (pearson/spearman) or zero rows (cosine): warn and
                                   give them no edges, instead of failing */
  KnnwbProgressFunc progress; /**< optional */
  void *progress_data;
  /** Optional: the run stops with KNNWB_ERROR_CANCELLED once *cancel != 0. */
  const volatile gint *cancel;
  const char *data_name; /**< what warnings call the data (its file name, say); NULL: "data" */
  /** Ranks computing this run together (NULL: this process alone). With a group of
   * size > 1 the call is collective: every rank passes the same matrices and options, gets the
   * same lists (or the same error) and each computes its share: the self graph's tiles, the query
   * rows' panels. */
  const KnnwbKnnGroup *group;
  /** With a group: return only this rank's rows (knnwb_knn_group_rows; first_row in the result)
   * instead of every row on every rank. For writers that write each rank's rows in place. */
  gboolean group_own_rows;
  /** With a group of size > 1: split memory. Each rank passes only its own block of rows: the
   * blocks of ranks 0, 1, ... in order make the whole matrix (any sizes, empty ones too; the
   * even shares of knnwb_knn_group_rows balance the work best; for a query run, blocks of the
   * query and of the reference matrix) and no rank ever holds more than its
   * block, one visiting block and the lists of its rows: the blocks travel between ranks (each
   * pair of blocks scored once for both sides on the CPU backend) and the candidates of a rank's
   * rows come back to it. The lists are those of one process, byte for byte; group_own_rows
   * decides whether each rank gets its rows or every row. Exact duplicate rows are not collapsed
   * in this mode (many copies of one row cost re-selection rounds instead). Not for a prepared
   * reference (knnwb_knn_reference_query). Per rank, with m = n / R rows: about (R/2) m^2 d
   * arithmetic on the CPU (twice that on backends that score only query rows, such as CUDA),
   * memory about 4 m d floats (its rows, their prepared copy, a visiting block's scored and exact
   * rows) plus m x kc candidates; R/2 block transfers. Errors as knnwb_knn_self. */
  gboolean group_split;
  /** With group_split, a self graph: the ranks may put their blocks together when the rows are
   * clustered enough that the partitioned search (cluster by cluster) pays, as one process would
   * choose it on the same sample of rows, and every rank has room for all rows and the lists
   * (at most half of its share of the host's memory). The split search compares every pair of
   * blocks; on clustered rows the partitioned one skips most pairs (50 clusters of 400,000 rows: 7x
   * faster, with less memory a rank than the split search's candidates). Where every rank
   * computes on GPUs, the ranks put their rows together whatever they are, given the room, and the
   * whole-input search runs (the GPUs score a visiting pair of blocks as two panels; the whole
   * rows' tiles are shared and scored once). Not for rows with absent values or ranks as read
   * (spearman). Blocks of any sizes; the lists are the same bytes. FALSE: each rank never holds
   * more than its block. */
  gboolean group_split_gather;
  /** Optional: called at most once, from the calling thread, with input_done_data, once the search
   * will no longer read the values (nor the row ranks) of the query rows it was given, so that
   * the caller may free them before the search returns (knnwb_matrix_release_values); their
   * labels, n_rows and n_cols may still be read. Today only a split self run (group_split) whose
   * ranks share a host window calls it, once it reads its own rows from their packed copy there;
   * any other run never does. For knnwb_knn_self and knnwb_knn_graph (which passes its options on)
   * only: other functions that take options search rows of their own or read the rows again after
   * their search, so leave it NULL there. NULL (zero-initialised options): nothing is called. */
  void (*input_done)(void *data);
  void *input_done_data;
} KnnwbKnnOptions;

/** Whether a run with options would compute on GPUs (the cuda backend, or auto with a usable
 * GPU). Never fails; O(1) after the first call. */
gboolean knnwb_knn_uses_gpu(const KnnwbKnnOptions *options);
/** As knnwb_knn_uses_gpu, without waiting for a GPUs' start under way (knnwb_knn_devices_start):
 * while CUDA's driver initialises, TRUE (a driver that initialises has GPUs to count) unless
 * CUDA_VISIBLE_DEVICES hides them all. For choices that only the speed depends on.
 * KNNWB_GPU_START_WAIT=1 waits for the answer instead (to measure). Never fails; O(1). */
gboolean knnwb_knn_expects_gpu(const KnnwbKnnOptions *options);

/**
 * For a process whose every kNN run takes the GPUs devices lists (n_devices ordinals of the visible
 * ones, as --devices gives them): makes them all CUDA's driver will show, so that it starts only
 * those (CUDA_VISIBLE_DEVICES narrowed; 0.05 s against 0.45 s for two H200s), and then rewrites
 * devices to 0 to n_devices - 1, what they are called from then on. Returns whether it did; FALSE
 * changes nothing (the driver was started or the GPUs counted already, KNNWB_GPU_NARROW=0, the
 * GPUs cannot be counted without the driver, an ordinal is repeated or not visible, or the list is
 * every GPU in order). Call before any other GPU call of the process. Never fails.
 */
gboolean knnwb_knn_devices_narrow(int *devices, int n_devices);
/**
 * Begins starting the GPUs a run with options may use (CUDA's driver, then every GPU's context at
 * once, on helper threads: 0.3 s on one H200, 1 s on four) and returns at once, so that the
 * caller reads its input meanwhile. Nothing with the cpu backend or without CUDA; once per
 * process. The next search waits for it. Never fails (what it cannot start, the search reports).
 * A caller that may exit without a search calls knnwb_knn_devices_wait first.
 */
void knnwb_knn_devices_start(const KnnwbKnnOptions *options);
/**
 * knnwb_knn_devices_start (nothing for rows that a k-d tree on the CPU searches: a few columns),
 * and the GPUs' timed choice of their tile GEMM for a self search of
 * n_rows x n_cols rows with options (which knnwb_knn_self begins itself once it has the rows), for
 * a caller that knows the shape before the values: an NPY's header (KnnwbReadOptions.shape_known),
 * so that the choice (0.25-0.45 s on an H200: the driver, the context, about 20 GEMMs) overlaps
 * the read. A search of that shape then finds it under way or made; a search of another shape
 * waits for it first. Nothing where knnwb_knn_self would not time a GEMM (the cpu backend, small
 * or non-FP16 runs, --gpu-memory). Returns at once; never fails; the lists do not depend on it.
 */
void knnwb_knn_devices_prepare(const KnnwbKnnOptions *options, size_t n_rows, size_t n_cols);
/** Waits for the work of knnwb_knn_devices_start (returns at once when there is none). */
void knnwb_knn_devices_wait(void);
/** Whether this process started CUDA and found a GPU (so that its exit tears GPU contexts down).
 * Waits for knnwb_knn_devices_start's work. Never fails. */
gboolean knnwb_knn_devices_started(void);
/**
 * Begins giving back the GPUs this process started (their contexts reset, device and pinned
 * memory freed) on helper threads and returns at once, so that this overlaps the caller's
 * write instead of the process's exit (0.12-0.26 s on H200s). Only for a process that makes no
 * further GPU call: a later search on the cuda backend is undefined. Nothing when no GPU was
 * started or with KNNWB_GPU_RELEASE=0. Never fails.
 */
void knnwb_knn_devices_release(void);
/** Waits for knnwb_knn_devices_release's work (at once when there is none). */
void knnwb_knn_devices_release_wait(void);

/** Fills options with defaults (pearson, k = 10, auto backend, all threads, 256 MiB). */
void knnwb_knn_options_init(KnnwbKnnOptions *options);

/**
 * Neighbour lists: for query row i, indices[i*k + r] is its r-th nearest reference row (0-based)
 * and distances[i*k + r] the exact distance (computed in double). Lists are sorted by (distance,
 * index): ties break by the lower index. A row without neighbours (a dropped degenerate row) has
 * n_found[i] < k and its unused slots hold index -1 and distance +inf.
 */
typedef struct {
  size_t n_queries;
  size_t k;
  int64_t *indices;
  double *distances;
  int32_t *n_found;
  char *backend_used;      /**< "cpu" or "cuda:N" (number of GPUs), for reports */
  size_t first_row;        /**< the lists are of rows first_row .. first_row + n_queries - 1 (not 0
                                only for a group run with group_own_rows) */
  KnnwbScreen screen_used; /**< the screening precision the run used (never auto) */
  size_t n_reselected;     /**< rows the certificate sent back for a wider selection (all rounds) */
  size_t n_exhaustive;     /**< of those, rows finally compared with every row: their windows held
                                a large part of all rows (dense ties), see knnwb_knn_self */
} KnnwbNeighbors;

void knnwb_neighbors_free(KnnwbNeighbors *neighbors);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbNeighbors, knnwb_neighbors_free)

/**
 * The lists of a group run with group_own_rows (each rank's own rows, its block; the blocks in
 * rank order make all rows) gathered on rank 0 alone, for the outputs rank 0 builds a graph for:
 * rank 0 gets every row's lists in *all, the other ranks NULL and hold nothing more than their
 * own. Collective. Errors: KNNWB_ERROR_NO_MEMORY (rank 0's allocation, on every rank), the
 * group's transport errors. Memory: n x k x 20 bytes on rank 0.
 */
gboolean knnwb_neighbors_gather_root(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                     KnnwbNeighbors **all, GError **error);

/**
 * The kNN graph's lists: every row of data against all other rows (self excluded).
 *
 * Exact: candidates are selected in float32 (SGEMM or a blocked kernel), their distances are
 * recomputed in double, and a rounding-error bound certifies that no row outside the candidates can
 * be nearer; rows that cannot be certified (for example many exact ties) are recomputed by brute
 * force in double. So every backend, thread count and memory budget gives identical lists.
 *
 * Errors: KNNWB_ERROR_INVALID_ARGUMENT (k out of range), KNNWB_ERROR_INVALID_DATA (NaN/Inf, or a
 * degenerate row naming it), KNNWB_ERROR_NO_MEMORY (size overflow or allocation),
 * KNNWB_ERROR_DEVICE, KNNWB_ERROR_CANCELLED. Complexity: O(n^2 d / 2) arithmetic (each tile pair
 * once), O(n k + n d) memory plus the tile budget.
 */
gboolean knnwb_knn_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                        KnnwbNeighbors **result, GError **error);

/**
 * The k nearest reference rows of every query row (no self exclusion). Same contract as
 * knnwb_knn_self; query and reference must have the same number of columns.
 * Complexity: O(nq nr d) arithmetic.
 */
gboolean knnwb_knn_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                         const KnnwbKnnOptions *options, KnnwbNeighbors **result, GError **error);

/**
 * A reference set prepared once for many knnwb_knn_query calls (a breadth-first search through
 * the kNN graph queries a few rows per round against the same rows): the finiteness check and the
 * metric's preparation (centring, norms, ranks: O(n d)) are done here, not per query. The matrix
 * must outlive the prepared reference and stay unchanged.
 * Errors: as knnwb_knn_query (NaN/Inf, degenerate rows unless options->drop_degenerate,
 * KNNWB_ERROR_NO_MEMORY). Memory: one prepared copy of the rows (two for spearman).
 */
typedef struct KnnwbKnnReference KnnwbKnnReference;
KnnwbKnnReference *knnwb_knn_reference_new(const KnnwbMatrix *reference,
                                           const KnnwbKnnOptions *options, GError **error);
/**
 * knnwb_knn_query(query, the prepared rows, options), with identical lists. options->metric and
 * drop_degenerate must be those the reference was prepared with (KNNWB_ERROR_INVALID_ARGUMENT
 * otherwise); k, backend, threads, budgets, progress and cancel may differ per call.
 */
gboolean knnwb_knn_reference_query(const KnnwbKnnReference *reference, const KnnwbMatrix *query,
                                   const KnnwbKnnOptions *options, KnnwbNeighbors **result,
                                   GError **error);
void knnwb_knn_reference_free(KnnwbKnnReference *reference);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbKnnReference, knnwb_knn_reference_free)

/**
 * The exact distance between two rows (double precision), as knnwb reports it. For tests and tools.
 */
double knnwb_distance_exact(KnnwbMetric metric, const float *x, const float *y, size_t d);

/**
 * Rows made ready for many exact distance evaluations (per-row means, norms and, for spearman,
 * ranks computed once): knnwb_exact_rows_distance(rows, i, j) equals
 * knnwb_distance_exact(metric, row i, row j) bit for bit, in O(d) instead of O(d log d).
 * Errors: as knnwb_knn_self for degenerate rows (constant / zero rows) and allocation.
 * Memory: O(n d) floats (the prepared copy) plus O(n) doubles.
 */
typedef struct KnnwbExactRows KnnwbExactRows;
KnnwbExactRows *knnwb_exact_rows_new(const KnnwbMatrix *data, KnnwbMetric metric, int n_threads,
                                     GError **error);
double knnwb_exact_rows_distance(const KnnwbExactRows *rows, size_t i, size_t j);
void knnwb_exact_rows_free(KnnwbExactRows *rows);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbExactRows, knnwb_exact_rows_free)

/**
 * Repeated "nearest row in another group" searches over one point set (the exact MST's Borůvka
 * rounds): the rows are prepared once; each run answers, for the given rows, the nearest row
 * whose group differs, exactly (double distances, certified like knnwb_knn_self, ties to the lower
 * index), with the backend's GEMM speed (options: metric, backend, threads, memory, devices,
 * cancel; k is ignored).
 * Errors: as knnwb_knn_self (degenerate rows are an error), KNNWB_ERROR_INVALID_ARGUMENT.
 */
typedef struct KnnwbOutsideSearch KnnwbOutsideSearch;
KnnwbOutsideSearch *knnwb_outside_search_new(const KnnwbMatrix *data,
                                             const KnnwbKnnOptions *options, GError **error);
/**
 * group: n_rows(data) ids in [0, n); rows: the n_rows query rows. out_index[t] (or -1 when every
 * row shares the group of rows[t]) and out_distance[t] (+inf then) receive the answers.
 * Complexity: O(n_rows n d) arithmetic per run (plus rare re-selections for exact ties). Rows of
 * a few columns go through a k-d tree instead (about O(log n d) a row), and on the CPU rows of many
 * columns, from 20,000 rows and 512 asked, through cells of the rows that pass over whole clusters
 * far from the row (O(d) for each row of the cells it cannot rule out), where a pilot of 128 rows
 * says that pays. The answers are the same bits on every path.
 */
gboolean knnwb_outside_search_run(KnnwbOutsideSearch *search, const int32_t *group,
                                  const int64_t *rows, size_t n_rows, int64_t *out_index,
                                  double *out_distance, GError **error);
void knnwb_outside_search_free(KnnwbOutsideSearch *search);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(KnnwbOutsideSearch, knnwb_outside_search_free)

/** The most threads knnwb runs at once, whatever is asked for. */
#define KNNWB_THREADS_MAX 1024

/**
 * The most CPU threads one knnwb computation starts: 4 per online CPU (g_get_num_processors),
 * at most KNNWB_THREADS_MAX. More only cost memory (a stack each) and switching, and a number
 * such as 100000 would fail to start.
 */
int knnwb_thread_limit(void);

/**
 * The threads to use for a request of n_threads: 0 (or less) = the CPUs this process may run on
 * (its CPU affinity at the first call: a cpuset or an MPI rank's binding narrows it); more than
 * knnwb_thread_limit() is clamped to it with one warning per process (g_warning). A request for
 * more threads than the affinity allows, when that is narrower than the machine (a bound MPI rank),
 * is kept, with one warning per process.
 */
int knnwb_thread_count(int n_threads);

G_END_DECLS

#endif
