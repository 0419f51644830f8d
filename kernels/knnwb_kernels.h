/*
 * The plain C interface of everything in kernels/ (CUDA). Nothing outside kernels/ includes CUDA
 * headers; core and clustering call these launchers. When knnwb is built without CUDA, core/
 * provides stand-ins that report "not built with CUDA".
 */
#ifndef KNNWB_KERNELS_H
#define KNNWB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** How many int64 values describe a plan in KnnwbSelectJob.share_plan. */
#define KNNWB_SELECT_SHARE_PLAN_VALUES 4

/**
 * Score of a (query, reference) pair computed in float32 by a backend; smaller is nearer. The
 * exact double distance is recomputed afterwards by core, which also certifies the selection with
 * a rounding-error bound, so a backend only has to find the kc smallest scores per query row.
 */
typedef enum {
  KNNWB_SCORE_DOT = 0,     /* 1 - q.r          (rows already centred/normalised by core) */
  KNNWB_SCORE_ABS_DOT = 1, /* 1 - |q.r| */
  KNNWB_SCORE_L2 = 2,      /* |r|^2 - 2 q.r    (|q|^2 omitted: constant per query row) */
  KNNWB_SCORE_L1 = 3       /* sum |q - r| */
} KnnwbScoreKind;

/**
 * The exact distance formulas of core (knnwb_pair_distance), which a backend may evaluate for its
 * selected candidates: correlation-like metrics (pearson, spearman on ranks, cosine with zero
 * means) give 1 - r or 1 - |r| with r = sum (x - mx)(y - my) / sqrt(ssx ssy); the others the plain
 * euclidean or manhattan distance. All in double, eight lanes summed in core's fixed order, so a
 * backend that evaluates them returns core's bits.
 */
typedef enum {
  KNNWB_EXACT_CORRELATION = 0,
  KNNWB_EXACT_ABS_CORRELATION = 1,
  KNNWB_EXACT_EUCLIDEAN = 2,
  KNNWB_EXACT_MANHATTAN = 3
} KnnwbExactKind;

/**
 * The arithmetic a backend screens scores in (the exact distances never depend on it: core
 * certifies the candidates against the screen's error bound, knnwb_screen_slack in core). The
 * manhattan kind is always screened in float32.
 *   FP32: float32 rows, float32 FMA (no TF32);
 *   TF32: float32 rows, tensor cores with TF32 inputs, float32 accumulation;
 *   FP16: rows scaled by a power of two (so that no component overflows, see screen_row_norm)
 *         and rounded to half precision, tensor cores, float32 accumulation.
 *   BF16: (CPU backend) rows scaled by a power of two (every norm at most 1) and rounded to
 *         bfloat16, float32 accumulation (AVX512_BF16 or AMX through oneDNN).
 */
typedef enum {
  KNNWB_KERNELS_SCREEN_FP32 = 0,
  KNNWB_KERNELS_SCREEN_TF32 = 1,
  KNNWB_KERNELS_SCREEN_FP16 = 2,
  KNNWB_KERNELS_SCREEN_BF16 = 3
} KnnwbScreenPrecision;

/** Status codes of the launchers. */
enum {
  KNNWB_KERNELS_OK = 0,
  KNNWB_KERNELS_ERROR = 1,        /* a CUDA/cuBLAS call failed; message names it */
  KNNWB_KERNELS_NO_DEVICE = 2,    /* no usable GPU, or not built with CUDA */
  KNNWB_KERNELS_CANCELLED = 3,    /* *cancel became non-zero */
  KNNWB_KERNELS_OUT_OF_MEMORY = 4 /* even the smallest tiles do not fit the budget */
};

typedef void (*KnnwbKernelsProgress)(uint64_t done, uint64_t total, void *data);

/**
 * One candidate-selection job: for every query row i, the kc reference rows with the smallest
 * scores (any order, ties arbitrary) into out_index[i*kc ..] / out_score[i*kc ..].
 *
 * Contract: query is n_query x dim row-major float32, reference n_reference x dim (the same pointer
 * when self != 0, then pairs i == j are excluded and tile (i, j) may also feed the rows of j; note
 * that KNNWB_SCORE_L2 is not symmetric: seen from row j, the score of i is s(i,j) - |r_j|^2 +
 * |r_i|^2). reference_sqnorms (n_reference floats) is given for KNNWB_SCORE_L2 only.
 * reference_invalid (NULL or n_reference bytes) marks rows that must never be candidates (and, when
 * self, never queried: their outputs are ignored). kc <= number of valid references (minus one when
 * self), so every query row has kc candidates. Both matrices live in host memory (pinned or not)
 * and may be far larger than a device: implementations stream them in tiles bounded by
 * memory_bytes.
 */
/** Writes rows [first, first + count) of a source of rows (see KnnwbSelectJob.rows_fill) as count
 * x dim float32 rows into out. Called from several threads at once, for disjoint rows. */
typedef void (*KnnwbRowsFill)(const void *source, size_t first, size_t count, float *out);

typedef struct {
  const float *query;
  size_t n_query;
  const float *reference;
  size_t n_reference;
  /* Rows derived on demand: where query (reference) is NULL, a backend takes its rows [first,
   * first + count) from rows_fill(query_source, query_source_first + first, count, out)
   * (reference_source likewise), the same values the rows would hold; a self job gives the same
   * source and first on both sides. Core derives a split run's scored rows so from their exact
   * ones, so that the scored copy is never held (knnwb_select_job_rows reads either form). */
  KnnwbRowsFill rows_fill;
  const void *query_source, *reference_source;
  size_t query_source_first, reference_source_first;
  const float *reference_sqnorms;
  const unsigned char *reference_invalid;
  size_t dim;
  int score_kind; /* KnnwbScoreKind */
  int self;
  size_t kc;
  /* Screening precision (KnnwbScreenPrecision; 0 = FP32). A backend that cannot honour it fails
   * with KNNWB_KERNELS_ERROR: core's certificate assumes its bound. screen_row_norm: an upper
   * bound on the norm of every query and reference row (so on every component); FP16 scales rows
   * by 2^(14 - ceil(log2 screen_row_norm)), which keeps every component at most 2^14. */
  int screen;
  double screen_row_norm;
  /* FP16 only, non-zero: the backend may keep the tiles' scores in half precision (products
   * rescaled to magnitude at most about 1, rounded to nearest: relative error 2^-11, absolute
   * 2^-23 screen_row_norm^2 below half's normal range), halving the bytes every tile writes and
   * reads. Core's bound must then include that rounding (knnwb_screen_slack). */
  int screen_half_scores;
  /* execution */
  int n_threads;       /* host threads (CPU backend: >= 1; CUDA: of its copies and merges, at
                        * most the cores, shared by its GPUs; <= 0: every core) */
  size_t memory_bytes; /* CPU: tile budget in bytes; CUDA: per-device budget (0 = 90% of free) */
  const int *devices;  /* CUDA: ordinals, NULL = all (or the share below) */
  int n_devices;
  /* CUDA, where devices names none: this process is share of shares ranks of its host and takes
   * its share of the GPUs (knnwb_device_share); shares <= 1: every visible GPU */
  int device_share, device_shares;
  KnnwbKernelsProgress progress;
  void *progress_data;
  const volatile int *cancel;
  /* output */
  int64_t *out_index;
  float *out_score;
  /* Optional groups (NULL = none): a pair (query i, reference j) with query_group[i] ==
   * reference_group[j] is never a candidate (the exact MST's "nearest point in another component").
   * Both are given or neither. A row whose valid references are all masked pads with index -1. */
  const int32_t *query_group;
  const int32_t *reference_group;
  /* Optional exact distances (exact_query == NULL: not wanted; a backend may also decline, e.g.
   * when the rows do not fit its memory): out_distance[i*kc + t] = the exact distance (exact_kind)
   * of query i and candidate out_index[i*kc + t] (NaN where that index is -1), bit for bit as core
   * computes it; *out_distance_filled is set to 1 when they were filled, else left alone. The
   * exact rows are n_query (n_reference) x dim float32 row-major, the same pointer for self jobs;
   * the statistics are n doubles each, NULL meaning all zero. */
  int exact_kind; /* KnnwbExactKind */
  const float *exact_query;
  const float *exact_reference;
  const double *exact_query_mean;
  const double *exact_query_squares;
  const double *exact_reference_mean;
  const double *exact_reference_squares;
  double *out_distance;
  int *out_distance_filled;
  /* Optional refinement on the device, on top of the exact distances (out_k == 0: not wanted; a
   * backend may decline, e.g. when a row's candidates do not fit its sort): for every query row i,
   * its valid candidates (index >= 0, and not i itself when self) sorted by (exact distance,
   * index), the first out_k (<= kc) into out_k_index[i*out_k ..] / out_k_distance[i*out_k ..] (-1
   * and +inf past the valid ones), out_worst_score[i] = the largest score of its candidates with
   * index >= 0 (-inf when none), out_valid[i] = how many valid candidates it had: what core's
   * refine and certificate take from the kc lists, without sending them to the host. When done,
   * *out_refined is set to 1 and out_index/out_score/out_distance are not written; otherwise it
   * is left alone and the kc lists are written as without it. Rows of invalid queries (self jobs)
   * hold arbitrary values. */
  size_t out_k;
  int64_t *out_k_index;
  double *out_k_distance;
  float *out_worst_score;
  int32_t *out_valid;
  int *out_refined;
  /* Optional share of a self job's symmetric tiles (share_count <= 1: all of them): several
   * processes each run the same job with their share_index and the union of their lists holds
   * every pair once, so merging each row's lists by score gives the kc best of the whole job.
   * Rows whose share saw fewer than kc valid pairs pad with index -1. */
  int share_index;
  int share_count;
  /* Optional with a share (NULL: none): the processes' thresholds, made common. share_bounds gets
   * this process's upper bounds on each query row's kc-th best score (n_query floats, or NULL
   * when it has none to give), and when it returns non-zero has replaced each by the minimum over
   * the processes; 0 means nothing came back (leave them). It is collective: a backend calls it at
   * most share_bound_rounds times per job, from the calling thread, and its caller completes the
   * rounds a backend did not use. A bound from another process is valid here because that
   * process's lists hold kc pairs scoring at most it, and the merge keeps the best of the union. */
  int (*share_bounds)(float *bounds, size_t n, void *data);
  void *share_bounds_data;
  int share_bound_rounds;
  /* Optional with a share (NULL: none): the processes' plans, made common. A backend's split of
   * the job's pairs into shares follows its plan (schedule, tile), which each process makes from
   * its own memory, cores and devices; processes whose plans differ would score some pairs twice
   * and others never, and certify rows whose pairs were not all scored. A backend whose split
   * depends on its plan calls share_plan at most once per job, from the calling thread, before
   * any tile, with KNNWB_SELECT_SHARE_PLAN_VALUES values describing its plan (its own encoding,
   * unused ones 0, -1 for "no plan": larger values never ask for more memory); when it returns
   * non-zero each value is the minimum over the processes, and the backend runs that plan or
   * fails the job. 0: the values could not be made common (the backend fails the job). It is
   * collective, and its caller completes it (with -1s) for a backend that did not call it. */
  int (*share_plan)(int64_t *values, size_t n, void *data);
  void *share_plan_data;
  /* Optional transposed output of a job that is not self (out_reference_index == NULL: none): the
   * same tiles also give every reference row its kc best query rows (indices into the query rows,
   * padded with -1 when fewer are valid), into out_reference_index/out_reference_score (n_reference
   * x kc), so a block pair of a distributed self graph is scored once for both sides. Seen from
   * reference row j, the KNNWB_SCORE_L2 score of query i is s(i, j) - |r_j|^2 + |q_i|^2, hence
   * query_sqnorms (n_query floats, L2 only); query_invalid (NULL or n_query bytes) marks query rows
   * that are never candidates. The CPU backend honours it; the CUDA backend honours the refined
   * form below instead. */
  int64_t *out_reference_index;
  float *out_reference_score;
  const float *query_sqnorms;
  const unsigned char *query_invalid;
  /* Optional refined transposed output (out_reference_refined == NULL: none), asked together with
   * the query rows' refine (out_k > 0, exact distances): every reference row's k best query rows
   * as out_k_* gives the query rows' (indices into the query rows; the exact distance is the
   * reference row's to the query row, that row first, bit for bit as core computes it;
   * query_sqnorms and
   * query_invalid as above), into out_reference_k_index / out_reference_k_distance (n_reference x
   * out_k), out_reference_worst_score and out_reference_valid (n_reference); both sides start from
   * query_bounds / reference_bounds. When done, *out_reference_refined and *out_refined are set
   * to 1. The CUDA backend does it on one GPU whose memory holds both sides' rows and lists, each
   * tile scored once for both sides (a pair of blocks costs one panel, not two); otherwise it
   * leaves *out_reference_refined alone and runs the job for its query rows only, and the caller
   * runs the reference side as a job of its own. The CPU backend ignores it. */
  int64_t *out_reference_k_index;
  double *out_reference_k_distance;
  float *out_reference_worst_score;
  int32_t *out_reference_valid;
  int *out_reference_refined;
  /* Optional, with the refinement (out_refined_take == NULL: none): the refined lists handed to
   * out_refined_take piece by piece as they come off the device, instead of written into out_k_*
   * and out_reference_k_* (which may then be NULL), so that the caller merges them where they
   * belong without arrays for all rows. Each call gives the rows [first, first + count) of side 0
   * (query rows) or 1 (reference rows of a two-sided job), laid out as out_k_* would hold those
   * rows (count x out_k indices and distances, count worst scores and valid counts), valid only
   * during the call. Calls come from the backend's threads, several at once for disjoint rows;
   * every row of a side comes exactly once when *out_refined (*out_reference_refined) is set. A
   * job whose status is not OK may have handed some rows already; the backend never runs such a
   * job again by itself. A backend that cannot hand rows over declines the refinement (the CPU
   * backend never refines). */
  void (*out_refined_take)(void *data, int side, size_t first, size_t count, const int64_t *index,
                           const double *distance, const float *worst, const int32_t *valid);
  void *out_refined_take_data;
  /* Optional starting thresholds (NULL: none): a pair whose score (as seen from the row) is not
   * below query_bounds[i] (n_query floats) or, for the transposed output, reference_bounds[j]
   * (n_reference floats) need not become a candidate of that row, so its list may hold fewer than
   * kc (padded with -1). Core gives the kc-th best score a row already holds from other rows, so
   * the pairs left out could never enter its merged list. The CPU backend honours them, the CUDA
   * backend for query jobs (its panels start from them); a backend may ignore them (its lists are
   * then simply longer). Never NaN. */
  const float *query_bounds;
  const float *reference_bounds;
  /* Optional grouping of a self job's rows (order_cells == 0: none): order_cells centroids
   * (order_cells x dim floats, in the space of the rows as given; core's row_order.c). A backend
   * may visit the rows grouped by their nearest centroid, so that each row's first tiles hold its
   * near rows and its threshold tightens early; it changes nothing else: every output is indexed
   * and ordered as without it. The CUDA backend honours it for resident self jobs of one process
   * without groups, under the FP16 screen, with room for a second copy of the rows
   * (knnwb_select_plan_groups_rows); others ignore it. */
  const float *order_centroids;
  size_t order_cells;
} KnnwbSelectJob;

/** The job's rows [first, first + count) of side 0 (query) or 1 (reference): a pointer into the
 * rows given, or, where they are derived (rows_fill), scratch (count x dim floats) filled. O(count
 * dim) when derived, O(1) otherwise. */
static inline const float *knnwb_select_job_rows(const KnnwbSelectJob *job, int side, size_t first,
                                                 size_t count, float *scratch)
{
  const float *rows = side ? job->reference : job->query;
  if (rows != NULL)
    return rows + first * job->dim;
  job->rows_fill(side ? job->reference_source : job->query_source,
                 (side ? job->reference_source_first : job->query_source_first) + first, count,
                 scratch);
  return scratch;
}

/** Whether a job's rows are derived (rows_fill) rather than given. O(1). */
static inline int knnwb_select_job_derived(const KnnwbSelectJob *job)
{
  return job->query == NULL && job->rows_fill != NULL;
}

/** Whether a job's query rows are its reference rows (a self job, or the same rows given twice).
 * O(1). */
static inline int knnwb_select_job_same(const KnnwbSelectJob *job)
{
  if (job->self)
    return 1;
  if (!knnwb_select_job_derived(job))
    return job->query == job->reference;
  return job->query_source == job->reference_source &&
         job->query_source_first == job->reference_source_first && job->n_query == job->n_reference;
}

/** Non-zero when knnwb_cuda_select honours query_group/reference_group. */
int knnwb_cuda_select_supports_groups(void);

/** Number of usable CUDA devices (0 when none, or when not built with CUDA). Never fails. Waits
 * for the driver's initialisation of a start begun by knnwb_cuda_start (not for its contexts);
 * the count is the process's first (as CUDA's own). */
int knnwb_cuda_device_count(void);
/** As knnwb_cuda_device_count, but -1 at once while a start is still initialising the driver
 * (KNNWB_GPU_START_WAIT=1: waits, as knnwb_cuda_device_count does then). */
int knnwb_cuda_device_count_now(void);

/**
 * The GPUs that rank share of shares ranks of one host takes where its run names none, of the
 * visible ones (ordinals 0 to visible - 1): every one when shares <= 1; with at least as many GPUs
 * as ranks a contiguous block each, as even as the count allows (2 ranks of 4 GPUs: 0 1 | 2 3);
 * with fewer, one each, round robin (4 ranks of 2: 0 | 1 | 0 | 1), so ranks take turns on a GPU
 * only where they must. Fills the first max of them into ordinals and returns how many there are
 * (0 when visible <= 0). Host-only, O(visible).
 */
int knnwb_device_share(int share, int shares, int visible, int *ordinals, int max);
/**
 * CUDA_VISIBLE_DEVICES narrowed to rank share of shares's GPUs (knnwb_device_share), so that the
 * driver starts only those: of visible's entries (the variable's value, up to its first empty
 * entry: "0,1", "GPU-<uuid>,...", MIG names alike), or where visible is NULL of GPUs "0" to
 * "count - 1". NULL (nothing to narrow) when shares <= 1, share is out of range, or there are fewer
 * than two entries; else a string to free(). Host-only, O(length).
 */
char *knnwb_device_share_visible(const char *visible, int count, int share, int shares);
/**
 * CUDA_VISIBLE_DEVICES narrowed to the n GPUs ordinals lists, in that order, of those visible shows
 * (as knnwb_device_share_visible). NULL (nothing to narrow) when n <= 0, an ordinal is not among
 * them or is listed twice (CUDA refuses an entry twice), or the list is every one in order; else a
 * string to free(). Host-only, O(n^2 + length).
 */
char *knnwb_device_visible_of(const char *visible, int count, const int *ordinals, int n);
/**
 * Makes the n_devices GPUs devices lists (ordinals of the visible ones) all the driver will show,
 * in that order, by narrowing CUDA_VISIBLE_DEVICES (knnwb_device_visible_of): they are then
 * ordinals 0 to n_devices - 1, and the driver starts only those. Returns 1 when it did; 0, with
 * nothing changed, where the process has counted or started its GPUs or its driver already,
 * KNNWB_GPU_NARROW is 0, the visible GPUs cannot be counted without the driver (as
 * knnwb_cuda_start), or knnwb_device_visible_of has nothing to narrow. For a process whose every
 * run names these GPUs: call once, before anything else asks CUDA.
 */
int knnwb_cuda_narrow_to(const int *devices, int n_devices);
/**
 * knnwb_device_share of the visible GPUs (knnwb_cuda_device_count, whose wait it shares); every
 * visible GPU once a start narrowed what the driver shows to the share (knnwb_cuda_start).
 */
int knnwb_cuda_share_devices(int share, int shares, int *ordinals, int max);

/**
 * Begins the driver's initialisation and the contexts of the GPUs devices lists (n_devices
 * ordinals; devices NULL: the first n_devices; n_devices 0: the visible GPUs of rank share of
 * shares of this host, knnwb_device_share, all of them when shares <= 1) on helper threads, and
 * returns at once. A share (n_devices 0, shares > 1) is first made all the driver will see, by
 * narrowing CUDA_VISIBLE_DEVICES (knnwb_device_share_visible), where nothing in the process has
 * started the driver yet, the GPUs are known without it (the variable's entries, else the
 * driver's folders in /proc that match the device files this process may open) and
 * KNNWB_GPU_NARROW is not 0: the driver then starts one GPU's worth (0.05 s against 0.45 s with
 * two H200s visible). Once per process; never fails (what it cannot do, the select does later).
 * Call knnwb_cuda_start_wait (or knnwb_cuda_device_count) before the call that began it returns,
 * so that no start outlives it.
 */
void knnwb_cuda_start(const int *devices, int n_devices, int share, int shares);
/** Waits for a start begun by knnwb_cuda_start (at once when none). */
void knnwb_cuda_start_wait(void);
/** Non-zero when this process initialised CUDA's driver and found a GPU (knnwb_cuda_start or
 * knnwb_cuda_device_count ran): its exit then tears contexts down. Waits for a start. */
int knnwb_cuda_started(void);
/**
 * NULL when cuBLAS and cuBLASLt are loaded (the first call loads them, or waits for the GPUs'
 * start that loads them), else why they cannot be: a GPU run needs them. Thread-safe.
 */
const char *knnwb_cuda_blas_missing(void);
/**
 * Begins giving back every GPU this process started (knnwb_cuda_started): each primary context is
 * reset on a helper thread, which frees its device memory, and the pinned staging pool is freed;
 * returns at once. For a process that makes no further CUDA call of any kind (every pointer,
 * handle and choice made before becomes invalid). Nothing with KNNWB_GPU_RELEASE=0, when no GPU
 * was started, or once begun. Never fails.
 */
void knnwb_cuda_release_begin(void);
/** Waits for the release begun by knnwb_cuda_release_begin (at once when none). */
void knnwb_cuda_release_wait(void);
/**
 * Begins, on helper threads (one a GPU), the timed choice of the tile GEMM that a search of
 * n_query x n_reference rows of dim columns under an FP16 screen makes before its first tile, on
 * the GPUs devices lists (or the share's, as knnwb_cuda_start), so that the search finds it made:
 * 0.15-0.19 s of every GPU run on an H200, mostly cuBLAS loading its kernels. Returns at once;
 * waits first for a choice begun before. Does nothing where such a run makes no timed choice
 * (fewer than KNNWB_SELECT_CHOOSE_MIN_TILES full tiles), for a shape already chosen, or with
 * KNNWB_CUDA_GEMM_START=0. Never fails (nothing of it can fail a search); takes a tile of GPU
 * memory (512 MiB at tiles of 16,384) until done. knnwb_cuda_select waits for it; call
 * knnwb_cuda_gemm_start_wait before the call that began it returns.
 */
void knnwb_cuda_gemm_start(const int *devices, int n_devices, int share, int shares, size_t n_query,
                           size_t n_reference, size_t dim);
/** Waits for a choice begun by knnwb_cuda_gemm_start (at once when none). */
void knnwb_cuda_gemm_start_wait(void);
/**
 * Begins, on a helper thread, the upload of a self search's n x dim scored rows to GPU device as an
 * FP16 screen's resident rows (scaled by the power of two that screen_row_norm gives, rounded to
 * halves, padded to knnwb_select_plan_dpad), while core still samples them before its select
 * (kernels/rows_start.cu). The next knnwb_cuda_select whose job has these rows, resident in half
 * precision on that one GPU, takes them instead of uploading; any other select frees them first.
 * rows must stay unchanged and allocated until then, or until knnwb_cuda_rows_start_drop. Returns
 * at once; drops rows begun before. Never fails (the select uploads what this could not). Nothing
 * with KNNWB_CUDA_ROWS_START=0. Holds n x dpad halves of GPU memory until taken or dropped.
 */
void knnwb_cuda_rows_start(int device, const float *rows, size_t n, size_t dim,
                           double screen_row_norm);
/** Stops rows begun by knnwb_cuda_rows_start at their next chunk (a cancelled search waits for one
 * chunk, not for gigabytes), waits for that, and frees them unless a select took them (at once
 * when none). The calling thread's current device is left as it was. */
void knnwb_cuda_rows_start_drop(void);
/** Non-zero when this process has made the tile GEMM's choice on GPU device for the shape of
 * knnwb_cuda_gemm_start's arguments (by knnwb_cuda_gemm_start or a search). */
int knnwb_cuda_gemm_known(int device, size_t n_query, size_t n_reference, size_t dim);
/** The free memory of GPU `device` now, in bytes, with what a keep scope holds for reuse; 0 when
 * it cannot be known (no CUDA, no such device, an error). Makes that device current on the
 * calling thread. */
size_t knnwb_cuda_free_bytes(int device);

/**
 * Opens a keep scope: until the matching knnwb_cuda_keep_end, the searches of this process keep
 * their GPU memory and cuBLAS handles when they end, for the next search on the same GPU to reuse
 * (kernels/device_keep.h: a partitioned run's sub-searches each paid about twenty allocations and
 * frees, two library handles, and frees that wait for the whole GPU). Scopes nest and may be
 * opened from any thread; what is kept counts as free memory (knnwb_cuda_free_bytes) and is freed
 * when an allocation would otherwise fail. Never fails.
 */
void knnwb_cuda_keep_begin(void);
/** Closes a keep scope (one without a scope is ignored); the last one frees what was kept, and
 * searches still running then free theirs when they end. */
void knnwb_cuda_keep_end(void);

/**
 * The partitioned search's bounds pass on one GPU (kernels/partition_bounds.cu; core's own pass is
 * core/partition/partition_visits.c): for each of n_rows rows, the groups of cells it must still
 * visit. Row r visits group g (not its own cell's) when a cell j of g is ruled out neither by the
 * triangle test on the centroids' gaps (gap NULL: no such test) nor by the row's lower bound to
 * centroid j less radius[j] against limit[r]. Every value is computed with core's operations in
 * core's order and rounding (partition_space.c, partition_dots.c), so the visits are core's bit
 * for bit.
 *
 * Contract: values is n_rows x dim float32 in host memory, the rows as read; space says how core
 * maps them to the bound space (KnnwbBoundSpace); cell (n_rows) each row's cell; limit (n_rows)
 * each row's chord limit (+inf allowed); centroid (m x dim), centroid_sq, radius, group_of (m
 * each), gap (m x m or NULL) as core's partition holds them; margin_factor core's rounding margin
 * per unit of squared norm. visits (n_rows x ceil(groups / 64) words, host) receives the row's
 * groups as bits: bit g % 64 of word g / 64. Rows stream through the GPU in chunks of 32 MiB of
 * values, two at a time (each pinned on the host and on the GPU, with its visits). Status:
 * KNNWB_KERNELS_ERROR with a message for a row that has no direction or a value that is not
 * finite (core's pass refuses them alike) or a failed CUDA call, KNNWB_KERNELS_CANCELLED when
 * *cancel becomes non-zero between chunks; visits is then undefined. O(n_rows m dim) work.
 */
typedef enum {
  KNNWB_BOUND_SPACE_PLAIN = 0,   /* euclidean: the rows as they are */
  KNNWB_BOUND_SPACE_CENTRED = 1, /* the pearson family: centred, scaled to norm 1 */
  KNNWB_BOUND_SPACE_SCALED = 2,  /* cosine: scaled to norm 1 */
  KNNWB_BOUND_SPACE_ABS = 3      /* abs-pearson: centred and scaled; the nearer of c and -c */
} KnnwbBoundSpace;

typedef struct {
  const float *values;
  size_t n_rows, dim;
  int space; /* KnnwbBoundSpace */
  const int32_t *cell;
  const double *limit;
  size_t m, groups;
  const double *centroid, *centroid_sq, *radius, *gap;
  const int32_t *group_of;
  double margin_factor;
  int device;
  const volatile int *cancel;
  uint64_t *visits;
} KnnwbBoundsJob;

int knnwb_cuda_partition_bounds(const KnnwbBoundsJob *job, char *message, size_t message_size);

/**
 * The partitioned search's assignment on one GPU (the same file; core's own is
 * core/partition/partition_build.c): each of n_rows rows' nearest of m centroids in the bound
 * space (the lowest |c|^2 - 2 v.c, ties to the lower centroid) into cell, and its reach there
 * (core's upper bound of the row's distance to that centroid) into reach, core's values bit for
 * bit. Fields and statuses as KnnwbBoundsJob's. O(n_rows m dim) work.
 */
typedef struct {
  const float *values;
  size_t n_rows, dim;
  int space; /* KnnwbBoundSpace */
  size_t m;
  const double *centroid, *centroid_sq;
  double margin_factor;
  int device;
  const volatile int *cancel;
  int32_t *cell;
  double *reach;
} KnnwbAssignJob;

int knnwb_cuda_partition_assign(const KnnwbAssignJob *job, char *message, size_t message_size);

/**
 * Runs a selection job on the GPUs. Returns a KNNWB_KERNELS_* status; on failure message (of
 * message_size bytes) says what failed, naming the CUDA/cuBLAS call.
 */
int knnwb_cuda_select(const KnnwbSelectJob *job, char *message, size_t message_size);

#ifdef __cplusplus
}
#endif

#endif
