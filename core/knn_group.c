/*
 * The parts of a group run that move lists between ranks, through the group's operations only (the
 * core knows no message-passing library): merging each rank's candidates of a shared self job into
 * the candidates of the rows a rank owns, and gathering every rank's lists.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "knn_internal.h"

static const KnnwbKnnGroup *knnwb_knn_default_group;

void knnwb_knn_group_set_default(const KnnwbKnnGroup *group)
{
  knnwb_knn_default_group = group;
}

const KnnwbKnnGroup *knnwb_knn_group_get_default(void)
{
  return knnwb_knn_default_group;
}

void knnwb_knn_group_rows(size_t n, int rank, int size, size_t *first, size_t *last)
{
  const size_t ranks = (size_t)MAX(size, 1), r = (size_t)MAX(rank, 0);
  const size_t base = n / ranks, extra = n % ranks;
  *first = r * base + MIN(r, extra);
  *last = *first + base + (r < extra ? 1 : 0);
}

/* The blocks of rows [first_s, last_s) x width elements of size bytes, one per rank, from a
 * row-major array of all rows: contiguous, so they are sent in place. */
static void knnwb_knn_group_blocks(const KnnwbKnnGroup *group, size_t n, const void *all,
                                   size_t width, size_t size, const void **send, size_t *bytes)
{
  for (int s = 0; s < group->size; s++) {
    size_t first, last;
    knnwb_knn_group_rows(n, s, group->size, &first, &last);
    send[s] = (const char *)all + first * width * size;
    bytes[s] = (last - first) * width * size;
  }
}

typedef struct {
  float score;
  int64_t index;
  double distance;
} KnnwbGroupCandidate;

static int knnwb_group_candidate_compare(const void *a, const void *b)
{
  const KnnwbGroupCandidate *x = a, *y = b;
  if (x->score != y->score)
    return x->score < y->score ? -1 : 1;
  return x->index < y->index ? -1 : (x->index > y->index);
}

typedef struct {
  size_t ranks, rows, kc;
  const int64_t *index; /* ranks blocks of rows x kc */
  const float *score;
  const double *distance;
  int64_t *out_index; /* rows x kc */
  float *out_score;
  double *out_distance;
} KnnwbGroupMerge;

static void knnwb_knn_group_merge_rows(size_t first, size_t last, void *user)
{
  KnnwbGroupMerge *merge = user;
  const size_t kc = merge->kc, block = merge->rows * kc;
  KnnwbGroupCandidate *pool = g_new(KnnwbGroupCandidate, merge->ranks * kc);
  for (size_t i = first; i < last; i++) {
    size_t count = 0;
    for (size_t r = 0; r < merge->ranks; r++)
      for (size_t c = 0; c < kc; c++) {
        const size_t at = r * block + i * kc + c;
        if (merge->index[at] < 0)
          continue;
        pool[count++] = (KnnwbGroupCandidate){merge->score[at], merge->index[at],
                                              merge->distance ? merge->distance[at] : NAN};
      }
    /* The tiles of the shares are disjoint, so no pair comes twice: the kc best by (score,
     * index) of the union are the kc best of the whole job. */
    qsort(pool, count, sizeof *pool, knnwb_group_candidate_compare);
    for (size_t c = 0; c < kc; c++) {
      const gboolean kept = c < count;
      merge->out_index[i * kc + c] = kept ? pool[c].index : -1;
      merge->out_score[i * kc + c] = kept ? pool[c].score : INFINITY;
      if (merge->out_distance != NULL)
        merge->out_distance[i * kc + c] = kept ? pool[c].distance : NAN;
    }
  }
  g_free(pool);
}

gboolean knnwb_knn_group_merge(const KnnwbKnnGroup *group, size_t n, size_t kc,
                               const int64_t *index, const float *score, const double *distance,
                               size_t row0, size_t rows, int64_t **own_index, float **own_score,
                               double **own_distance, GError **error)
{
  const size_t ranks = (size_t)group->size;
  *own_index = NULL;
  *own_score = NULL;
  *own_distance = NULL;
  /* Distances travel only when every rank's backend computed them. */
  int64_t with_distance = distance != NULL;
  if (!group->reduce(group, &with_distance, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  const size_t cells = rows * kc; /* a share of n x kc, which was allocated */
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  int64_t *all_index = g_try_malloc(MAX(ranks * cells, (size_t)1) * sizeof(int64_t));
  float *all_score = g_try_malloc(MAX(ranks * cells, (size_t)1) * sizeof(float));
  double *all_distance =
      with_distance ? g_try_malloc(MAX(ranks * cells, (size_t)1) * sizeof(double)) : NULL;
  *own_index = g_try_malloc(MAX(cells, (size_t)1) * sizeof(int64_t));
  *own_score = g_try_malloc(MAX(cells, (size_t)1) * sizeof(float));
  *own_distance = with_distance ? g_try_malloc(MAX(cells, (size_t)1) * sizeof(double)) : NULL;
  gboolean ok = all_index != NULL && all_score != NULL && (!with_distance || all_distance) &&
                *own_index != NULL && *own_score != NULL && (!with_distance || *own_distance);
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the candidate lists of %zu ranks for %zu rows", ranks, rows);
  /* Allocation may fail on one rank only: agree before exchanging. */
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  const struct {
    const void *all;
    void *received;
    size_t size;
  } arrays[] = {{index, all_index, sizeof(int64_t)},
                {score, all_score, sizeof(float)},
                {distance, all_distance, sizeof(double)}};
  for (guint a = 0; a < G_N_ELEMENTS(arrays) && ok; a++) {
    if (arrays[a].received == NULL)
      continue;
    knnwb_knn_group_blocks(group, n, arrays[a].all, kc, arrays[a].size, send, send_bytes);
    for (size_t r = 0; r < ranks; r++) {
      receive[r] = (char *)arrays[a].received + r * cells * arrays[a].size;
      receive_bytes[r] = cells * arrays[a].size;
    }
    ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
  }
  if (ok) {
    KnnwbGroupMerge merge = {ranks,        rows,       kc,         all_index,    all_score,
                             all_distance, *own_index, *own_score, *own_distance};
    knnwb_parallel_for(0, rows, 1024, knnwb_knn_group_merge_rows, &merge);
  }
  (void)row0;
out:
  g_free(all_index);
  g_free(all_score);
  g_free(all_distance);
  if (!ok) {
    g_clear_pointer(own_index, g_free);
    g_clear_pointer(own_score, g_free);
    g_clear_pointer(own_distance, g_free);
  }
  return ok;
}

KnnwbNeighbors *knnwb_knn_group_gather(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                       size_t n, GError **error)
{
  const size_t ranks = (size_t)group->size, k = own->k;
  KnnwbNeighbors *all = g_new0(KnnwbNeighbors, 1);
  all->n_queries = n;
  all->k = k;
  all->backend_used = g_strdup(own->backend_used);
  all->indices = g_try_malloc(MAX(n * k, (size_t)1) * sizeof(int64_t));
  all->distances = g_try_malloc(MAX(n * k, (size_t)1) * sizeof(double));
  all->n_found = g_try_malloc(MAX(n, (size_t)1) * sizeof(int32_t));
  gboolean ok = all->indices != NULL && all->distances != NULL && all->n_found != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the neighbour lists of all %zu rows (k = %zu) on this rank", n, k);
  if (!group->agree(group, ok, error)) {
    knnwb_neighbors_free(all);
    return NULL;
  }
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  const struct {
    const void *mine;
    void *all;
    size_t size;
  } arrays[] = {{own->indices, all->indices, k * sizeof(int64_t)},
                {own->distances, all->distances, k * sizeof(double)},
                {own->n_found, all->n_found, sizeof(int32_t)}};
  for (guint a = 0; a < G_N_ELEMENTS(arrays) && ok; a++) {
    for (size_t r = 0; r < ranks; r++) {
      size_t first, last;
      knnwb_knn_group_rows(n, (int)r, group->size, &first, &last);
      send[r] = arrays[a].mine;
      send_bytes[r] = own->n_queries * arrays[a].size;
      receive[r] = (char *)arrays[a].all + first * arrays[a].size;
      receive_bytes[r] = (last - first) * arrays[a].size;
    }
    ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
  }
  if (!ok) {
    knnwb_neighbors_free(all);
    return NULL;
  }
  return all;
}
