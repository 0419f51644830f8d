/*
 * The parts of a group run that move lists between ranks, through the group's operations only (the
 * core knows no message-passing library): the default group, the rows a rank owns, and gathering
 * every rank's lists (merging the candidates of a shared self job: knn_group_merge.c).
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
