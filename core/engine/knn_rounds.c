/*
 * The search of the kNN engine in one process (or on the whole input of every rank): a first
 * selection round with a margin of candidates past k, its candidates refined into exact neighbour
 * lists whose order a rounding-error bound certifies, then core's certify loop (certify.c) with
 * this file's re-selection and exhaustive rounds (knnwb_knn_rounds). One round (knnwb_knn_round)
 * fills the backend's job, runs a group's share of a self job's tiles and merges the ranks'
 * candidates, has host arrays faulted in while a GPU computes, and refines the candidates on the
 * host or certifies what a GPU refined.
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "cpu/cpu.h"
#include "engine/engine_internal.h"
#include "group/group.h"

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
  const float *bound;          /* per job row: its starting threshold (+inf: none), or NULL */
} KnnwbRefineLoop;

/* The entries of a list (k slots, -1 after the last), as n_found counts them. */
static int32_t knnwb_knn_row_found(const int64_t *index, size_t k)
{
  size_t found = 0;
  while (found < k && index[found] >= 0)
    found++;
  return (int32_t)found;
}

/* A row whose selection started from a bound (knnwb_refine_score_bound of the exact distance it
 * holds elsewhere) and did not fill its kc candidates took every pair scored below the bound, so
 * every pair within that distance: its list is exact as far as it can matter, with fewer than k
 * entries when fewer lie within. */
static gboolean knnwb_knn_row_within_bound(const int64_t *cand_index, size_t kc, float bound)
{
  if (!isfinite(bound))
    return FALSE;
  for (size_t c = 0; c < kc; c++)
    if (cand_index[c] < 0)
      return TRUE;
  return FALSE;
}

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
    int32_t found = (int32_t)loop->k;
    if (loop->bound != NULL &&
        knnwb_knn_row_within_bound(loop->cand_index + t * loop->kc, loop->kc, loop->bound[t])) {
      ok = TRUE;
      found = knnwb_knn_row_found(out_index, loop->k);
    }
    result->n_found[slot] = found;
    loop->uncertified[t] = ok ? 0 : 1;
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
  size_t kc;
  const float *bound; /* as KnnwbRefineLoop's */
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
    const size_t valid = (size_t)MAX(loop->valid[t], 0);
    gboolean ok = knnwb_refine_certify_row(loop->query, i, loop->reference, loop->worst[t], valid,
                                           loop->available, loop->k, out_index, out_distance);
    int32_t found = (int32_t)loop->k;
    if (loop->bound != NULL && isfinite(loop->bound[t]) && valid < loop->kc) {
      ok = TRUE; /* (knnwb_knn_row_within_bound) */
      found = knnwb_knn_row_found(out_index, loop->k);
    }
    result->n_found[slot] = found;
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
  knnwb_knn_gpu_share(options, &job->device_share, &job->device_shares);
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

/* One round: what it was asked (the first fields) and what it holds while it runs. rows (NULL = the
 * n_rows rows from row0) are the query rows concerned. With a group (first round only: rows ==
 * NULL) a self job is shared: it runs this rank's share of the tiles over every row, the ranks'
 * candidates are merged for this rank's rows [row0, row0 + n_rows), and those are refined; a
 * query job selects and refines this rank's rows. lists_fresh: result's rows were never written
 * (knnwb_knn_result_alloc without clear); the round writes every slot of them. */
typedef struct {
  const KnnwbKnnOptions *options;
  KnnwbSelectFunc select;
  const char *backend;
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t kc, available;
  int threads;
  const int64_t *rows;
  size_t n_rows, row0;
  const KnnwbKnnGroup *group;
  gboolean lists_fresh;
  KnnwbNeighbors *result;
  const double *within; /* per query row: a distance it needs no pair beyond, or NULL */
  /* state */
  gboolean shared, on_device;
  size_t job_rows, cells;
  int64_t *cand_index;
  float *cand_score;
  double *cand_distance;
  unsigned char *flags;
  float *gathered;
  float *worst;
  int32_t *valid_count;
  float *bound;           /* per job row: knnwb_refine_score_bound of within, or NULL */
  float *order_centroids; /* the job's (knnwb_knn_round_order), or NULL */
  struct KnnwbOrderAhead *order_ahead; /* centroids being fitted meanwhile, or NULL */
  int distances_filled, refined;
  /* A shared job refined to k before its lists travel (knn_shared_best.c): every row's k best of
   * this rank's share, put as they come into what travels to each row's rank. */
  gboolean near;
  KnnwbGroupBestLists *best_lists;
  size_t list0; /* the job row of the refine's first row in the candidate arrays */
  KnnwbGroupBounds bounds;
  KnnwbGroupPlan plan;
  KnnwbGroupProgress group_progress;
  KnnwbSelectPrefault prefault;
  gint64 select_start;
} KnnwbRound;

/* A shared job's lists refined to k before they travel (knnwb_knn_shared_best_wanted): the room
 * for every row's k best, worst score and valid count as they travel (each row's in its rank's
 * part), and this rank's rows' bounds and valid counts after the merge, on every rank or none (a
 * rank short of it sends every rank the kc-wide candidates). Collective. */
static gboolean knnwb_knn_round_near(KnnwbRound *round, GError **error)
{
  const size_t n = round->query->n, k = round->options->k, rows = round->n_rows;
  size_t cells = 0;
  int64_t near = knnwb_knn_shared_best_wanted(round->on_device) && k > 0 && k <= round->kc &&
                 knnwb_size_multiply(n, k, &cells);
  if (near) {
    round->best_lists = knnwb_group_best_lists_new(round->group, n, k, round->row0, rows);
    round->worst = g_try_malloc(MAX(rows, (size_t)1) * sizeof(float));
    round->valid_count = g_try_malloc(MAX(rows, (size_t)1) * sizeof(int32_t));
    near = round->best_lists != NULL && round->worst != NULL && round->valid_count != NULL;
  }
  if (!round->group->reduce(round->group, &near, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  round->near = near != 0;
  if (!round->near) {
    g_clear_pointer(&round->best_lists, knnwb_group_best_lists_free);
    g_clear_pointer(&round->worst, g_free);
    g_clear_pointer(&round->valid_count, g_free);
  }
  return TRUE;
}

/* KnnwbSelectJob.out_refined_take of a shared job refined on the device: its rows into the lists
 * that travel (a self job has one side). */
static void knnwb_knn_round_near_take(void *data, int side, size_t first, size_t count,
                                      const int64_t *index, const double *distance,
                                      const float *worst, const int32_t *valid)
{
  (void)side;
  knnwb_group_best_lists_put(data, first, count, index, distance, worst, valid);
}

/* The shared job's rows refined to k (here where the backend declined), merged over the ranks into
 * this rank's lists, with each row's bound and valid count where the certificate reads them. */
static gboolean knnwb_knn_round_merge_near(KnnwbRound *round, gint64 start, GError **error)
{
  const KnnwbKnnGroup *group = round->group;
  const size_t k = round->options->k, rows = round->n_rows;
  const gboolean on_device = round->refined;
  if (!round->refined)
    knnwb_knn_shared_best_host(
        round->query, round->reference, round->kc, k, round->cand_index, round->cand_score,
        round->distances_filled ? round->cand_distance : NULL, round->threads, round->best_lists);
  const gint64 merge_start = g_get_monotonic_time();
  float *bound = g_try_malloc(MAX(rows, (size_t)1) * sizeof(float));
  int32_t *valid = g_try_malloc(MAX(rows, (size_t)1) * sizeof(int32_t));
  gboolean ok = bound != NULL && valid != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate the bounds of %zu rows",
                rows);
  const size_t slot0 = round->row0 - round->result->first_row;
  ok = group->agree(group, ok, error) &&
       knnwb_group_best_lists_merge(group, round->best_lists, round->kc, round->threads,
                                    round->result->indices + slot0 * k,
                                    round->result->distances + slot0 * k, bound, valid, error);
  if (ok) {
    /* the certificate reads each own row's at its place in the round's rows */
    memcpy(round->worst, bound, rows * sizeof(float));
    memcpy(round->valid_count, valid, rows * sizeof(int32_t));
    round->refined = 1;
    g_debug("knnwb: rank %d: the rows' %zu nearest of each rank exchanged and merged %.3f s "
            "(refined %s, %.3f s)",
            group->rank, k, (double)(g_get_monotonic_time() - merge_start) / 1e6,
            on_device ? "on the device" : "on the host", (double)(merge_start - start) / 1e6);
  }
  g_free(bound);
  g_free(valid);
  return ok;
}

/* The candidate arrays and flags; for a shared job also the threshold rounds, agreed between the
 * ranks before any selects (from here on every rank makes the same collective calls). */
static gboolean knnwb_knn_round_allocate(KnnwbRound *round, GError **error)
{
  const size_t cells = MAX(round->cells, (size_t)1);
  round->cand_index = knnwb_memory_try_alloc(cells * sizeof(int64_t), FALSE);
  round->cand_score = knnwb_memory_try_alloc(cells * sizeof(float), FALSE);
  round->flags = g_try_malloc0(MAX(round->n_rows, (size_t)1));
  gboolean ok = round->cand_index != NULL && round->cand_score != NULL && round->flags != NULL;
  if (round->shared) {
    /* GPU ranks share thresholds; CPU ranks would gain little per round (their tiles are many and
     * small) and have no hook for it. */
    /* (agreed first: a rank whose board failed must not leave the others in the next reduction) */
    const gboolean bounds = knnwb_group_bounds_init(&round->bounds, round->group, round->query->n,
                                                    round->on_device, error);
    if (!round->group->agree(round->group, bounds, error) || !knnwb_knn_round_near(round, error))
      return FALSE;
    ok = ok && knnwb_group_bounds_ready(&round->bounds);
  }
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate candidate lists for %zu rows x %zu candidates", round->job_rows,
                round->kc);
  if (round->shared && !round->group->agree(round->group, ok, error))
    return FALSE;
  return ok;
}

/* The job's query rows: the first round's rows in place (a shared self job: every row, this rank's
 * share of the tiles, rank 0's progress standing for all), a retry round's gathered. */
static gboolean knnwb_knn_round_query(KnnwbRound *round, KnnwbSelectJob *job, GError **error)
{
  const KnnwbKnnOptions *options = round->options;
  const KnnwbKnnGroup *group = round->group;
  const size_t d = round->query->d;
  if (round->rows != NULL) {
    /* Retry rounds query a gathered copy of the uncertified rows against every reference. */
    round->gathered = g_try_malloc(MAX(round->n_rows * d, (size_t)1) * sizeof(float));
    if (round->gathered == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot gather %zu rows",
                  round->n_rows);
      return FALSE;
    }
    for (size_t t = 0; t < round->n_rows; t++)
      memcpy(round->gathered + t * d, round->query->scored + (size_t)round->rows[t] * d,
             d * sizeof(float));
    job->query = round->gathered;
    job->n_query = round->n_rows;
    job->self = FALSE;
    return TRUE;
  }
  job->query = round->query->scored + (round->shared ? 0 : round->row0) * d;
  job->n_query = round->job_rows;
  job->self = round->self;
  if (round->shared) {
    job->share_index = group->rank;
    job->share_count = group->size;
    knnwb_group_plan_init(&round->plan, group);
    job->share_plan = knnwb_group_plan_share;
    job->share_plan_data = &round->plan;
    if (round->bounds.rounds > 0) {
      job->share_bounds = knnwb_group_bounds_share;
      job->share_bounds_data = &round->bounds;
      job->share_bound_rounds = round->bounds.rounds;
    }
  }
  if (group == NULL || group->rank == 0) {
    job->progress = options->progress;
    job->progress_data = options->progress_data;
    if (group != NULL && options->progress != NULL) {
      job->progress = knnwb_knn_group_progress;
      job->progress_data = &round->group_progress;
    }
  }
  return TRUE;
}

/* A GPU computes the exact distances of its final candidates (bit for bit as here) when it has
 * room for the rows; the host then only sorts. Not for retry rounds (gathered rows). When the
 * round is its own (no group merge by score follows), it refines them too: sorted by (distance,
 * index) and cut to k on the device, straight into the lists, so that only k entries per row come
 * back (k = 4,096: the download of kc = 4,608 candidates of 20 bytes per row and the host's sort
 * were three quarters of the run; k = 20 on 1,533,876 rows: 0.1 s of a 3.2 s command, and 0.5 s
 * of a partitioned search of 2,000,000 rows at k = 30, whose every cell downloaded its lists). The
 * candidate arrays are then never touched, so they cost no memory. The backend may still decline
 * (no room for the sort, or several GPUs that merge on the host). */
static void knnwb_knn_round_device_outputs(KnnwbRound *round, KnnwbSelectJob *job)
{
  const KnnwbPrepared *query = round->query, *reference = round->reference;
  const size_t d = query->d, k = round->options->k, job_row0 = round->shared ? 0 : round->row0;
  job->memory_bytes = round->options->gpu_memory_bytes;
  if (round->rows == NULL)
    round->cand_distance =
        knnwb_memory_try_alloc(MAX(round->cells, (size_t)1) * sizeof(double), FALSE);
  if (round->cand_distance == NULL)
    return;
  job->exact_kind = knnwb_metric_exact_kind(query->metric);
  job->exact_query = query->exact + job_row0 * d;
  job->exact_reference = reference->exact;
  job->exact_query_mean = query->mean ? query->mean + job_row0 : NULL;
  job->exact_query_squares = query->sum_squares ? query->sum_squares + job_row0 : NULL;
  job->exact_reference_mean = reference->mean;
  job->exact_reference_squares = reference->sum_squares;
  job->out_distance = round->cand_distance;
  job->out_distance_filled = &round->distances_filled;
  if (round->near) {
    job->out_k = k;
    job->out_refined_take = knnwb_knn_round_near_take;
    job->out_refined_take_data = round->best_lists;
    job->out_refined = &round->refined;
    return;
  }
  if (!round->shared) {
    round->worst = g_try_malloc(MAX(round->n_rows, (size_t)1) * sizeof(float));
    round->valid_count = g_try_malloc(MAX(round->n_rows, (size_t)1) * sizeof(int32_t));
  }
  if (round->worst != NULL && round->valid_count != NULL) {
    const size_t slot0 = round->row0 - round->result->first_row;
    job->out_k = k;
    job->out_k_index = round->result->indices + slot0 * k;
    job->out_k_distance = round->result->distances + slot0 * k;
    job->out_worst_score = round->worst;
    job->out_valid = round->valid_count;
    job->out_refined = &round->refined;
  }
}

/* While a GPU computes, helper threads fault in the host arrays its download and the refine will
 * write (1.6 GB at 1.5 M rows, k = 20: the download took 0.24 s instead of 0.14 s with the page
 * faults). Not the candidate arrays a device refine never touches. */
static void knnwb_knn_round_prefault(KnnwbRound *round, KnnwbSelectJob *job)
{
  KnnwbSelectPrefault *prefault = &round->prefault;
  *prefault = (KnnwbSelectPrefault){.progress = job->progress, .progress_data = job->progress_data};
  if (!round->on_device || round->rows != NULL)
    return;
  const size_t k = round->options->k;
  const gboolean lists = round->lists_fresh && round->group == NULL;
  const size_t slot0 = round->row0 - round->result->first_row, list_cells = round->n_rows * k;
  void *blocks[] = {
      job->out_k == 0 ? round->cand_index : NULL,
      job->out_k == 0 ? round->cand_score : NULL,
      job->out_k == 0 ? round->cand_distance : NULL,
      lists ? round->result->indices + slot0 * k : NULL,
      lists ? round->result->distances + slot0 * k : NULL,
  };
  const size_t bytes[] = {round->cells * sizeof(int64_t), round->cells * sizeof(float),
                          round->cells * sizeof(double), list_cells * sizeof(int64_t),
                          list_cells * sizeof(double)};
  memcpy(prefault->blocks, blocks, sizeof blocks);
  memcpy(prefault->bytes, bytes, sizeof bytes);
  prefault->threads = MAX(1, round->threads / 2);
  job->progress = knnwb_knn_prefault_progress;
  job->progress_data = prefault;
}

typedef struct {
  const KnnwbRound *round;
  gsize finite; /* rows with a finite bound (atomically added) */
} KnnwbRoundBounds;

static void knnwb_knn_round_bound_rows(size_t first, size_t last, void *user)
{
  KnnwbRoundBounds *b = user;
  const KnnwbRound *round = b->round;
  size_t finite = 0;
  for (size_t t = first; t < last; t++) {
    const size_t i = round->rows ? (size_t)round->rows[t] : round->row0 + t;
    round->bound[t] =
        round->query->invalid != NULL && round->query->invalid[i]
            ? INFINITY
            : knnwb_refine_score_bound(round->query, i, round->reference, round->within[i]);
    finite += isfinite(round->bound[t]);
  }
  g_atomic_pointer_add(&b->finite, (gssize)finite);
}

/* A query job whose rows hold neighbours elsewhere (round->within) starts each row's threshold at
 * the score beyond which no pair can matter: fewer candidates and merges (the visits of a
 * partitioned search, where most pairs lie beyond). Backends that ignore the bounds return full
 * lists, which certify as before. */
static gboolean knnwb_knn_round_bounds(KnnwbRound *round, KnnwbSelectJob *job, GError **error)
{
  if (round->within == NULL || round->self || round->shared)
    return TRUE;
  round->bound = knnwb_try_new_array(MAX(job->n_query, (size_t)1), sizeof(float),
                                     "the rows' starting thresholds", job->n_query, error);
  if (round->bound == NULL)
    return FALSE;
  KnnwbRoundBounds b = {.round = round};
  knnwb_parallel_for(round->threads, job->n_query, 4096, knnwb_knn_round_bound_rows, &b);
  g_debug("knnwb: %zu of %zu query rows start from the distance they hold elsewhere",
          (size_t)b.finite, job->n_query);
  if (b.finite > 0)
    job->query_bounds = round->bound;
  else
    g_clear_pointer(&round->bound, g_free);
  return TRUE;
}

/* This thread's shared margin decision (knnwb_knn_margin_memo_set), or NULL. */
static _Thread_local KnnwbMarginMemo *knnwb_margin_memo;

/* Where a GPU's self search groups its rows by default: many rows (a few tiles gain less than
 * the grouping costs) of many columns. Measured on one H200 (docs/performance-gpu.md): 1,533,876
 * x 295 rows, the tile loop 2.21-2.29 s grouped against 2.43-2.45 s; 1,533,876 x 128 real-like
 * metafeatures, whose tiles are fused and bound by their products either way, 1.26-1.31 s against
 * 1.25-1.29 s, so grouping there only added its own cost. */
#define KNNWB_ROW_ORDER_MIN_ROWS ((size_t)262144)
#define KNNWB_ROW_ORDER_MIN_COLUMNS ((size_t)256)

/* Whether a first round's self job on a GPU of one process visits its rows grouped by similarity
 * (knnwb_row_order_centroids) at the sizes above; KNNWB_ROW_ORDER=0 never, =1 at any size (tests,
 * comparisons). Not the sub-searches of a partitioned run (a margin memo set): their rows are one
 * group of clusters already. */
static gboolean knnwb_knn_first_round_orders(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                             const KnnwbPrepared *query, gboolean self,
                                             const KnnwbKnnGroup *group)
{
  const char *mode = g_getenv("KNNWB_ROW_ORDER");
  const gboolean sized =
      query->n >= KNNWB_ROW_ORDER_MIN_ROWS && query->d >= KNNWB_ROW_ORDER_MIN_COLUMNS;
  const gboolean on_device = options->backend != KNNWB_BACKEND_CPU && select != knnwb_cpu_select;
  return self && (group == NULL || group->size <= 1) && on_device && knnwb_margin_memo == NULL &&
         g_strcmp0(mode, "0") != 0 && (sized || g_strcmp0(mode, "1") == 0);
}

/* The centroids fitted on a thread of their own while the margin planner samples the rows (both
 * only read them; the fit took 0.035-0.041 s of a 16-core GPU host's time before the select). */
typedef struct KnnwbOrderAhead {
  const KnnwbPrepared *rows;
  int threads;
  GThread *thread;
  float *centroids;
  size_t cells;
  gint64 start;
} KnnwbOrderAhead;

static gpointer knnwb_order_ahead_fit(gpointer data)
{
  KnnwbOrderAhead *ahead = data;
  ahead->centroids = knnwb_row_order_centroids(ahead->rows, ahead->threads, &ahead->cells);
  return NULL;
}

/* Begins the fit for the first round when it will order its rows (KNNWB_ROW_ORDER_AHEAD=0: in line,
 * to measure); NULL when not, or when no thread could be started (the round fits them itself). */
static KnnwbOrderAhead *knnwb_order_ahead_start(const KnnwbKnnOptions *options,
                                                KnnwbSelectFunc select, const KnnwbPrepared *query,
                                                gboolean self, const KnnwbKnnGroup *group,
                                                int threads)
{
  if (g_strcmp0(g_getenv("KNNWB_ROW_ORDER_AHEAD"), "0") == 0 ||
      !knnwb_knn_first_round_orders(options, select, query, self, group))
    return NULL;
  KnnwbOrderAhead *ahead = g_new0(KnnwbOrderAhead, 1);
  ahead->rows = query;
  ahead->threads = threads;
  ahead->start = g_get_monotonic_time();
  ahead->thread = g_thread_try_new("knnwb-order", knnwb_order_ahead_fit, ahead, NULL);
  if (ahead->thread == NULL)
    g_clear_pointer(&ahead, g_free);
  return ahead;
}

/* Waits for the fit; its centroids (the caller's to free, NULL when none) and their count. */
static float *knnwb_order_ahead_take(KnnwbOrderAhead *ahead, size_t *cells)
{
  if (ahead->thread != NULL)
    g_thread_join(g_steal_pointer(&ahead->thread));
  *cells = ahead->cells;
  ahead->cells = 0;
  return g_steal_pointer(&ahead->centroids);
}

/* The fit waited for and freed, whether or not a round took its centroids. */
static void knnwb_order_ahead_finish(KnnwbOrderAhead *ahead)
{
  if (ahead == NULL)
    return;
  size_t cells;
  g_free(knnwb_order_ahead_take(ahead, &cells));
  g_free(ahead);
}

/* The first round's job visits its rows grouped (knnwb_knn_first_round_orders): the centroids
 * fitted meanwhile, or here. Not the re-selection rounds (their rows are given). */
static void knnwb_knn_round_order(KnnwbRound *round, KnnwbSelectJob *job)
{
  if (round->rows != NULL || round->shared ||
      !knnwb_knn_first_round_orders(round->options, round->select, round->query, round->self,
                                    round->group))
    return;
  const gint64 start = g_get_monotonic_time();
  if (round->order_ahead != NULL)
    round->order_centroids = knnwb_order_ahead_take(round->order_ahead, &job->order_cells);
  else
    round->order_centroids =
        knnwb_row_order_centroids(round->query, round->threads, &job->order_cells);
  job->order_centroids = round->order_centroids;
  if (round->order_ahead != NULL)
    g_debug("knnwb: %zu centroids to group the rows for the GPU's tiles by, fitted beside the "
            "margin planner in %.3f s (waited %.3f s for them)",
            job->order_cells, (double)(g_get_monotonic_time() - round->order_ahead->start) / 1e6,
            (double)(g_get_monotonic_time() - start) / 1e6);
  else
    g_debug("knnwb: %zu centroids to group the rows for the GPU's tiles by, in %.3f s",
            job->order_cells, (double)(g_get_monotonic_time() - start) / 1e6);
}

/* The backend's selection of the round's rows into the candidate arrays (or, refined on the
 * device, into the lists). */
static gboolean knnwb_knn_round_select(KnnwbRound *round, GError **error)
{
  KnnwbSelectJob job;
  knnwb_knn_fill_job(&job, round->options, round->reference, round->threads);
  job.kc = round->kc;
  job.memory_bytes = round->options->memory_bytes;
  job.out_index = round->cand_index;
  job.out_score = round->cand_score;
  if (!knnwb_knn_round_query(round, &job, error) || !knnwb_knn_round_bounds(round, &job, error))
    return FALSE;
  if (round->on_device)
    knnwb_knn_round_device_outputs(round, &job);
  knnwb_knn_round_order(round, &job);
  knnwb_knn_round_prefault(round, &job);
  char message[512] = "";
  round->select_start = g_get_monotonic_time();
  gboolean ok = knnwb_knn_status_to_error(round->select(&job, message, sizeof message), message,
                                          round->backend, error);
  KnnwbPrefault *started = g_atomic_pointer_get(&round->prefault.prefault);
  if (started != NULL) {
    gint64 wait_start = g_get_monotonic_time();
    knnwb_prefault_finish(started);
    g_debug("knnwb: host arrays faulted in during the tile loop (waited %.3f s after it)",
            (double)(g_get_monotonic_time() - wait_start) / 1e6);
  }
  return ok;
}

/* A shared job's end: every rank learns whether every selection worked before any exchanges its
 * lists, then the ranks' candidates are merged for this rank's rows, which now sit at row0 of the
 * all-rows arrays. Collective. */
static gboolean knnwb_knn_round_merge(KnnwbRound *round, gboolean ok, GError **error)
{
  const KnnwbKnnGroup *group = round->group;
  knnwb_group_plan_finish(&round->plan); /* (taken first, as a backend does) */
  knnwb_group_bounds_finish(&round->bounds);
  if (!group->agree(group, ok, error))
    return FALSE;
  gint64 merge_start = g_get_monotonic_time();
  if (round->near)
    return knnwb_knn_round_merge_near(round, merge_start, error);
  gboolean distances_kept = FALSE;
  if (!knnwb_knn_group_merge(group, round->query->n, round->kc, round->cand_index,
                             round->cand_score,
                             round->distances_filled ? round->cand_distance : NULL, round->row0,
                             round->n_rows, round->threads, &distances_kept, error))
    return FALSE;
  g_debug("knnwb: rank %d: candidate exchange and merge %.3f s", group->rank,
          (double)(g_get_monotonic_time() - merge_start) / 1e6);
  round->list0 = round->row0;
  round->distances_filled = distances_kept;
  return TRUE;
}

/* The candidates refined on the host into exact lists and certified, or the device's lists
 * certified; the rows left uncertified appended to left. */
static void knnwb_knn_round_refine(KnnwbRound *round, GArray *left)
{
  const size_t k = round->options->k, kc = round->kc, list0 = round->list0;
  const gint64 refine_start = g_get_monotonic_time();
  const double selected = (double)(refine_start - round->select_start) / 1e6;
  if (round->refined) {
    KnnwbCertifyLoop certify = {round->query,
                                round->reference,
                                k,
                                round->available,
                                round->row0,
                                round->worst,
                                round->valid_count,
                                round->result,
                                round->flags,
                                kc,
                                round->bound};
    knnwb_parallel_for(round->threads, round->n_rows, 1024, knnwb_certify_rows, &certify);
    /* G_MESSAGES_DEBUG=all shows where the time goes. */
    g_debug("knnwb: %zu rows, %zu candidates: select and refine %.3f s (%s, refined on the "
            "device), certificate %.3f s",
            round->n_rows, kc, selected, round->backend,
            (double)(g_get_monotonic_time() - refine_start) / 1e6);
  } else {
    KnnwbRefineLoop loop = {round->query,
                            round->reference,
                            round->self,
                            k,
                            kc,
                            round->available,
                            round->rows,
                            round->row0,
                            round->cand_index + list0 * kc,
                            round->cand_score + list0 * kc,
                            round->distances_filled ? round->cand_distance + list0 * kc : NULL,
                            round->result,
                            round->flags,
                            round->bound};
    knnwb_parallel_for(round->threads, round->n_rows, 256, knnwb_refine_rows, &loop);
    g_debug("knnwb: %zu rows, %zu candidates: select %.3f s, refine %.3f s (%s, exact distances "
            "from the %s)",
            round->n_rows, kc, selected, (double)(g_get_monotonic_time() - refine_start) / 1e6,
            round->backend, round->distances_filled ? "backend" : "host");
  }
  for (size_t t = 0; t < round->n_rows; t++)
    if (round->flags[t]) {
      int64_t i = round->rows ? round->rows[t] : (int64_t)(round->row0 + t);
      g_array_append_val(left, i);
    }
}

static void knnwb_knn_round_free(KnnwbRound *round)
{
  if (round->shared)
    knnwb_group_bounds_clear(&round->bounds); /* a job stopped before its merge */
  if (round->rows == NULL) {
    /* Gigabytes at 1.5 M rows (0.03-0.06 s to unmap): freed once the run returns, not during a
     * re-selection round, whose pinned allocations the unmapping slowed. */
    void *blocks[] = {round->cand_index, round->cand_score, round->cand_distance};
    const size_t bytes[] = {round->cells * sizeof(int64_t), round->cells * sizeof(float),
                            round->cells * sizeof(double)};
    knnwb_release_later(blocks, bytes, G_N_ELEMENTS(blocks));
  } else {
    /* A re-selection batch is sized to the memory budget so that one at a time is held; queued
     * until the run returns, every batch stayed (7.6 GB for 20,000 rows whose every row needed
     * all candidates, with the default 256 MB budget). */
    g_free(round->cand_index);
    g_free(round->cand_score);
    g_free(round->cand_distance);
  }
  knnwb_group_best_lists_free(round->best_lists); /* (its parts unmapped later, as those above) */
  g_free(round->flags);
  g_free(round->gathered);
  g_free(round->worst);
  g_free(round->valid_count);
  g_free(round->bound);
  g_free(round->order_centroids);
}

/* Runs one selection and its refinement (see KnnwbRound); the rows left uncertified are appended
 * to left. */
static gboolean knnwb_knn_round(KnnwbRound *round, GArray *left, GError **error)
{
  /* A self job of a group selects over every row (its share of the tiles touches them all). */
  round->shared = round->group != NULL && round->rows == NULL && round->self;
  round->on_device =
      round->options->backend != KNNWB_BACKEND_CPU && round->select != knnwb_cpu_select;
  round->job_rows = round->shared ? round->query->n : round->n_rows;
  round->group_progress =
      (KnnwbGroupProgress){round->options->progress, round->options->progress_data,
                           round->group ? (uint64_t)round->group->size : 1};
  if (!knnwb_size_multiply(round->job_rows, round->kc, &round->cells)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%zu rows x %zu candidates overflow",
                round->job_rows, round->kc);
    return FALSE;
  }
  gboolean ok = knnwb_knn_round_allocate(round, error);
  if (ok || !round->shared) {
    ok = ok && knnwb_knn_round_select(round, error);
    g_clear_pointer(&round->gathered, g_free);
    if (round->shared)
      ok = knnwb_knn_round_merge(round, ok, error);
    if (ok)
      knnwb_knn_round_refine(round, left);
  }
  knnwb_knn_round_free(round);
  return ok;
}

/* What the certify loop's hooks need of a search (knnwb_knn_rounds). */
typedef struct {
  const KnnwbKnnOptions *options;
  KnnwbSelectFunc select;
  const char *backend;
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t available;
  int threads;
  KnnwbNeighbors *result;
  const double *within;
} KnnwbRounds;

/* The certify loop's re-selection: the rows in batches whose candidate lists (rows x candidates)
 * fit the memory budget, each rank its own rows alone. */
static gboolean knnwb_knn_rounds_reselect(void *data, const int64_t *rows, size_t n_rows, size_t kc,
                                          GArray *left, GError **error)
{
  const KnnwbRounds *rounds = data;
  const size_t batch = knnwb_certify_batch_rows(rounds->options->memory_bytes, kc, 1);
  g_debug("knnwb: %zu row(s) re-selected with %zu candidates, %zu at a time", n_rows, kc, batch);
  for (size_t first = 0; first < n_rows; first += batch) {
    KnnwbRound round = {.options = rounds->options,
                        .select = rounds->select,
                        .backend = rounds->backend,
                        .query = rounds->query,
                        .reference = rounds->reference,
                        .self = rounds->self,
                        .kc = kc,
                        .available = rounds->available,
                        .threads = rounds->threads,
                        .rows = rows + first,
                        .n_rows = MIN(batch, n_rows - first),
                        .result = rounds->result,
                        .within = rounds->within};
    if (!knnwb_knn_round(&round, left, error))
      return FALSE;
  }
  return TRUE;
}

/* The certify loop's exhaustive round: each row compared with every reference row (a few rows:
 * the reference rows split among the threads). */
static gboolean knnwb_knn_rounds_exhaustive(void *data, const int64_t *rows, size_t n_rows,
                                            GError **error)
{
  const KnnwbRounds *rounds = data;
  KnnwbNeighbors *result = rounds->result;
  const size_t k = rounds->options->k;
  int64_t *self_index = NULL;
  if (rounds->self) {
    self_index = knnwb_try_new_array(n_rows, sizeof(int64_t), "the rows compared with every row",
                                     n_rows, error);
    if (self_index == NULL)
      return FALSE;
    memcpy(self_index, rows, n_rows * sizeof(int64_t));
  }
  for (size_t t = 0; t < n_rows; t++) {
    const size_t slot = (size_t)rows[t] - result->first_row;
    if (rounds->query->invalid != NULL && rounds->query->invalid[rows[t]])
      knnwb_knn_row_empty(result, slot, k);
    else
      result->n_found[slot] = (int32_t)k;
  }
  const KnnwbExhaustiveJob job = {.query = rounds->query,
                                  .reference = rounds->reference,
                                  .rows = rows,
                                  .self_index = self_index,
                                  .n_rows = n_rows,
                                  .k = k,
                                  .out_index = result->indices,
                                  .out_distance = result->distances,
                                  .out_first = result->first_row,
                                  .threads = rounds->threads,
                                  .cancel = rounds->options->cancel};
  knnwb_exhaustive_run(&job); /* a cancelled run: the certify loop says so */
  g_free(self_index);
  return TRUE;
}

typedef struct {
  KnnwbNeighbors *result;
  const double *within;
  size_t row0;
} KnnwbRoundsTrim;

/* Rows [row0 + first, row0 + last) cut to their neighbours within their within (the rest -1 and
 * +inf, n_found their count): the same lists whichever candidates beyond it a backend took. */
static void knnwb_knn_rounds_trim_rows(size_t first, size_t last, void *user)
{
  const KnnwbRoundsTrim *trim = user;
  KnnwbNeighbors *result = trim->result;
  const size_t k = result->k;
  for (size_t t = first; t < last; t++) {
    const size_t i = trim->row0 + t, slot = i - result->first_row;
    int64_t *index = result->indices + slot * k;
    double *distance = result->distances + slot * k;
    size_t found = 0;
    while (found < k && index[found] >= 0 && !(distance[found] > trim->within[i]))
      found++;
    for (size_t r = found; r < k; r++) {
      index[r] = -1;
      distance[r] = INFINITY;
    }
    result->n_found[slot] = (int32_t)MIN(found, (size_t)result->n_found[slot]);
  }
}

void knnwb_knn_trim_within(KnnwbNeighbors *result, const double *within, size_t row0, size_t n_rows,
                           int threads)
{
  KnnwbRoundsTrim trim = {result, within, row0};
  knnwb_parallel_for(threads, n_rows, 4096, knnwb_knn_rounds_trim_rows, &trim);
}

void knnwb_knn_margin_memo_set(KnnwbMarginMemo *memo)
{
  knnwb_margin_memo = memo;
}

gboolean knnwb_knn_margin_memo_active(void)
{
  return knnwb_margin_memo != NULL;
}

/* Ranks of one run that each hold every row (their own rows [row0, row0 + n_rows)): one process's
 * KNNWB_MARGIN_SAMPLE sample rows over all of query, each scored on the rank that holds it, and
 * every rank's counts gathered into one plan (knnwb_margin_rule) within the smallest max_kc: one
 * process's plan whatever the ranks, and a rank's share of the work falls with the ranks as its
 * threads do (before, each rank scored 32 rows of its own). kc where a rank was cancelled or the
 * transport failed. Collective. */
static size_t knnwb_knn_rounds_plan_ranks(const KnnwbKnnOptions *options,
                                          const KnnwbPrepared *query,
                                          const KnnwbPrepared *reference, gboolean self, size_t kc,
                                          size_t available, size_t max_kc, int threads,
                                          const KnnwbKnnGroup *group, size_t row0, size_t n_rows)
{
  int64_t cap = (int64_t)MIN(max_kc, (size_t)INT64_MAX);
  if (!group->reduce(group, &cap, 1, KNNWB_GROUP_MIN, NULL))
    return kc;
  const KnnwbMarginPlan plan = knnwb_margin_plan(options->k, kc, available, (size_t)cap);
  const size_t total = MIN((size_t)KNNWB_MARGIN_SAMPLE, query->n);
  size_t all[KNNWB_MARGIN_SAMPLE], mine[KNNWB_MARGIN_SAMPLE], needed[KNNWB_MARGIN_SAMPLE];
  knnwb_margin_sample_rows(0, query->n, total, all);
  size_t count = 0;
  for (size_t s = 0; s < total; s++)
    if (all[s] >= row0 && all[s] - row0 < n_rows)
      mine[count++] = all[s];
  g_autofree double *heap = g_new(double, MAX(count * plan.keep, (size_t)1));
  g_autofree size_t *size = g_new0(size_t, MAX(count, (size_t)1));
  int64_t stop = !knnwb_margin_heaps(query, mine, mine, count, reference, 0, self, plan.keep,
                                     threads, options->cancel, heap, size);
  if (!stop)
    (void)knnwb_margin_decide(query, mine, count, reference, &plan, heap, size, needed);
  if (!group->reduce(group, &stop, 1, KNNWB_GROUP_MAX, NULL) || stop)
    return kc;
  size_t chosen = kc;
  return knnwb_margin_rule_group(group, &plan, needed, count, &chosen, NULL) ? chosen : kc;
}

/* The first round's lists stay within a quarter of the memory the machine can still give (ranks
 * sharing a round: each holds lists for every row, and the host's ranks share its memory). */
size_t knnwb_knn_rounds_candidates(const KnnwbKnnOptions *options, const KnnwbPrepared *query,
                                   const KnnwbPrepared *reference, gboolean self, size_t available,
                                   int threads, const KnnwbKnnGroup *group, size_t row0,
                                   size_t n_rows)
{
  const size_t kc = MIN(available, knnwb_screen_candidates(query->screen, options->k));
  const gboolean ranks = group != NULL && group->size > 1;
  if (ranks && !self) /* (each rank's query rows are its own round: the screen's count) */
    return kc;
  /* (ranks judge by all rows, and say together whether to plan) */
  int64_t plan = knnwb_margin_wanted(query->screen, query->metric, ranks ? query->n : n_rows);
  if (ranks && !group->reduce(group, &plan, 1, KNNWB_GROUP_MIN, NULL))
    return kc;
  if (!plan)
    return kc;
  const int memo_kc = knnwb_margin_memo != NULL ? g_atomic_int_get(&knnwb_margin_memo->kc) : 0;
  /* The memo's value came from another sub-search, which may have had fewer rows available (its
   * planner capped there) than this one's screen margin: never fewer than that margin. */
  if (memo_kc > 0 && !ranks)
    return MIN(available, MAX(kc, (size_t)memo_kc));
  const size_t cell = sizeof(int64_t) + sizeof(float) + sizeof(double);
  const size_t memory = knnwb_memory_available();
  const size_t listed = ranks ? query->n : MAX(n_rows, (size_t)1);
  const size_t max_kc =
      memory == SIZE_MAX
          ? 4 * kc
          : memory / (size_t)(ranks ? MAX(group->local_size, 1) : 1) / 4 / cell / listed;
  const gint64 start = g_get_monotonic_time();
  const size_t chosen =
      ranks ? knnwb_knn_rounds_plan_ranks(options, query, reference, self, kc, available, max_kc,
                                          threads, group, row0, n_rows)
      : n_rows == 0
          ? kc
          : knnwb_margin_choose(query, reference, self, row0, n_rows, options->k, kc, available,
                                max_kc, KNNWB_MARGIN_SAMPLE, threads, options->cancel, NULL);
  g_debug("knnwb: margin planner: %d sample rows, %zu candidates per row (the screen's %zu), "
          "%.3f s",
          KNNWB_MARGIN_SAMPLE, chosen, kc, (double)(g_get_monotonic_time() - start) / 1e6);
  if (knnwb_margin_memo != NULL)
    g_atomic_int_set(&knnwb_margin_memo->kc, (gint)MIN(chosen, (size_t)G_MAXINT));
  return chosen;
}

/* The first round with a margin of candidates past k, then the certify loop. With a group the
 * first round is shared (rows [row0, row0 + n_rows) are this rank's, result holds them) and each
 * rank re-selects its own uncertified rows alone. lists_fresh: result's rows were never written
 * (the first round writes them all). */
gboolean knnwb_knn_rounds(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                          const char *backend, const KnnwbPrepared *query,
                          const KnnwbPrepared *reference, gboolean self, size_t available,
                          int threads, const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                          gboolean lists_fresh, const double *within, KnnwbNeighbors *result,
                          GError **error)
{
  /* The screening precision sets the certificate's bound, and so the margin of candidates past k
   * that absorbs it; certification checks that the margin sufficed. */
  KnnwbOrderAhead *order_ahead =
      knnwb_order_ahead_start(options, select, query, self, group, threads);
  const size_t kc = knnwb_knn_rounds_candidates(options, query, reference, self, available, threads,
                                                group, row0, n_rows);
  GArray *uncertified = g_array_new(FALSE, FALSE, sizeof(int64_t));
  KnnwbRound first = {.options = options,
                      .select = select,
                      .backend = backend,
                      .query = query,
                      .reference = reference,
                      .self = self,
                      .kc = kc,
                      .available = available,
                      .threads = threads,
                      .n_rows = n_rows,
                      .row0 = row0,
                      .group = group,
                      .lists_fresh = lists_fresh,
                      .result = result,
                      .within = within,
                      .order_ahead = order_ahead};
  const gboolean first_ok = knnwb_knn_round(&first, uncertified, error);
  knnwb_order_ahead_finish(order_ahead);
  if (!first_ok) {
    g_array_free(uncertified, TRUE);
    return FALSE;
  }
  /* The CPU re-selects in FP32: BF16's window (2 2^-7 of |q||r|) can hold every row (cosine on
   * rows with a common offset, all within 0.01 of each other: 20,000 x 128 rows took 38 s, every
   * row re-selected until all were candidates, against 0.43 s in FP32), and a wider window never
   * narrows it; FP32's is 2^-17 of that. The certificate takes the FP32 bound with the FP32 rows.
   */
  KnnwbPrepared query_fp32, reference_fp32;
  if (uncertified->len > 0 && query->screen != KNNWB_SCREEN_FP32 && select == knnwb_cpu_select) {
    query_fp32 = *query;
    reference_fp32 = *reference;
    const gboolean same = reference == query;
    knnwb_prepared_set_screen(&query_fp32, same ? &query_fp32 : &reference_fp32, KNNWB_SCREEN_FP32);
    query = &query_fp32;
    reference = same ? &query_fp32 : &reference_fp32;
  }
  KnnwbRounds rounds = {options, select,    backend, query,  reference,
                        self,    available, threads, result, within};
  const KnnwbCertify certify = {knnwb_knn_rounds_reselect,
                                knnwb_knn_rounds_exhaustive,
                                NULL,
                                &rounds,
                                self ? available + 1 : available,
                                0,
                                options->cancel,
                                query->d,
                                options->backend == KNNWB_BACKEND_CPU ||
                                    select == knnwb_cpu_select};
  KnnwbCertifyCounts counts = {0};
  gboolean ok = knnwb_certify_run(&certify, kc, &uncertified, &counts, error);
  result->n_reselected += counts.reselected;
  result->n_exhaustive += counts.exhaustive;
  return ok;
}
