/*
 * The kNN engine: validates a request, prepares the rows for the metric, runs a backend's
 * candidate selection (CPU or CUDA), and refines the candidates into exact, certified neighbour
 * lists. Rows the rounding bound cannot certify are selected again with four times as many
 * candidates, so exactness never depends on the float arithmetic of a backend.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include "knn_internal.h"

void knnwb_knn_options_init(KnnwbKnnOptions *options)
{
  memset(options, 0, sizeof *options);
  options->metric = KNNWB_METRIC_PEARSON;
  options->k = 10;
  options->backend = KNNWB_BACKEND_AUTO;
}

void knnwb_neighbors_free(KnnwbNeighbors *neighbors)
{
  if (neighbors == NULL)
    return;
  g_free(neighbors->indices);
  g_free(neighbors->distances);
  g_free(neighbors->n_found);
  g_free(neighbors->backend_used);
  g_free(neighbors);
}

/* The smallest k whose lists a GPU backend sorts and cuts itself (see knnwb_knn_round). */
#define KNNWB_KNN_DEVICE_REFINE_MIN_K 64

/* An invalid query row (dropped or degenerate) gets an empty list: no neighbour found. */
static void knnwb_knn_row_empty(KnnwbNeighbors *result, size_t slot, size_t k)
{
  for (size_t r = 0; r < k; r++) {
    result->indices[slot * k + r] = -1;
    result->distances[slot * k + r] = INFINITY;
  }
  result->n_found[slot] = 0;
}

typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t k, kc, available;
  const int64_t *rows; /* query row of each job row, NULL = row0 + job row */
  size_t row0;
  const int64_t *cand_index; /* job rows x kc */
  const float *cand_score;
  const double *cand_distance; /* exact distances from the backend, or NULL */
  KnnwbNeighbors *result;      /* holds rows result->first_row ... */
  unsigned char *uncertified;  /* per job row */
} KnnwbRefineLoop;

static void knnwb_refine_rows(size_t first, size_t last, void *user)
{
  KnnwbRefineLoop *loop = user;
  KnnwbNeighbors *result = loop->result;
  for (size_t t = first; t < last; t++) {
    size_t i = loop->rows ? (size_t)loop->rows[t] : loop->row0 + t;
    size_t slot = i - result->first_row;
    int64_t *out_index = result->indices + slot * loop->k;
    double *out_distance = result->distances + slot * loop->k;
    if (loop->query->invalid != NULL && loop->query->invalid[i]) {
      knnwb_knn_row_empty(result, slot, loop->k);
      loop->uncertified[t] = 0;
      continue;
    }
    gboolean ok = knnwb_refine_row(loop->query, i, loop->reference, loop->self ? (int64_t)i : -1,
                                   loop->cand_index + t * loop->kc, loop->cand_score + t * loop->kc,
                                   loop->cand_distance ? loop->cand_distance + t * loop->kc : NULL,
                                   loop->kc, loop->available, loop->k, out_index, out_distance);
    result->n_found[slot] = (int32_t)loop->k;
    loop->uncertified[t] = ok ? 0 : 1;
  }
}

/* Rows the backend refined (sorted and cut to k into result): only the certificate is left. */
typedef struct {
  const KnnwbPrepared *query, *reference;
  size_t k, available, row0;
  const float *worst;   /* per job row: the largest candidate score */
  const int32_t *valid; /* per job row: the valid candidates */
  KnnwbNeighbors *result;
  unsigned char *uncertified;
} KnnwbCertifyLoop;

static void knnwb_certify_rows(size_t first, size_t last, void *user)
{
  KnnwbCertifyLoop *loop = user;
  KnnwbNeighbors *result = loop->result;
  for (size_t t = first; t < last; t++) {
    size_t i = loop->row0 + t, slot = i - result->first_row;
    int64_t *out_index = result->indices + slot * loop->k;
    double *out_distance = result->distances + slot * loop->k;
    if (loop->query->invalid != NULL && loop->query->invalid[i]) {
      knnwb_knn_row_empty(result, slot, loop->k);
      loop->uncertified[t] = 0;
      continue;
    }
    gboolean ok = knnwb_refine_certify_row(loop->query, i, loop->reference, loop->worst[t],
                                           (size_t)MAX(loop->valid[t], 0), loop->available, loop->k,
                                           out_index, out_distance);
    result->n_found[slot] = (int32_t)loop->k;
    loop->uncertified[t] = ok ? 0 : 1;
  }
}

gboolean knnwb_knn_status_to_error(int status, const char *message, const char *backend,
                                   GError **error)
{
  int code = KNNWB_ERROR_FAILED;
  switch (status) {
  case KNNWB_KERNELS_OK:
    return TRUE;
  case KNNWB_KERNELS_CANCELLED:
    code = KNNWB_ERROR_CANCELLED;
    break;
  case KNNWB_KERNELS_OUT_OF_MEMORY:
    code = KNNWB_ERROR_NO_MEMORY;
    break;
  default:
    code = KNNWB_ERROR_DEVICE;
  }
  g_set_error(error, KNNWB_ERROR, code, "%s backend: %s", backend, message);
  return FALSE;
}

gboolean knnwb_knn_uses_gpu(const KnnwbKnnOptions *options)
{
  if (options->backend == KNNWB_BACKEND_CPU)
    return FALSE;
  return options->backend == KNNWB_BACKEND_CUDA || knnwb_cuda_device_count() > 0;
}

gboolean knnwb_knn_choose_backend(const KnnwbKnnOptions *options, KnnwbSelectFunc *select,
                                  char **name, GError **error)
{
  int devices = 0;
  if (options->backend != KNNWB_BACKEND_CPU)
    devices = options->n_devices > 0 ? options->n_devices : knnwb_cuda_device_count();
  if (options->backend != KNNWB_BACKEND_CPU && devices > 0 && knnwb_cuda_device_count() > 0) {
    *select = knnwb_cuda_select;
    *name = g_strdup_printf("cuda:%d", devices);
    return TRUE;
  }
  if (options->backend == KNNWB_BACKEND_CUDA) {
#ifdef KNNWB_HAVE_CUDA
    const char *why = "no CUDA device is visible";
#else
    const char *why = "knnwb was built without CUDA";
#endif
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_DEVICE,
                "backend cuda: no usable GPU (%s); use the cpu or auto backend", why);
    return FALSE;
  }
#ifdef KNNWB_HAVE_CUDA
  /* Once per process: a clustering or a pipeline runs several kNN searches, and a user reading
   * the same line a dozen times looks for a dozen problems. */
  static gsize told = 0;
  if (options->backend == KNNWB_BACKEND_AUTO && g_once_init_enter(&told)) {
    g_message("knnwb: no usable GPU, computing the kNN graph on the CPU");
    g_once_init_leave(&told, 1);
  }
#endif
  *select = knnwb_cpu_select;
  *name = g_strdup("cpu");
  return TRUE;
}

static void knnwb_knn_fill_job(KnnwbSelectJob *job, const KnnwbKnnOptions *options,
                               const KnnwbPrepared *reference, int threads)
{
  memset(job, 0, sizeof *job);
  job->reference = reference->scored;
  job->n_reference = reference->n;
  job->reference_sqnorms = reference->sqnorms;
  job->reference_invalid = reference->invalid;
  job->dim = reference->d;
  job->score_kind = knnwb_metric_score_kind(reference->metric);
  job->screen = knnwb_screen_kernel_precision(reference->screen);
  job->screen_row_norm = reference->screen_row_norm;
  job->screen_half_scores = knnwb_screen_half_scores(reference->screen);
  job->n_threads = threads;
  job->devices = options->devices;
  job->n_devices = options->n_devices;
  job->cancel = options->cancel;
}

/* Rank 0 of a group shows the job's progress: its own share's tiles stand for every rank's (the
 * shares are even), so one line covers the whole job. */
typedef struct {
  KnnwbProgressFunc progress;
  void *data;
  uint64_t ranks;
} KnnwbGroupProgress;

static void knnwb_knn_group_progress(uint64_t done, uint64_t total, void *user)
{
  KnnwbGroupProgress *group = user;
  group->progress(done * group->ranks, total * group->ranks, group->data);
}

/* The host arrays a GPU selection's download and the refine write, faulted in once its tile loop
 * runs (its first progress report): not during its setup, whose pinned allocations and upload the
 * page faults slowed (setup 0.19 s instead of 0.02 s at 1.5 M rows). */
typedef struct {
  KnnwbKernelsProgress progress; /* the caller's, forwarded */
  void *progress_data;
  void *blocks[5];
  size_t bytes[5];
  int threads;
  gint started;
  KnnwbPrefault *prefault;
} KnnwbSelectPrefault;

static void knnwb_knn_prefault_progress(uint64_t done, uint64_t total, void *user)
{
  KnnwbSelectPrefault *select = user;
  if (done < total && g_atomic_int_compare_and_exchange(&select->started, 0, 1))
    g_atomic_pointer_set(&select->prefault,
                         knnwb_prefault_start(select->blocks, select->bytes,
                                              G_N_ELEMENTS(select->blocks), select->threads));
  if (select->progress != NULL)
    select->progress(done, total, select->progress_data);
}

/*
 * Runs one selection and its refinement. rows (NULL = the n_rows rows from row0) are the query
 * rows concerned. With a group (first round only: rows == NULL): a self job runs this rank's share
 * of the tiles over every row, the ranks' candidates are merged for this rank's rows [row0, row0 +
 * n_rows), and those are refined; a query job selects and refines this rank's rows. On return
 * *uncertified holds the rows still uncertified (or is NULL). lists_fresh: result's rows were
 * never written (knnwb_knn_result_alloc without clear); the round writes every slot of them.
 */
static gboolean knnwb_knn_round(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                const char *backend, const KnnwbPrepared *query,
                                const KnnwbPrepared *reference, gboolean self, size_t kc,
                                size_t available, int threads, const int64_t *rows, size_t n_rows,
                                size_t row0, const KnnwbKnnGroup *group, gboolean lists_fresh,
                                KnnwbNeighbors *result, GArray **uncertified, GError **error)
{
  const size_t d = query->d;
  /* A self job of a group selects over every row (its share of the tiles touches them all). */
  const gboolean shared = group != NULL && rows == NULL && self;
  const size_t job_rows = shared ? query->n : n_rows;
  size_t cells;
  *uncertified = NULL;
  if (!knnwb_size_multiply(job_rows, kc, &cells)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%zu rows x %zu candidates overflow",
                job_rows, kc);
    return FALSE;
  }
  int64_t *cand_index = g_try_malloc(MAX(cells, (size_t)1) * sizeof(int64_t));
  float *cand_score = g_try_malloc(MAX(cells, (size_t)1) * sizeof(float));
  unsigned char *flags = g_try_malloc0(MAX(n_rows, (size_t)1));
  float *gathered = NULL;
  double *cand_distance = NULL;
  int distances_filled = 0;
  float *worst = NULL;
  int32_t *valid_count = NULL;
  int refined = 0;
  gboolean ok = FALSE;
  KnnwbGroupProgress group_progress = {options->progress, options->progress_data,
                                       group ? (uint64_t)group->size : 1};
  KnnwbGroupBounds bounds = {0};
  size_t list0 = 0; /* the job row of the refine's first row in the candidate arrays */
  gint64 select_start = g_get_monotonic_time();
  if (shared) {
    /* The ranks agree on the threshold rounds and on every allocation before any selects: from
     * here on every rank makes the same collective calls. GPU ranks share thresholds; CPU ranks
     * would gain little per round (their tiles are many and small) and have no hook for it. */
    ok = knnwb_group_bounds_init(
        &bounds, group, query->n,
        options->backend != KNNWB_BACKEND_CPU && select != knnwb_cpu_select, error);
    if (!ok)
      goto out;
    ok = cand_index != NULL && cand_score != NULL && flags != NULL &&
         knnwb_group_bounds_ready(&bounds);
    if (!ok)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate candidate lists for %zu rows x %zu candidates", job_rows, kc);
    if (!group->agree(group, ok, error)) {
      ok = FALSE;
      goto out;
    }
  }
  if (cand_index == NULL || cand_score == NULL || flags == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate candidate lists for %zu rows x %zu candidates", job_rows, kc);
    goto selected;
  }
  KnnwbSelectJob job;
  knnwb_knn_fill_job(&job, options, reference, threads);
  job.kc = kc;
  job.memory_bytes = options->memory_bytes;
  job.out_index = cand_index;
  job.out_score = cand_score;
  const size_t job_row0 = shared ? 0 : row0;
  if (rows == NULL) {
    job.query = query->scored + job_row0 * d;
    job.n_query = job_rows;
    job.self = self;
    if (shared) {
      job.share_index = group->rank;
      job.share_count = group->size;
      if (bounds.rounds > 0) {
        job.share_bounds = knnwb_group_bounds_share;
        job.share_bounds_data = &bounds;
        job.share_bound_rounds = bounds.rounds;
      }
    }
    if (group == NULL || group->rank == 0) {
      job.progress = options->progress;
      job.progress_data = options->progress_data;
      if (group != NULL && options->progress != NULL) {
        job.progress = knnwb_knn_group_progress;
        job.progress_data = &group_progress;
      }
    }
  } else {
    /* Retry rounds query a gathered copy of the uncertified rows against every reference. */
    gathered = g_try_malloc(MAX(n_rows * d, (size_t)1) * sizeof(float));
    if (gathered == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot gather %zu rows", n_rows);
      goto selected;
    }
    for (size_t t = 0; t < n_rows; t++)
      memcpy(gathered + t * d, query->scored + (size_t)rows[t] * d, d * sizeof(float));
    job.query = gathered;
    job.n_query = n_rows;
    job.self = FALSE;
  }
  if (options->backend != KNNWB_BACKEND_CPU && select != knnwb_cpu_select) {
    job.memory_bytes = options->gpu_memory_bytes;
    /* A GPU computes the exact distances of its final candidates (bit for bit as here) when it
     * has room for the rows; the host then only sorts. Not for retry rounds (gathered rows). */
    if (rows == NULL)
      cand_distance = g_try_malloc(MAX(cells, (size_t)1) * sizeof(double));
    if (cand_distance != NULL) {
      job.exact_kind = knnwb_metric_exact_kind(query->metric);
      job.exact_query = query->exact + job_row0 * d;
      job.exact_reference = reference->exact;
      job.exact_query_mean = query->mean ? query->mean + job_row0 : NULL;
      job.exact_query_squares = query->sum_squares ? query->sum_squares + job_row0 : NULL;
      job.exact_reference_mean = reference->mean;
      job.exact_reference_squares = reference->sum_squares;
      job.out_distance = cand_distance;
      job.out_distance_filled = &distances_filled;
      /* ...and, when the round is its own (no group merge by score follows) and k is large,
       * refines them too: sorted by (distance, index) and cut to k on the device, straight into
       * the lists, so that only k entries per row come back (k = 4,096: the download of kc =
       * 4,608 candidates of 20 bytes per row and the host's sort were three quarters of the run).
       * The candidate arrays above are then never touched, so they cost no memory. Small k keeps
       * the host refine: it costs 0.05-0.14 s at k = 20 on 1,533,876 rows. */
      if (!shared && options->k >= KNNWB_KNN_DEVICE_REFINE_MIN_K) {
        worst = g_try_malloc(MAX(n_rows, (size_t)1) * sizeof(float));
        valid_count = g_try_malloc(MAX(n_rows, (size_t)1) * sizeof(int32_t));
      }
      if (worst != NULL && valid_count != NULL) {
        const size_t slot0 = row0 - result->first_row;
        job.out_k = options->k;
        job.out_k_index = result->indices + slot0 * options->k;
        job.out_k_distance = result->distances + slot0 * options->k;
        job.out_worst_score = worst;
        job.out_valid = valid_count;
        job.out_refined = &refined;
      }
    }
  }
  /* While a GPU computes, helper threads fault in the host arrays its download and the refine
   * will write (1.6 GB at 1.5 M rows, k = 20: the download took 0.24 s instead of 0.14 s with the
   * page faults). Not the candidate arrays a device refine never touches. */
  KnnwbSelectPrefault prefault = {.progress = job.progress, .progress_data = job.progress_data};
  if (options->backend != KNNWB_BACKEND_CPU && select != knnwb_cpu_select && rows == NULL) {
    const gboolean lists = lists_fresh && group == NULL;
    const size_t slot0 = row0 - result->first_row, list_cells = n_rows * options->k;
    void *blocks[] = {
        job.out_k == 0 ? cand_index : NULL,
        job.out_k == 0 ? cand_score : NULL,
        job.out_k == 0 ? cand_distance : NULL,
        lists ? result->indices + slot0 * options->k : NULL,
        lists ? result->distances + slot0 * options->k : NULL,
    };
    const size_t bytes[] = {cells * sizeof(int64_t), cells * sizeof(float), cells * sizeof(double),
                            list_cells * sizeof(int64_t), list_cells * sizeof(double)};
    memcpy(prefault.blocks, blocks, sizeof blocks);
    memcpy(prefault.bytes, bytes, sizeof bytes);
    prefault.threads = MAX(1, threads / 2);
    job.progress = knnwb_knn_prefault_progress;
    job.progress_data = &prefault;
  }
  char message[512] = "";
  select_start = g_get_monotonic_time();
  ok = knnwb_knn_status_to_error(select(&job, message, sizeof message), message, backend, error);
  if (g_atomic_pointer_get(&prefault.prefault) != NULL) {
    gint64 wait_start = g_get_monotonic_time();
    knnwb_prefault_finish(g_atomic_pointer_get(&prefault.prefault));
    g_debug("knnwb: host arrays faulted in during the tile loop (waited %.3f s after it)",
            (double)(g_get_monotonic_time() - wait_start) / 1e6);
  }
selected:
  g_clear_pointer(&gathered, g_free);
  if (shared) {
    knnwb_group_bounds_finish(&bounds);
    /* Every rank learns whether every selection worked before any exchanges its lists. */
    if (!group->agree(group, ok, error)) {
      ok = FALSE;
      goto out;
    }
    gint64 merge_start = g_get_monotonic_time();
    gboolean distances_kept = FALSE;
    if (!knnwb_knn_group_merge(group, query->n, kc, cand_index, cand_score,
                               distances_filled ? cand_distance : NULL, row0, n_rows, threads,
                               &distances_kept, error)) {
      ok = FALSE;
      goto out;
    }
    g_debug("knnwb: rank %d: candidate exchange and merge %.3f s", group->rank,
            (double)(g_get_monotonic_time() - merge_start) / 1e6);
    /* This rank's rows' lists now sit at row0 of the all-rows arrays. */
    list0 = row0;
    distances_filled = distances_kept;
  }
  if (!ok)
    goto out;
  gint64 refine_start = g_get_monotonic_time();
  if (refined) {
    KnnwbCertifyLoop certify = {query, reference,   options->k, available, row0,
                                worst, valid_count, result,     flags};
    knnwb_parallel_for(threads, n_rows, 1024, knnwb_certify_rows, &certify);
    /* G_MESSAGES_DEBUG=knnwb shows where the time goes. */
    g_debug("knnwb: %zu rows, %zu candidates: select and refine %.3f s (%s, refined on the "
            "device), certificate %.3f s",
            n_rows, kc, (double)(refine_start - select_start) / 1e6, backend,
            (double)(g_get_monotonic_time() - refine_start) / 1e6);
  } else {
    KnnwbRefineLoop loop = {query,
                            reference,
                            self,
                            options->k,
                            kc,
                            available,
                            rows,
                            row0,
                            cand_index + list0 * kc,
                            cand_score + list0 * kc,
                            distances_filled ? cand_distance + list0 * kc : NULL,
                            result,
                            flags};
    knnwb_parallel_for(threads, n_rows, 256, knnwb_refine_rows, &loop);
    g_debug("knnwb: %zu rows, %zu candidates: select %.3f s, refine %.3f s (%s, exact distances "
            "from the %s)",
            n_rows, kc, (double)(refine_start - select_start) / 1e6,
            (double)(g_get_monotonic_time() - refine_start) / 1e6, backend,
            distances_filled ? "backend" : "host");
  }
  for (size_t t = 0; t < n_rows; t++)
    if (flags[t]) {
      if (*uncertified == NULL)
        *uncertified = g_array_new(FALSE, FALSE, sizeof(int64_t));
      int64_t i = rows ? rows[t] : (int64_t)(row0 + t);
      g_array_append_val(*uncertified, i);
    }
out:
  g_free(bounds.keys);
  if (rows == NULL) {
    /* Gigabytes at 1.5 M rows (0.03-0.06 s to unmap): freed once the run returns, not during a
     * re-selection round, whose pinned allocations the unmapping slowed. */
    void *blocks[] = {cand_index, cand_score, cand_distance};
    const size_t bytes[] = {cells * sizeof(int64_t), cells * sizeof(float), cells * sizeof(double)};
    knnwb_release_later(blocks, bytes, G_N_ELEMENTS(blocks));
    cand_distance = NULL;
  } else {
    /* A re-selection batch is sized to the memory budget so that one at a time is held; queued
     * until the run returns, every batch stayed (7.6 GB for 20,000 rows whose every row needed
     * all candidates, with the default 256 MB budget). */
    g_free(cand_index);
    g_free(cand_score);
  }
  g_free(flags);
  g_free(gathered);
  g_free(cand_distance);
  g_free(worst);
  g_free(valid_count);
  return ok;
}

gboolean knnwb_knn_check_sizes(size_t n, size_t n_reference, size_t d, size_t d_reference,
                               size_t held, size_t held_reference, gboolean self,
                               const KnnwbKnnOptions *options, GError **error)
{
  if ((unsigned)options->metric >= KNNWB_METRIC_COUNT) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "unknown metric %d",
                (int)options->metric);
    return FALSE;
  }
  if (options->k < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "k must be at least 1 (got %zu)",
                options->k);
    return FALSE;
  }
  if (d != d_reference) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "query rows have %zu column%s but reference rows have %zu", d, KNNWB_PLURAL(d),
                d_reference);
    return FALSE;
  }
  if (d == 1 && n > 0 &&
      (options->metric == KNNWB_METRIC_PEARSON || options->metric == KNNWB_METRIC_ABS_PEARSON ||
       options->metric == KNNWB_METRIC_SPEARMAN)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "a correlation needs at least 2 columns but the rows have 1 (wrong delimiter, or "
                "should the matrix be transposed?)");
    return FALSE;
  }
  if (d == 0 && n > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "the rows have no columns: there is nothing to measure distances on");
    return FALSE;
  }
  const size_t k = options->k;
  /* Before the memory estimate, so that a k beyond the rows is reported as that and not as a
   * request for petabytes (dropped rows can only lower the bound; checked again below). */
  const size_t at_most = self ? (n > 0 ? n - 1 : 0) : n_reference;
  if (n > 0 && k > at_most) {
    g_set_error(
        error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
        "k = %zu but each row has only %zu %s row%s to choose neighbours from; use k <= %zu", k,
        at_most, self ? "other" : "reference", at_most == 1 ? "" : "s", at_most);
    return FALSE;
  }
  size_t result_cells;
  if (!knnwb_size_multiply(held, k, &result_cells) || result_cells > SIZE_MAX / sizeof(double)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%zu rows x k = %zu neighbours overflow the address space", held, k);
    return FALSE;
  }
  /* Refuse up front what cannot fit: the lists (index + distance), the candidate lists of the
   * first round, and the prepared copy of the rows. Working tiles come on top but are bounded by
   * the memory budget. */
  const size_t margin = MAX((size_t)8, k / 8);
  double needed = (double)held * (double)k * (sizeof(int64_t) + sizeof(double)) +
                  (double)held * (double)(k + margin) * (sizeof(int64_t) + sizeof(float)) +
                  (double)(held + (self ? 0 : held_reference)) * (double)d * sizeof(float) *
                      (options->metric == KNNWB_METRIC_SPEARMAN ? 2.0 : 1.0);
  size_t available = knnwb_memory_available();
  if (needed > (double)available) {
    g_autofree char *needed_text = knnwb_memory_format((size_t)MIN(needed, (double)SIZE_MAX));
    g_autofree char *available_text = knnwb_memory_format(available);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "a kNN graph of %zu rows with k = %zu needs about %s of memory but only %s is "
                "available: lower k, or run on a machine with more memory",
                n, k, needed_text, available_text);
    return FALSE;
  }
  return TRUE;
}

/* The checks of a request that need no data pass: metric, k, shapes. */
static gboolean knnwb_knn_check_request(const KnnwbMatrix *query_data,
                                        const KnnwbMatrix *reference_data, gboolean self,
                                        const KnnwbKnnOptions *options, GError **error)
{
  return knnwb_knn_check_sizes(query_data->n_rows, reference_data->n_rows, query_data->n_cols,
                               reference_data->n_cols, query_data->n_rows, reference_data->n_rows,
                               self, options, error);
}

static void knnwb_knn_result_clear(size_t first, size_t last, void *user)
{
  KnnwbNeighbors *result = user;
  for (size_t i = first; i < last; i++) {
    result->indices[i] = -1;
    result->distances[i] = INFINITY;
  }
}

/* Lists for rows [first, first + rows); with clear every slot empty, filled by every core (at
 * large k the lists are tens of GB, and their first touch, page faults, is the slow part), else
 * left unset for a caller that writes every slot (n_found is zero either way). */
static KnnwbNeighbors *knnwb_knn_result_alloc(size_t first, size_t rows, size_t k, gboolean clear,
                                              GError **error)
{
  KnnwbNeighbors *result = g_new0(KnnwbNeighbors, 1);
  result->n_queries = rows;
  result->k = k;
  result->first_row = first;
  const size_t cells = rows * k; /* checked by knnwb_knn_check_request */
  result->indices = g_try_malloc(MAX(cells, (size_t)1) * sizeof(int64_t));
  result->distances = g_try_malloc(MAX(cells, (size_t)1) * sizeof(double));
  result->n_found = g_try_malloc0(MAX(rows, (size_t)1) * sizeof(int32_t));
  if (result->indices == NULL || result->distances == NULL || result->n_found == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate neighbour lists for %zu rows x k = %zu (%zu MiB); lower k", rows,
                k, cells * (sizeof(int64_t) + sizeof(double)) >> 20);
    knnwb_neighbors_free(result);
    return NULL;
  }
  if (clear)
    knnwb_parallel_for(0, cells, (size_t)1 << 20, knnwb_knn_result_clear, result);
  return result;
}

KnnwbNeighbors *knnwb_knn_result_new(size_t first, size_t rows, size_t k, GError **error)
{
  return knnwb_knn_result_alloc(first, rows, k, TRUE, error);
}

/* The first round with a margin of candidates past k, then the rows the rounding bound could not
 * certify again with four times as many, until all are certified. A retry round's candidate lists
 * (rows x candidates) are kept within the memory budget by taking its rows in batches. With a
 * group the first round is shared (rows [row0, row0 + n_rows) are this rank's, result holds them)
 * and each rank re-selects its own uncertified rows alone. lists_fresh: result's rows were never
 * written (the first round writes them all). */
static gboolean knnwb_knn_rounds(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                 const char *backend, const KnnwbPrepared *query,
                                 const KnnwbPrepared *reference, gboolean self, size_t available,
                                 int threads, const KnnwbKnnGroup *group, size_t row0,
                                 size_t n_rows, gboolean lists_fresh, KnnwbNeighbors *result,
                                 GError **error)
{
  const size_t k = options->k;
  /* The screening precision sets the certificate's bound, and so the margin of candidates past k
   * that absorbs it; certification checks that the margin sufficed. */
  size_t kc = MIN(available, knnwb_screen_candidates(query->screen, k));
  GArray *uncertified = NULL;
  if (!knnwb_knn_round(options, select, backend, query, reference, self, kc, available, threads,
                       NULL, n_rows, row0, group, lists_fresh, result, &uncertified, error))
    return FALSE;
  const size_t budget = options->memory_bytes ? options->memory_bytes : (size_t)256 << 20;
  /* The CPU re-selects in FP32: BF16's window (2 2^-7 of |q||r|) can hold every row (cosine on
   * rows with a common offset, all within 0.01 of each other: 20,000 x 128 rows took 38 s, every
   * row re-selected until all were candidates, against 0.43 s in FP32), and a wider window never
   * narrows it; FP32's is 2^-17 of that. The certificate takes the FP32 bound with the FP32 rows.
   */
  KnnwbPrepared query_fp32, reference_fp32;
  if (uncertified != NULL && query->screen != KNNWB_SCREEN_FP32 && select == knnwb_cpu_select) {
    query_fp32 = *query;
    reference_fp32 = *reference;
    const gboolean same = reference == query;
    knnwb_prepared_set_screen(&query_fp32, same ? &query_fp32 : &reference_fp32, KNNWB_SCREEN_FP32);
    query = &query_fp32;
    reference = same ? &query_fp32 : &reference_fp32;
  }
  while (uncertified != NULL) {
    size_t total = self ? available + 1 : available;
    kc = MIN(total, kc * 4);
    GArray *rows = uncertified;
    uncertified = NULL;
    result->n_reselected += rows->len;
    /* Candidate index, score and exact distance per cell. */
    size_t batch =
        MAX((size_t)1, budget / (kc * (sizeof(int64_t) + sizeof(float) + sizeof(double))));
    g_debug("knnwb: %u row(s) re-selected with %zu candidates, %zu at a time", rows->len, kc,
            batch);
    gboolean round_ok = TRUE;
    for (size_t first = 0; first < rows->len && round_ok; first += batch) {
      size_t n_batch = MIN(batch, rows->len - first);
      GArray *left = NULL;
      round_ok = knnwb_knn_round(options, select, backend, query, reference, self, kc, available,
                                 threads, (const int64_t *)(void *)rows->data + first, n_batch, 0,
                                 NULL, FALSE, result, &left, error);
      if (left != NULL) {
        if (uncertified == NULL)
          uncertified = g_array_new(FALSE, FALSE, sizeof(int64_t));
        g_array_append_vals(uncertified, left->data, left->len);
        g_array_free(left, TRUE);
      }
    }
    g_array_free(rows, TRUE);
    if (round_ok && uncertified != NULL && kc == total) {
      /* Every reference was a candidate: refine_row reports that as certified, so this is a bug. */
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "internal error: certification failed");
      round_ok = FALSE;
    }
    if (!round_ok) {
      if (uncertified != NULL)
        g_array_free(uncertified, TRUE);
      return FALSE;
    }
  }
  return TRUE;
}

/* The distinct rows of from (duplicates' representatives), agreed by every rank of group. */
static gboolean knnwb_knn_gather_distinct(KnnwbPrepared *distinct, const KnnwbPrepared *from,
                                          const KnnwbDuplicates *duplicates,
                                          const KnnwbKnnGroup *group, GError **error)
{
  gboolean ok = knnwb_prepared_gather(distinct, from, duplicates->representative,
                                      duplicates->n_unique, error);
  if (group != NULL && !group->agree(group, ok, error)) {
    if (ok)
      knnwb_prepared_clear(distinct);
    return FALSE;
  }
  return ok;
}

/* The self lists of data with exact duplicate rows: the distinct rows' lists, expanded into result
 * (all n rows). With a group the distinct rows' lists are shared out and gathered on every rank
 * first (each row's expansion needs its representative's list, which may be another rank's). */
static gboolean knnwb_knn_distinct(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                   const char *backend, const KnnwbPrepared *query,
                                   const KnnwbDuplicates *duplicates, int threads,
                                   const KnnwbKnnGroup *group, KnnwbNeighbors *result,
                                   GError **error)
{
  KnnwbPrepared distinct;
  if (!knnwb_knn_gather_distinct(&distinct, query, duplicates, group, error))
    return FALSE;
  gboolean ok = TRUE;
  knnwb_prepared_set_screen(&distinct, &distinct, query->screen);
  const size_t valid = distinct.n - distinct.n_invalid;
  KnnwbKnnOptions distinct_options = *options;
  distinct_options.k = MIN(options->k, valid > 0 ? valid - 1 : 0);
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (distinct_options.k > 0) {
    size_t first = 0, last = distinct.n;
    if (group != NULL)
      knnwb_knn_group_rows(distinct.n, group->rank, group->size, &first, &last);
    lists = knnwb_knn_result_new(first, last - first, distinct_options.k, error);
    ok = lists != NULL;
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    ok =
        ok && knnwb_knn_rounds(&distinct_options, select, backend, &distinct, &distinct, TRUE,
                               valid - 1, threads, group, first, last - first, FALSE, lists, error);
    if (ok)
      result->n_reselected += lists->n_reselected;
    if (group != NULL) {
      if (!group->agree(group, ok, error))
        ok = FALSE;
      KnnwbNeighbors *all = ok ? knnwb_knn_group_gather(group, lists, distinct.n, error) : NULL;
      ok = all != NULL;
      knnwb_neighbors_free(g_steal_pointer(&lists));
      lists = all;
    }
  }
  if (ok)
    knnwb_duplicates_expand(duplicates, query, lists, threads, result);
  knnwb_prepared_clear(&distinct);
  return ok;
}

/* The lists of rows row0 .. row0 + n_rows - 1 of query against a reference with exact duplicate
 * rows: the lists against its distinct rows, expanded into result. In a group every rank does its
 * own query rows, as without duplicates; the ranks agree after each step that can fail alone. */
static gboolean knnwb_knn_distinct_reference(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                             const char *backend, KnnwbPrepared *query,
                                             const KnnwbPrepared *reference,
                                             const KnnwbDuplicates *duplicates, int threads,
                                             const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                                             KnnwbNeighbors *result, GError **error)
{
  KnnwbPrepared distinct;
  if (!knnwb_knn_gather_distinct(&distinct, reference, duplicates, group, error))
    return FALSE;
  gboolean ok = TRUE;
  /* The gathered rows share the reference's bound on norms: the screen stays the same. */
  knnwb_prepared_set_screen(query, &distinct, query->screen);
  const size_t valid = distinct.n - distinct.n_invalid;
  KnnwbKnnOptions distinct_options = *options;
  distinct_options.k = MIN(options->k, valid);
  g_autoptr(KnnwbNeighbors) lists = knnwb_knn_result_new(row0, n_rows, distinct_options.k, error);
  ok = lists != NULL;
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  ok = ok && knnwb_knn_rounds(&distinct_options, select, backend, query, &distinct, FALSE, valid,
                              threads, group, row0, n_rows, FALSE, lists, error);
  if (ok) {
    result->n_reselected += lists->n_reselected;
    knnwb_duplicates_expand_query(duplicates, lists, threads, result);
  }
  knnwb_prepared_clear(&distinct);
  return ok;
}

/*
 * The engine. Alone: check, prepare, select, refine, re-select the uncertified rows. In a group
 * every rank does the same steps on the same matrices, but selects and refines only its share (the
 * self graph's tiles, the query rows' panels) and re-selects its own uncertified rows; the ranks
 * agree after the local checks and after the work, so an error on any rank stops all of them with
 * its message, and the lists of a rank's rows are exchanged only when the caller wants them all.
 * given: a reference prepared once by knnwb_knn_reference_new (checked and prepared already), or
 * NULL to check and prepare reference_data here.
 */
static gboolean knnwb_knn_run(const KnnwbMatrix *query_data, const KnnwbMatrix *reference_data,
                              const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                              KnnwbNeighbors **result_out, GError **error)
{
  const gboolean self = reference_data == NULL;
  if (self)
    reference_data = query_data;
  g_return_val_if_fail(query_data != NULL && options != NULL && result_out != NULL, FALSE);
  *result_out = NULL;
  const KnnwbKnnGroup *group = options->group ? options->group : knnwb_knn_group_get_default();
  if (group != NULL && group->size <= 1)
    group = NULL;
  if (group != NULL && options->group_split)
    return knnwb_knn_split_run(query_data, self ? NULL : reference_data, given, options, group,
                               result_out, error);
  const size_t n = query_data->n_rows, k = options->k;
  size_t first = 0, last = n;
  if (group != NULL)
    knnwb_knn_group_rows(n, group->rank, group->size, &first, &last);
  const gint64 run_start = g_get_monotonic_time();
  /* The previous run's blocks, still being freed, make room for this one first. */
  knnwb_release_wait();

  int threads = knnwb_thread_count(options->n_threads);
  if (group != NULL && options->n_threads <= 0)
    threads = MAX(1, threads / MAX(1, group->local_size)); /* the host's cores are shared */
  KnnwbPrepared query = {0}, reference_storage = {0};
  const KnnwbPrepared *reference = &query;
  KnnwbDuplicates duplicates = {0};
  g_autoptr(KnnwbNeighbors) result = NULL;
  gboolean gathered = FALSE;
  KnnwbSelectFunc select = NULL;
  g_autofree char *backend = NULL;
  gboolean ok = FALSE, nothing_to_do = FALSE, lists_fresh = FALSE;
  KnnwbScreen screen = KNNWB_SCREEN_FP32;
  size_t available = 0;

  /* Local checks and preparation: each rank checks the values of its own rows only (every row is
   * some rank's), the rest is the same on every rank. */
  if (!knnwb_knn_check_request(query_data, reference_data, self, options, error))
    goto checked;
  if (!knnwb_matrix_check_finite_rows(query_data, first, last, error))
    goto checked;
  if (!self && given == NULL) {
    size_t reference_first = 0, reference_last = reference_data->n_rows;
    if (group != NULL)
      knnwb_knn_group_rows(reference_data->n_rows, group->rank, group->size, &reference_first,
                           &reference_last);
    if (!knnwb_matrix_check_finite_rows(reference_data, reference_first, reference_last, error))
      goto checked;
  }
  /* Alone, the lists are written by the search (every slot of every row) or cleared below where
   * not: their pages fault in while a GPU computes instead of here (0.1-0.2 s at 1.5 M rows). */
  lists_fresh = group == NULL;
  result = knnwb_knn_result_alloc(first, last - first, k, !lists_fresh, error);
  if (result == NULL)
    goto checked;
  gint64 prepare_start = g_get_monotonic_time();
  g_debug("knnwb: checks and allocation %.3f s", (double)(prepare_start - run_start) / 1e6);
  /* The reference first: a query shares its euclidean frame (column centring and scale). */
  /* Manhattan: one scale for query and reference, from the larger magnitudes, so neither side's
   * scores can overflow. */
  KnnwbPrepared manhattan_frame = {0};
  const KnnwbPrepared *reference_frame = NULL;
  if (!self && given == NULL && options->metric == KNNWB_METRIC_MANHATTAN) {
    manhattan_frame.scale_exponent = MAX(knnwb_prepare_manhattan_exponent(query_data),
                                         knnwb_prepare_manhattan_exponent(reference_data));
    reference_frame = &manhattan_frame;
  }
  if (given != NULL) {
    reference = given;
  } else if (!self) {
    if (!knnwb_prepared_init(&reference_storage, reference_data, options->metric,
                             options->drop_degenerate, "reference", threads, reference_frame,
                             error))
      goto checked;
    reference = &reference_storage;
  }
  if (!knnwb_prepared_init(&query, query_data, options->metric, options->drop_degenerate,
                           self ? (options->data_name ? options->data_name : "data") : "query",
                           threads, self ? NULL : reference, error))
    goto checked;
  g_debug("knnwb: prepare %.3f s", (double)(g_get_monotonic_time() - prepare_start) / 1e6);
  const size_t valid = reference->n - reference->n_invalid;
  available = self ? (valid > 0 ? valid - 1 : 0) : valid;
  if (n == 0 || (self && query.n_invalid == n)) {
    result->backend_used = g_strdup("none");
    nothing_to_do = TRUE;
    ok = TRUE;
    goto checked;
  }
  if (k > available) {
    g_set_error(
        error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
        "k = %zu but each row has only %zu %s row%s to choose neighbours from; use k <= %zu", k,
        available, self ? "other" : "reference", available == 1 ? "" : "s", available);
    goto checked;
  }
  ok = knnwb_knn_choose_backend(options, &select, &backend, error) &&
       knnwb_screen_resolve(options->screen, backend, options->metric, k, &screen, error);
  if (ok)
    knnwb_prepared_set_screen(&query, self ? &query : &reference_storage, screen);
  /* Exact duplicate rows are collapsed before the search and expanded after it: a group of copies
   * larger than the candidate margin could never be certified and would be re-selected with ever
   * more candidates. (Every rank finds the same duplicates.) */
  if (ok && self) {
    const gint64 duplicates_start = g_get_monotonic_time();
    ok = knnwb_duplicates_find(query_data, threads, &duplicates, error);
    g_debug("knnwb: duplicate rows searched in %.3f s",
            (double)(g_get_monotonic_time() - duplicates_start) / 1e6);
  }
  /* Against a reference, copies among its rows tie at one distance from every query row just the
   * same. (A reference prepared once for many queries, given, is searched as it is: hashing it on
   * every call would cost more than a typical small query.) */
  if (ok && !self && given == NULL && k > 0)
    ok = knnwb_duplicates_find(reference_data, threads, &duplicates, error);
checked:
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  /* Only the search itself writes every list: the other ways out start from empty lists. */
  const gboolean search_writes_all = ok && !nothing_to_do && duplicates.representative == NULL;
  if (ok && lists_fresh && !search_writes_all)
    knnwb_parallel_for(threads, result->n_queries * k, (size_t)1 << 20, knnwb_knn_result_clear,
                       result);
  if (!ok || nothing_to_do)
    goto out;
  result->backend_used =
      group != NULL ? g_strdup_printf("%s x %d ranks", backend, group->size) : g_strdup(backend);
  result->screen_used = screen;
  if (self && duplicates.n_unique < n) {
    g_debug("knnwb: %zu distinct rows of %zu", duplicates.n_unique, n);
    /* Every rank expands every row (see knnwb_knn_distinct): the lists are whole already. */
    KnnwbNeighbors *all = group != NULL ? knnwb_knn_result_new(0, n, k, error) : result;
    ok = all != NULL;
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    ok = ok && knnwb_knn_distinct(options, select, backend, &query, &duplicates, threads, group,
                                  all, error);
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    if (ok && group != NULL) {
      all->backend_used = g_strdup(result->backend_used);
      if (options->group_own_rows) {
        /* This rank's slice of the whole lists. */
        memcpy(result->indices, all->indices + first * k, (last - first) * k * sizeof(int64_t));
        memcpy(result->distances, all->distances + first * k, (last - first) * k * sizeof(double));
        memcpy(result->n_found, all->n_found + first, (last - first) * sizeof(int32_t));
        knnwb_neighbors_free(all);
      } else {
        knnwb_neighbors_free(result);
        result = all;
      }
      gathered = TRUE;
    } else if (all != result) {
      knnwb_neighbors_free(all);
    }
    goto out;
  }
  if (!self && duplicates.representative != NULL) {
    g_debug("knnwb: %zu distinct reference rows of %zu", duplicates.n_unique,
            reference_data->n_rows);
    ok = knnwb_knn_distinct_reference(options, select, backend, &query, reference, &duplicates,
                                      threads, group, first, last - first, result, error);
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    goto out;
  }
  ok = knnwb_knn_rounds(options, select, backend, &query, reference, self, available, threads,
                        group, first, last - first, lists_fresh, result, error);
  g_debug("knnwb: screen %s, %zu candidates per row, %zu row(s) re-selected in all",
          knnwb_screen_to_string(screen), knnwb_screen_candidates(screen, k), result->n_reselected);
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
out:
  knnwb_duplicates_clear(&duplicates);
  gint64 clear_start = g_get_monotonic_time();
  knnwb_prepared_release(&query);
  knnwb_prepared_release(&reference_storage);
  knnwb_release_start(); /* these and the rounds' candidate arrays, while the caller goes on */
  g_debug("knnwb: release %.3f s, whole call %.3f s",
          (double)(g_get_monotonic_time() - clear_start) / 1e6,
          (double)(g_get_monotonic_time() - run_start) / 1e6);
  if (ok && group != NULL && !options->group_own_rows && !gathered) {
    gint64 gather_start = g_get_monotonic_time();
    KnnwbNeighbors *all = knnwb_knn_group_gather(group, result, n, error);
    g_debug("knnwb: rank %d: lists gathered in %.3f s", group->rank,
            (double)(g_get_monotonic_time() - gather_start) / 1e6);
    if (all == NULL)
      return FALSE;
    knnwb_neighbors_free(result);
    result = all;
  }
  if (ok)
    *result_out = g_steal_pointer(&result);
  return ok;
}

gboolean knnwb_knn_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                        KnnwbNeighbors **result, GError **error)
{
  return knnwb_knn_run(data, NULL, NULL, options, result, error);
}

gboolean knnwb_knn_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                         const KnnwbKnnOptions *options, KnnwbNeighbors **result, GError **error)
{
  g_return_val_if_fail(reference != NULL, FALSE);
  return knnwb_knn_run(query, reference, NULL, options, result, error);
}

struct KnnwbKnnReference {
  const KnnwbMatrix *data;
  KnnwbMetric metric;
  gboolean drop_degenerate;
  KnnwbPrepared prepared;
};

KnnwbKnnReference *knnwb_knn_reference_new(const KnnwbMatrix *reference,
                                           const KnnwbKnnOptions *options, GError **error)
{
  g_return_val_if_fail(reference != NULL && options != NULL, NULL);
  if ((unsigned)options->metric >= KNNWB_METRIC_COUNT) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "unknown metric %d",
                (int)options->metric);
    return NULL;
  }
  if (!knnwb_matrix_check_finite(reference, error))
    return NULL;
  KnnwbKnnReference *prepared = g_new0(KnnwbKnnReference, 1);
  prepared->data = reference;
  prepared->metric = options->metric;
  prepared->drop_degenerate = options->drop_degenerate;
  if (!knnwb_prepared_init(&prepared->prepared, reference, options->metric,
                           options->drop_degenerate, "reference",
                           knnwb_thread_count(options->n_threads), NULL, error)) {
    g_free(prepared);
    return NULL;
  }
  return prepared;
}

gboolean knnwb_knn_reference_query(const KnnwbKnnReference *reference, const KnnwbMatrix *query,
                                   const KnnwbKnnOptions *options, KnnwbNeighbors **result,
                                   GError **error)
{
  g_return_val_if_fail(reference != NULL && options != NULL, FALSE);
  if (options->metric != reference->metric ||
      options->drop_degenerate != reference->drop_degenerate) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the reference was prepared for %s%s, the query asks for %s%s",
                knnwb_metric_to_string(reference->metric),
                reference->drop_degenerate ? " (degenerate rows dropped)" : "",
                knnwb_metric_to_string(options->metric),
                options->drop_degenerate ? " (degenerate rows dropped)" : "");
    return FALSE;
  }
  return knnwb_knn_run(query, reference->data, &reference->prepared, options, result, error);
}

void knnwb_knn_reference_free(KnnwbKnnReference *reference)
{
  if (reference == NULL)
    return;
  knnwb_prepared_clear(&reference->prepared);
  g_free(reference);
}

struct KnnwbExactRows {
  KnnwbPrepared prepared;
};

KnnwbExactRows *knnwb_exact_rows_new(const KnnwbMatrix *data, KnnwbMetric metric, int n_threads,
                                     GError **error)
{
  KnnwbExactRows *rows = g_new0(KnnwbExactRows, 1);
  if (!knnwb_prepared_init(&rows->prepared, data, metric, FALSE, "data",
                           knnwb_thread_count(n_threads), NULL, error)) {
    g_free(rows);
    return NULL;
  }
  return rows;
}

double knnwb_exact_rows_distance(const KnnwbExactRows *rows, size_t i, size_t j)
{
  return knnwb_prepared_distance(&rows->prepared, i, &rows->prepared, j);
}

void knnwb_exact_rows_free(KnnwbExactRows *rows)
{
  if (rows == NULL)
    return;
  knnwb_prepared_clear(&rows->prepared);
  g_free(rows);
}
