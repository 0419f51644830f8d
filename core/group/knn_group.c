/*
 * The parts of a group run that move lists between ranks, through the group's operations only (the
 * core knows no message-passing library): the rows a rank owns, and gathering
 * every rank's lists (merging the candidates of a shared self job: knn_group_merge.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "engine/engine.h"
#include "group/group.h"

void knnwb_knn_group_rows(size_t n, int rank, int size, size_t *first, size_t *last)
{
  const size_t ranks = (size_t)MAX(size, 1), r = (size_t)MAX(rank, 0);
  const size_t base = n / ranks, extra = n % ranks;
  *first = r * base + MIN(r, extra);
  *last = *first + base + (r < extra ? 1 : 0);
}

gboolean knnwb_knn_group_agree_backend(const KnnwbKnnGroup *group, gboolean ok,
                                       gboolean has_backend, gboolean on_gpu, GError **error)
{
  int64_t kinds[2] = {has_backend && on_gpu, has_backend && !on_gpu};
  GError *transport = NULL;
  const gboolean reduced = group->reduce(group, kinds, 2, KNNWB_GROUP_MAX, &transport);
  if (!reduced && ok) {
    g_propagate_error(error, transport);
    transport = NULL;
    ok = FALSE;
  } else if (ok && kinds[0] && kinds[1]) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the ranks differ in their backend: some run on GPUs, some on the CPU (a rank "
                "without a usable GPU): give every rank one (as many GPUs as ranks on each host), "
                "or use --backend cpu");
    ok = FALSE;
  }
  g_clear_error(&transport);
  return group->agree(group, ok, error);
}

KnnwbNeighbors *knnwb_knn_group_gather_blocks(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                              size_t n, const size_t *first, const size_t *count,
                                              GError **error)
{
  const size_t ranks = (size_t)group->size, k = own->k;
  GError *local = NULL;
  KnnwbNeighbors *all = knnwb_knn_result_new(0, n, k, &local);
  gboolean ok = all != NULL;
  if (!group->agree(group, ok, &local)) {
    g_propagate_error(error, local);
    knnwb_neighbors_free(all);
    return NULL;
  }
  all->backend_used = g_strdup(own->backend_used);
  all->screen_used = own->screen_used;
  all->n_reselected = own->n_reselected;
  all->n_exhaustive = own->n_exhaustive;
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
      send[r] = arrays[a].mine;
      send_bytes[r] = own->n_queries * arrays[a].size;
      receive[r] = (char *)arrays[a].all + first[r] * arrays[a].size;
      receive_bytes[r] = count[r] * arrays[a].size;
    }
    ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
  }
  if (!ok) {
    knnwb_neighbors_free(all);
    return NULL;
  }
  return all;
}

KnnwbNeighbors *knnwb_knn_group_gather(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                       size_t n, GError **error)
{
  const size_t ranks = (size_t)MAX(group->size, 1);
  g_autofree size_t *first = g_new(size_t, ranks);
  g_autofree size_t *count = g_new(size_t, ranks);
  for (size_t r = 0; r < ranks; r++) {
    size_t last;
    knnwb_knn_group_rows(n, (int)r, group->size, &first[r], &last);
    count[r] = last - first[r];
  }
  return knnwb_knn_group_gather_blocks(group, own, n, first, count, error);
}
