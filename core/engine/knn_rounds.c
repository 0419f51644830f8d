/*
 * The search of the kNN engine: a first selection round with a margin of candidates past k, its
 * candidates refined into exact neighbour lists whose order a rounding-error bound certifies, then
 * the rows left uncertified selected again with four times as many candidates until every row is
 * certified (knnwb_knn_rounds). One round (knnwb_knn_round) fills the backend's job, runs a
 * group's share of a self job's tiles and merges the ranks' candidates, has host arrays faulted in
 * while a GPU computes, and refines the candidates on the host or certifies what a GPU refined.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include "knn_internal.h"

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
  KnnwbRefineScratch scratch = {0};
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
    gboolean ok =
        knnwb_refine_row(loop->query, i, loop->reference, loop->self ? (int64_t)i : -1,
                         loop->cand_index + t * loop->kc, loop->cand_score + t * loop->kc,
                         loop->cand_distance ? loop->cand_distance + t * loop->kc : NULL, loop->kc,
                         loop->available, loop->k, &scratch, out_index, out_distance);
    result->n_found[slot] = (int32_t)loop->k;
    loop->uncertified[t] = ok ? 0 : 1;
  }
  knnwb_refine_scratch_clear(&scratch);
}

/* Rows compared with every reference row (knnwb_refine_row_exhaustive): the last round of rows
 * whose screening window holds a large part of all rows. */
typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t k;
  const int64_t *rows;
  KnnwbNeighbors *result;
  const volatile gint *cancel;
} KnnwbExhaustiveLoop;

static void knnwb_exhaustive_rows(size_t first, size_t last, void *user)
{
  KnnwbExhaustiveLoop *loop = user;
  KnnwbNeighbors *result = loop->result;
  KnnwbRefineScratch scratch = {0};
  for (size_t t = first; t < last; t++) {
    if (loop->cancel != NULL && *loop->cancel)
      break;
    const size_t i = (size_t)loop->rows[t], slot = i - result->first_row;
    if (loop->query->invalid != NULL && loop->query->invalid[i]) {
      knnwb_knn_row_empty(result, slot, loop->k);
      continue;
    }
    knnwb_refine_row_exhaustive(loop->query, i, loop->reference, loop->self ? (int64_t)i : -1,
                                loop->k, &scratch, result->indices + slot * loop->k,
                                result->distances + slot * loop->k);
    result->n_found[slot] = (int32_t)loop->k;
  }
  knnwb_refine_scratch_clear(&scratch);
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
    /* G_MESSAGES_DEBUG=all shows where the time goes. */
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

/* The first round with a margin of candidates past k, then the rows the rounding bound could not
 * certify again with four times as many, until all are certified. A retry round's candidate lists
 * (rows x candidates) are kept within the memory budget by taking its rows in batches. With a
 * group the first round is shared (rows [row0, row0 + n_rows) are this rank's, result holds them)
 * and each rank re-selects its own uncertified rows alone. lists_fresh: result's rows were never
 * written (the first round writes them all). */
gboolean knnwb_knn_rounds(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                          const char *backend, const KnnwbPrepared *query,
                          const KnnwbPrepared *reference, gboolean self, size_t available,
                          int threads, const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                          gboolean lists_fresh, KnnwbNeighbors *result, GError **error)
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
    if (kc * 4 >= total) {
      /* The window holds a large part of all rows (dense ties: rows alike up to scale, such as
       * two-column correlations or sparse counts): a screened round would refine most rows
       * anyway, after a selection whose lists (rows x kc) and sorts cost more than the exact
       * distances, and then maybe once more with every row (20,011 x 2 rows, abs-pearson, k = 1:
       * 39 s, rounds of 9,216 and 18,106 candidates). Compare each row with every row instead.
       * Exact by construction: no certificate needed. */
      g_debug(
          "knnwb: %u row(s) compared with every row (their windows may hold %zu or more of %zu)",
          rows->len, kc, total);
      const gint64 start = g_get_monotonic_time();
      KnnwbExhaustiveLoop loop = {
          query, reference, self, k, (const int64_t *)(void *)rows->data, result, options->cancel};
      knnwb_parallel_for(threads, rows->len, 16, knnwb_exhaustive_rows, &loop);
      result->n_exhaustive += rows->len;
      g_array_free(rows, TRUE);
      g_debug("knnwb: exhaustive rows %.3f s", (double)(g_get_monotonic_time() - start) / 1e6);
      if (options->cancel != NULL && *options->cancel) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while refining rows");
        return FALSE;
      }
      break;
    }
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
