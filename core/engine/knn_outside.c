/*
 * "Nearest row in another group": the exact MST's Borůvka rounds ask it for the points whose kNN
 * lists hold only their own component. The backend selects candidates with pairs of one group
 * masked out, and the candidates are refined and certified exactly like kNN lists (k = 1), in
 * core's certify loop (certify.c): more candidates for the rows that fail (exact ties), and every
 * row outside the group for rows whose window holds a large part of them (dense ties).
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "cpu/cpu.h"
#include "engine/engine.h"
#include "partition/partition.h"
#include "tree/tree.h"

struct KnnwbOutsideSearch {
  KnnwbKnnOptions options;
  KnnwbPrepared prepared;
  KnnwbTreeOutside *tree; /* rows of a few columns: a k-d tree answers (core/tree/), no backend */
  /* Rows of many columns on the CPU: cells of the rows answer where their bounds pay
   * (core/partition/), made at the first run with enough asking rows. */
  KnnwbPartitionOutside *cells;
  gboolean cells_tried;
  KnnwbSelectFunc select;
  char *backend;
  int threads;
};

KnnwbOutsideSearch *knnwb_outside_search_new(const KnnwbMatrix *data,
                                             const KnnwbKnnOptions *options, GError **error)
{
  if (!knnwb_matrix_check_finite(data, error))
    return NULL;
  KnnwbOutsideSearch *search = g_new0(KnnwbOutsideSearch, 1);
  search->options = *options;
  search->threads = knnwb_thread_count(options->n_threads);
  if (!knnwb_prepared_init(&search->prepared, data, options->metric, FALSE, "data", search->threads,
                           NULL, options->cancel, error)) {
    knnwb_outside_search_free(search);
    return NULL;
  }
  /* Rows of a few columns: the tree's answers are the same, each in about log n steps where the
   * tile search compares the row with every row. */
  if (search->prepared.n_invalid == 0 &&
      knnwb_tree_outside_applies(data->n_rows, data->n_cols, options)) {
    search->tree = knnwb_tree_outside_new(&search->prepared, options, error);
    if (search->tree == NULL) {
      knnwb_outside_search_free(search);
      return NULL;
    }
    search->backend = g_strdup("cpu (k-d tree)");
    return search;
  }
  if (!knnwb_knn_choose_backend(options, &search->select, &search->backend, error)) {
    knnwb_outside_search_free(search);
    return NULL;
  }
  if (search->select != knnwb_cpu_select && !knnwb_cuda_select_supports_groups()) {
    search->select = knnwb_cpu_select;
    g_free(search->backend);
    search->backend = g_strdup("cpu");
  }
  return search;
}

void knnwb_outside_search_free(KnnwbOutsideSearch *search)
{
  if (search == NULL)
    return;
  knnwb_tree_outside_free(search->tree);
  knnwb_partition_outside_free(search->cells);
  knnwb_prepared_clear(&search->prepared);
  g_free(search->backend);
  g_free(search);
}

/* One call of knnwb_outside_search_run: the certify loop's rows are slots t of the caller's rows
 * (rows[t]), answered into out_index[t] / out_distance[t]. */
typedef struct {
  const KnnwbOutsideSearch *search;
  const int32_t *group;    /* every row's group */
  const int64_t *rows;     /* the caller's query rows */
  const size_t *available; /* per slot: rows outside its group */
  int64_t *out_index;
  double *out_distance;
} KnnwbOutsideRun;

/* A round's slots refined from their candidates. */
typedef struct {
  const KnnwbOutsideRun *run;
  const int64_t *slots;
  size_t kc;
  const int64_t *cand_index;
  const float *cand_score;
  unsigned char *uncertified;
} KnnwbOutsideLoop;

static void knnwb_outside_refine(size_t first, size_t last, void *user)
{
  KnnwbOutsideLoop *loop = user;
  const KnnwbOutsideRun *run = loop->run;
  const KnnwbPrepared *p = &run->search->prepared;
  KnnwbRefineScratch scratch = {0};
  for (size_t t = first; t < last; t++) {
    const size_t slot = (size_t)loop->slots[t];
    loop->uncertified[t] = 0;
    if (run->available[slot] == 0) {
      run->out_index[slot] = -1;
      run->out_distance[slot] = INFINITY;
      continue;
    }
    gboolean ok =
        knnwb_refine_row(p, (size_t)run->rows[slot], p, -1, loop->cand_index + t * loop->kc,
                         loop->cand_score + t * loop->kc, NULL, loop->kc, run->available[slot], 1,
                         &scratch, &run->out_index[slot], &run->out_distance[slot]);
    loop->uncertified[t] = ok ? 0 : 1;
  }
  knnwb_refine_scratch_clear(&scratch);
}

/* The select job of a round: the gathered query rows against every row, pairs of one group
 * masked out. */
static void knnwb_outside_fill_job(const KnnwbOutsideSearch *search, KnnwbSelectJob *job,
                                   const float *gathered, const int32_t *query_group, size_t count,
                                   const int32_t *group, size_t kc, int64_t *cand_index,
                                   float *cand_score)
{
  const KnnwbPrepared *p = &search->prepared;
  memset(job, 0, sizeof *job);
  job->query = gathered;
  job->n_query = count;
  job->reference = p->scored;
  job->n_reference = p->n;
  job->reference_sqnorms = p->sqnorms;
  job->reference_invalid = p->invalid;
  job->dim = p->d;
  job->score_kind = knnwb_metric_score_kind(p->metric);
  job->kc = kc;
  job->n_threads = search->threads;
  job->memory_bytes = search->select == knnwb_cpu_select ? search->options.memory_bytes
                                                         : search->options.gpu_memory_bytes;
  job->devices = search->options.devices;
  job->n_devices = search->options.n_devices;
  knnwb_knn_gpu_share(&search->options, &job->device_share, &job->device_shares);
  job->cancel = search->options.cancel;
  job->out_index = cand_index;
  job->out_score = cand_score;
  job->query_group = query_group;
  job->reference_group = group;
}

/* The certify loop's rounds (the first one too): the slots' rows selected with kc candidates,
 * refined and certified; uncertified slots appended to left. */
static gboolean knnwb_outside_round(void *data, const int64_t *slots, size_t count, size_t kc,
                                    GArray *left, GError **error)
{
  const KnnwbOutsideRun *run = data;
  const KnnwbOutsideSearch *search = run->search;
  const KnnwbPrepared *p = &search->prepared;
  const size_t d = p->d;
  const char *what = "the nearest-outside search";
  size_t cells;
  if (!knnwb_size_multiply(count, kc, &cells)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%zu rows x %zu candidates overflow",
                count, kc);
    return FALSE;
  }
  int64_t *cand_index = g_try_malloc(MAX(cells, (size_t)1) * sizeof(int64_t));
  float *cand_score = g_try_malloc(MAX(cells, (size_t)1) * sizeof(float));
  float *gathered = g_try_malloc(MAX(count * d, (size_t)1) * sizeof(float));
  int32_t *query_group = NULL;
  unsigned char *uncertified = NULL;
  gboolean ok = cand_index != NULL && cand_score != NULL && gathered != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %zu rows x %zu candidates", count, kc);
  ok = ok &&
       (query_group = knnwb_try_new_array(count, sizeof(int32_t), what, count, error)) != NULL &&
       (uncertified = knnwb_try_new0_array(count, sizeof(unsigned char), what, count, error)) !=
           NULL;
  if (ok) {
    for (size_t t = 0; t < count; t++) {
      const size_t row = (size_t)run->rows[slots[t]];
      memcpy(gathered + t * d, p->scored + row * d, d * sizeof(float));
      query_group[t] = run->group[row];
    }
    KnnwbSelectJob job;
    knnwb_outside_fill_job(search, &job, gathered, query_group, count, run->group, kc, cand_index,
                           cand_score);
    char message[512] = "";
    ok = knnwb_knn_status_to_error(search->select(&job, message, sizeof message), message,
                                   search->backend, error);
  }
  if (ok) {
    KnnwbOutsideLoop loop = {run, slots, kc, cand_index, cand_score, uncertified};
    knnwb_parallel_for(search->threads, count, 256, knnwb_outside_refine, &loop);
    for (size_t t = 0; t < count; t++)
      if (uncertified[t])
        g_array_append_val(left, slots[t]);
  }
  g_free(cand_index);
  g_free(cand_score);
  g_free(gathered);
  g_free(query_group);
  g_free(uncertified);
  return ok;
}

/* The certify loop's exhaustive round: each slot's row against every row outside its group, the
 * nearest by (exact distance, index), as the refine orders them (knnwb_exhaustive_run: a few rows
 * take the rows in slices, one a thread). */
static gboolean knnwb_outside_exhaustive(void *data, const int64_t *slots, size_t count,
                                         GError **error)
{
  const KnnwbOutsideRun *run = data;
  const char *what = "the nearest-outside search";
  g_autofree int64_t *rows = knnwb_try_new_array(count, sizeof(int64_t), what, count, error);
  g_autofree int64_t *index = knnwb_try_new_array(count, sizeof(int64_t), what, count, error);
  g_autofree double *distance = knnwb_try_new_array(count, sizeof(double), what, count, error);
  if (rows == NULL || index == NULL || distance == NULL)
    return FALSE;
  for (size_t t = 0; t < count; t++)
    rows[t] = run->rows[slots[t]];
  const KnnwbPrepared *p = &run->search->prepared;
  const KnnwbExhaustiveJob job = {.query = p,
                                  .reference = p,
                                  .rows = rows,
                                  .group = run->group,
                                  .n_rows = count,
                                  .k = 1,
                                  .out_index = index,
                                  .out_distance = distance,
                                  .in_order = TRUE,
                                  .threads = run->search->threads,
                                  .cancel = run->search->options.cancel};
  if (!knnwb_exhaustive_run(&job))
    return TRUE; /* cancelled: the certify loop says so */
  for (size_t t = 0; t < count; t++) {
    const size_t slot = (size_t)slots[t];
    run->out_index[slot] = index[t];
    run->out_distance[slot] = distance[t];
  }
  return TRUE;
}

/* Per slot, the rows outside its group (group ids checked), and the largest of them. */
static gboolean knnwb_outside_available(const KnnwbPrepared *p, const int32_t *group,
                                        const int64_t *rows, size_t n_rows, size_t *available,
                                        size_t *max_available, GError **error)
{
  const size_t n = p->n;
  for (size_t i = 0; i < n; i++)
    if (group[i] < 0 || (size_t)group[i] >= n) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "group id %d of row %zu is outside [0, %zu)", group[i], i, n);
      return FALSE;
    }
  size_t *group_size =
      knnwb_try_new0_array(n, sizeof(size_t), "the nearest-outside search", n, error);
  if (group_size == NULL)
    return FALSE;
  for (size_t i = 0; i < n; i++)
    group_size[group[i]]++;
  *max_available = 0;
  for (size_t t = 0; t < n_rows; t++) {
    available[t] = n - group_size[group[rows[t]]];
    *max_available = MAX(*max_available, available[t]);
  }
  g_free(group_size);
  return TRUE;
}

/* The tile search's answers for rows[0, n_rows) (available[t]: rows outside row t's group, the
 * largest max_available > 0): a first round of 9 candidates a row (k = 1 plus the bound's margin),
 * then core's certify loop. */
static gboolean knnwb_outside_tiles(KnnwbOutsideSearch *search, const int32_t *group,
                                    const int64_t *rows, size_t n_rows, const size_t *available,
                                    size_t max_available, int64_t *out_index, double *out_distance,
                                    GError **error)
{
  KnnwbOutsideRun run = {search, group, rows, available, out_index, out_distance};
  const size_t kc = MIN(max_available, (size_t)9);
  GArray *slots = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), (guint)n_rows);
  for (size_t t = 0; t < n_rows; t++) {
    const int64_t slot = (int64_t)t;
    g_array_append_val(slots, slot);
  }
  GArray *uncertified = g_array_new(FALSE, FALSE, sizeof(int64_t));
  gboolean ok = knnwb_outside_round(&run, (const int64_t *)(void *)slots->data, n_rows, kc,
                                    uncertified, error);
  g_array_free(slots, TRUE);
  const KnnwbCertify certify = {knnwb_outside_round,
                                knnwb_outside_exhaustive,
                                NULL,
                                &run,
                                max_available,
                                0,
                                search->options.cancel,
                                search->prepared.d,
                                search->select == knnwb_cpu_select};
  KnnwbCertifyCounts counts = {0};
  if (ok)
    ok = knnwb_certify_run(&certify, kc, &uncertified, &counts, error);
  else
    g_array_free(uncertified, TRUE);
  if (ok && counts.reselected > 0)
    g_debug("knnwb: nearest outside: %zu row(s) re-selected, %zu compared with every row",
            counts.reselected, counts.exhaustive);
  return ok;
}

/* The rows the cells left (answered[t] 0) through the tile search, their answers put in their
 * slots. */
static gboolean knnwb_outside_tiles_left(KnnwbOutsideSearch *search, const int32_t *group,
                                         const int64_t *rows, size_t n_rows,
                                         const size_t *available, const unsigned char *answered,
                                         int64_t *out_index, double *out_distance, GError **error)
{
  const char *what = "the nearest-outside search";
  size_t left = 0, max_available = 0;
  for (size_t t = 0; t < n_rows; t++)
    left += answered[t] ? 0 : 1;
  if (left == 0)
    return TRUE;
  g_autofree size_t *slot = knnwb_try_new_array(left, sizeof(size_t), what, left, error);
  g_autofree int64_t *sub_rows = knnwb_try_new_array(left, sizeof(int64_t), what, left, error);
  g_autofree size_t *sub_available = knnwb_try_new_array(left, sizeof(size_t), what, left, error);
  g_autofree int64_t *index = knnwb_try_new_array(left, sizeof(int64_t), what, left, error);
  g_autofree double *distance = knnwb_try_new_array(left, sizeof(double), what, left, error);
  if (slot == NULL || sub_rows == NULL || sub_available == NULL || index == NULL ||
      distance == NULL)
    return FALSE;
  left = 0;
  for (size_t t = 0; t < n_rows; t++)
    if (!answered[t]) {
      slot[left] = t;
      sub_rows[left] = rows[t];
      sub_available[left] = available[t];
      max_available = MAX(max_available, available[t]);
      left++;
    }
  if (!knnwb_outside_tiles(search, group, sub_rows, left, sub_available, max_available, index,
                           distance, error))
    return FALSE;
  for (size_t t = 0; t < left; t++) {
    out_index[slot[t]] = index[t];
    out_distance[slot[t]] = distance[t];
  }
  return TRUE;
}

/* The cells of the CPU's search for rows of many columns, made once, at the first run they take
 * (knnwb_partition_outside_applies). FALSE: cancelled while making them. */
static gboolean knnwb_outside_cells_ready(KnnwbOutsideSearch *search, size_t n_rows, GError **error)
{
  if (search->cells_tried || search->select != knnwb_cpu_select ||
      !knnwb_partition_outside_applies(&search->prepared, n_rows))
    return TRUE;
  search->cells_tried = TRUE;
  GError *local = NULL;
  search->cells = knnwb_partition_outside_new(&search->prepared, &search->options, &local);
  if (local != NULL) {
    g_propagate_error(error, local);
    return FALSE;
  }
  return TRUE;
}

/* Rows of a few columns: the tree; of many, on the CPU: the cells where they pay, the tile search
 * for the rest. Every pending row answered in the caller's slot. */
gboolean knnwb_outside_search_run(KnnwbOutsideSearch *search, const int32_t *group,
                                  const int64_t *rows, size_t n_rows, int64_t *out_index,
                                  double *out_distance, GError **error)
{
  if (n_rows == 0)
    return TRUE;
  /* Sized by the input: a failure is an error, not an abort. */
  size_t max_available;
  g_autofree size_t *available =
      knnwb_try_new_array(n_rows, sizeof(size_t), "the nearest-outside search", n_rows, error);
  if (available == NULL || !knnwb_outside_available(&search->prepared, group, rows, n_rows,
                                                    available, &max_available, error))
    return FALSE;
  if (max_available == 0) { /* every row's group is the whole set */
    for (size_t t = 0; t < n_rows; t++) {
      out_index[t] = -1;
      out_distance[t] = INFINITY;
    }
    return TRUE;
  }
  if (search->tree != NULL)
    return knnwb_tree_outside_run(search->tree, group, rows, n_rows, out_index, out_distance,
                                  error);
  if (!knnwb_outside_cells_ready(search, n_rows, error))
    return FALSE;
  if (search->cells == NULL || !knnwb_partition_outside_applies(&search->prepared, n_rows))
    return knnwb_outside_tiles(search, group, rows, n_rows, available, max_available, out_index,
                               out_distance, error);
  g_autofree unsigned char *answered =
      knnwb_try_new_array(n_rows, 1, "the nearest-outside search", n_rows, error);
  return answered != NULL &&
         knnwb_partition_outside_run(search->cells, group, rows, n_rows, available, out_index,
                                     out_distance, answered, error) &&
         knnwb_outside_tiles_left(search, group, rows, n_rows, available, answered, out_index,
                                  out_distance, error);
}
