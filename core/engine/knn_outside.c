/*
 * "Nearest row in another group": the exact MST's Borůvka rounds ask it for the points whose kNN
 * lists hold only their own component. The backend selects candidates with pairs of one group
 * masked out, and the candidates are refined and certified exactly like kNN lists (k = 1), with
 * more candidates for the rows that fail (exact ties).
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include "knn_internal.h"

struct KnnwbOutsideSearch {
  KnnwbKnnOptions options;
  KnnwbPrepared prepared;
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
                           NULL, options->cancel, error) ||
      !knnwb_knn_choose_backend(options, &search->select, &search->backend, error)) {
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
  knnwb_prepared_clear(&search->prepared);
  g_free(search->backend);
  g_free(search);
}

typedef struct {
  const KnnwbOutsideSearch *search;
  const int64_t *rows;     /* pending query rows */
  const size_t *available; /* per pending row: rows outside its group */
  size_t kc;
  const int64_t *cand_index;
  const float *cand_score;
  int64_t *answer_index; /* per pending row */
  double *answer_distance;
  unsigned char *uncertified;
} KnnwbOutsideLoop;

static void knnwb_outside_refine(size_t first, size_t last, void *user)
{
  KnnwbOutsideLoop *loop = user;
  const KnnwbPrepared *p = &loop->search->prepared;
  KnnwbRefineScratch scratch = {0};
  for (size_t t = first; t < last; t++) {
    if (loop->available[t] == 0) {
      loop->answer_index[t] = -1;
      loop->answer_distance[t] = INFINITY;
      loop->uncertified[t] = 0;
      continue;
    }
    gboolean ok =
        knnwb_refine_row(p, (size_t)loop->rows[t], p, -1, loop->cand_index + t * loop->kc,
                         loop->cand_score + t * loop->kc, NULL, loop->kc, loop->available[t], 1,
                         &scratch, &loop->answer_index[t], &loop->answer_distance[t]);
    loop->uncertified[t] = ok ? 0 : 1;
  }
  knnwb_refine_scratch_clear(&scratch);
}

gboolean knnwb_outside_search_run(KnnwbOutsideSearch *search, const int32_t *group,
                                  const int64_t *rows, size_t n_rows, int64_t *out_index,
                                  double *out_distance, GError **error)
{
  const KnnwbPrepared *p = &search->prepared;
  const size_t n = p->n, d = p->d;
  if (n_rows == 0)
    return TRUE;
  for (size_t i = 0; i < n; i++)
    if (group[i] < 0 || (size_t)group[i] >= n) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "group id %d of row %zu is outside [0, %zu)", group[i], i, n);
      return FALSE;
    }
  /* Sized by the input: a failure is an error, not an abort. */
  const char *what = "the nearest-outside search";
  size_t *group_size = NULL, *slot = NULL, *available = NULL;
  int64_t *pending = NULL;
  if ((group_size = knnwb_try_new0_array(n, sizeof(size_t), what, n, error)) == NULL ||
      (pending = knnwb_try_new_array(n_rows, sizeof(int64_t), what, n_rows, error)) == NULL ||
      (slot = knnwb_try_new_array(n_rows, sizeof(size_t), what, n_rows, error)) == NULL ||
      (available = knnwb_try_new_array(n_rows, sizeof(size_t), what, n_rows, error)) == NULL) {
    g_free(group_size);
    g_free(pending);
    g_free(slot);
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    group_size[group[i]]++;
  /* Pending rows shrink from round to round; answers land in the caller's arrays. */
  memcpy(pending, rows, n_rows * sizeof(int64_t));
  size_t n_pending = n_rows, max_available = 0;
  for (size_t t = 0; t < n_rows; t++) {
    slot[t] = t;
    available[t] = n - group_size[group[rows[t]]];
    max_available = MAX(max_available, available[t]);
  }
  gboolean ok = FALSE;
  size_t kc = MIN(max_available, (size_t)9);
  int64_t *cand_index = NULL, *answer_index = NULL;
  float *cand_score = NULL, *gathered = NULL;
  double *answer_distance = NULL;
  int32_t *query_group = NULL;
  unsigned char *uncertified = NULL;
  while (n_pending > 0) {
    size_t cells;
    if (kc == 0 || !knnwb_size_multiply(n_pending, kc, &cells) ||
        (cand_index = g_try_malloc(cells * sizeof(int64_t))) == NULL ||
        (cand_score = g_try_malloc(cells * sizeof(float))) == NULL ||
        (gathered = g_try_malloc(MAX(n_pending * d, (size_t)1) * sizeof(float))) == NULL) {
      if (kc == 0) { /* every pending row's group is the whole set */
        for (size_t t = 0; t < n_pending; t++) {
          out_index[slot[t]] = -1;
          out_distance[slot[t]] = INFINITY;
        }
        ok = TRUE;
        goto out;
      }
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                  "cannot allocate %zu rows x %zu candidates", n_pending, kc);
      goto out;
    }
    if ((query_group = knnwb_try_new_array(n_pending, sizeof(int32_t), what, n_pending, error)) ==
            NULL ||
        (answer_index = knnwb_try_new_array(n_pending, sizeof(int64_t), what, n_pending, error)) ==
            NULL ||
        (answer_distance =
             knnwb_try_new_array(n_pending, sizeof(double), what, n_pending, error)) == NULL ||
        (uncertified = knnwb_try_new0_array(n_pending, sizeof(unsigned char), what, n_pending,
                                            error)) == NULL)
      goto out;
    for (size_t t = 0; t < n_pending; t++) {
      memcpy(gathered + t * d, p->scored + (size_t)pending[t] * d, d * sizeof(float));
      query_group[t] = group[pending[t]];
    }
    KnnwbSelectJob job = {0};
    job.query = gathered;
    job.n_query = n_pending;
    job.reference = p->scored;
    job.n_reference = n;
    job.reference_sqnorms = p->sqnorms;
    job.reference_invalid = p->invalid;
    job.dim = d;
    job.score_kind = knnwb_metric_score_kind(p->metric);
    job.kc = kc;
    job.n_threads = search->threads;
    job.memory_bytes = search->select == knnwb_cpu_select ? search->options.memory_bytes
                                                          : search->options.gpu_memory_bytes;
    job.devices = search->options.devices;
    job.n_devices = search->options.n_devices;
    job.cancel = search->options.cancel;
    job.out_index = cand_index;
    job.out_score = cand_score;
    job.query_group = query_group;
    job.reference_group = group;
    char message[512] = "";
    if (!knnwb_knn_status_to_error(search->select(&job, message, sizeof message), message,
                                   search->backend, error))
      goto out;
    KnnwbOutsideLoop loop = {search,     pending,      available,       kc,         cand_index,
                             cand_score, answer_index, answer_distance, uncertified};
    knnwb_parallel_for(search->threads, n_pending, 256, knnwb_outside_refine, &loop);
    size_t kept = 0;
    for (size_t t = 0; t < n_pending; t++) {
      out_index[slot[t]] = answer_index[t];
      out_distance[slot[t]] = answer_distance[t];
      if (uncertified[t]) {
        pending[kept] = pending[t];
        slot[kept] = slot[t];
        available[kept] = available[t];
        kept++;
      }
    }
    if (kept > 0 && kc >= max_available) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
                  "internal error: nearest-outside certification failed");
      goto out;
    }
    n_pending = kept;
    kc = MIN(max_available, kc * 4);
    g_clear_pointer(&cand_index, g_free);
    g_clear_pointer(&cand_score, g_free);
    g_clear_pointer(&gathered, g_free);
    g_clear_pointer(&query_group, g_free);
    g_clear_pointer(&answer_index, g_free);
    g_clear_pointer(&answer_distance, g_free);
    g_clear_pointer(&uncertified, g_free);
  }
  ok = TRUE;
out:
  g_free(cand_index);
  g_free(cand_score);
  g_free(gathered);
  g_free(query_group);
  g_free(answer_index);
  g_free(answer_distance);
  g_free(uncertified);
  g_free(pending);
  g_free(slot);
  g_free(available);
  g_free(group_size);
  return ok;
}
