/* Gathers for callers of the group: every rank's count (the blocks' layout), every rank's block
 * of bytes (labels, rows) on every rank, every rank's block of rows as one matrix, and every rank's
 * lists of its own rows onto rank 0 alone, for the outputs rank 0 builds a graph for, so that no
 * other rank ever holds more than its share of the lists. */
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "engine/engine.h"

gboolean knnwb_knn_group_gather_values(const KnnwbKnnGroup *group, int64_t value, int64_t *values,
                                       GError **error)
{
  const size_t ranks = (size_t)group->size;
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  for (size_t r = 0; r < ranks; r++) {
    send[r] = &value;
    bytes[r] = sizeof value;
    receive[r] = &values[r];
  }
  return group->exchange(group, send, bytes, (void *const *)receive, bytes, error);
}

gboolean knnwb_knn_group_gather_bytes(const KnnwbKnnGroup *group, const void *mine,
                                      const size_t *bytes, void *all, GError **error)
{
  const size_t ranks = (size_t)group->size, me = (size_t)group->rank;
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  for (size_t r = 0, at = 0; r < ranks; at += bytes[r], r++) {
    send[r] = mine;
    send_bytes[r] = bytes[me];
    receive[r] = (char *)all + at;
  }
  return group->exchange(group, send, send_bytes, (void *const *)receive, bytes, error);
}

KnnwbMatrix *knnwb_knn_group_gather_rows(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                         const int64_t *sizes, GError **error)
{
  const size_t ranks = (size_t)group->size, d = block->n_cols;
  size_t n = 0;
  for (size_t r = 0; r < ranks; r++)
    n += (size_t)sizes[r];
  g_autoptr(KnnwbMatrix) whole = knnwb_matrix_new(n, d, error);
  /* Test hook (as KNNWB_PARTITION_DIFFER_RANK): KNNWB_GATHER_ROWS_FAIL_RANK=r makes rank r find no
   * memory for them. */
  const char *fail = g_getenv("KNNWB_GATHER_ROWS_FAIL_RANK");
  if (whole != NULL && fail != NULL && *fail != '\0' && atoi(fail) == group->rank) {
    g_clear_pointer(&whole, knnwb_matrix_free);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %zu x %zu floats for every rank's rows", n, d);
  }
  if (!group->agree(group, whole != NULL, error))
    return NULL;
  g_autofree size_t *bytes = g_new(size_t, ranks);
  for (size_t r = 0; r < ranks; r++)
    bytes[r] = (size_t)sizes[r] * d * sizeof(float);
  if (!knnwb_knn_group_gather_bytes(group, block->values, bytes, whole->values, error))
    return NULL;
  /* The ranks a reader kept (every rank read the same way; a rank without rows may have none). */
  const float *mine = knnwb_matrix_row_ranks(block);
  int64_t have = mine != NULL;
  if (!group->reduce(group, &have, 1, KNNWB_GROUP_SUM, error))
    return NULL;
  if (have > 0) {
    float *row_ranks = g_new0(float, MAX(n * d, 1));
    knnwb_matrix_take_row_ranks(whole, row_ranks);
    if (!knnwb_knn_group_gather_bytes(group, mine ? mine : block->values, bytes, row_ranks, error))
      return NULL;
  }
  return g_steal_pointer(&whole);
}

/* This block's labels as they travel: for each row a byte (1: labelled, 0: not), then its label
 * and a NUL when it has one. */
static GString *knnwb_knn_group_pack_labels(const KnnwbMatrix *block)
{
  GString *packed = g_string_new(NULL);
  for (size_t i = 0; i < block->n_rows; i++) {
    const char *label = knnwb_matrix_row_label(block, i);
    g_string_append_c(packed, label != NULL);
    if (label != NULL)
      g_string_append_len(packed, label, (gssize)strlen(label) + 1);
  }
  return packed;
}

gboolean knnwb_knn_group_gather_packed(const KnnwbKnnGroup *group, const void *mine, size_t length,
                                       const char *what, char **all, size_t *total, GError **error)
{
  const size_t ranks = (size_t)group->size;
  *all = NULL;
  *total = 0;
  g_autofree int64_t *lengths = g_new(int64_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)length, lengths, error))
    return FALSE;
  g_autofree size_t *bytes = g_new(size_t, ranks);
  size_t sum = 0;
  for (size_t r = 0; r < ranks; r++)
    sum += bytes[r] = (size_t)lengths[r];
  g_autofree char *buffer = g_try_malloc(MAX(sum, (size_t)1));
  if (buffer == NULL)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the %zu bytes of every rank's %s", sum, what);
  if (!group->agree(group, buffer != NULL, error) ||
      !knnwb_knn_group_gather_bytes(group, mine, bytes, buffer, error))
    return FALSE;
  *all = g_steal_pointer(&buffer);
  *total = sum;
  return TRUE;
}

gboolean knnwb_knn_group_gather_labels(const KnnwbKnnGroup *group, const KnnwbMatrix *block,
                                       KnnwbMatrix *whole, GError **error)
{
  int64_t any = block->row_labels != NULL;
  if (!group->reduce(group, &any, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  if (any == 0)
    return TRUE;
  g_autoptr(GString) mine = knnwb_knn_group_pack_labels(block);
  g_autofree char *all = NULL;
  size_t total;
  if (!knnwb_knn_group_gather_packed(group, mine->str, mine->len, "row labels", &all, &total,
                                     error))
    return FALSE;
  for (size_t i = 0, at = 0; i < whole->n_rows && at < total; i++) {
    const gboolean labelled = all[at++] != 0;
    if (labelled) {
      knnwb_matrix_set_row_label(whole, i, all + at);
      at += strlen(all + at) + 1;
    }
  }
  return TRUE;
}

gboolean knnwb_neighbors_gather_root(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                     KnnwbNeighbors **all, GError **error)
{
  *all = NULL;
  const size_t ranks = (size_t)group->size, k = own->k;
  const gboolean root = group->rank == 0;
  /* Every rank's row count: where its rows go on rank 0. */
  g_autofree int64_t *counts = g_new0(int64_t, ranks);
  if (!knnwb_knn_group_gather_values(group, (int64_t)own->n_queries, counts, error))
    return FALSE;
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  size_t n = 0;
  for (size_t r = 0; r < ranks; r++)
    n += (size_t)counts[r];
  GError *local = NULL;
  g_autoptr(KnnwbNeighbors) gathered = root ? knnwb_knn_result_new(0, n, k, &local) : NULL;
  if (!group->agree(group, !root || gathered != NULL, &local)) {
    g_propagate_error(error, local);
    return FALSE;
  }
  if (root) {
    gathered->backend_used = g_strdup(own->backend_used);
    gathered->screen_used = own->screen_used;
    gathered->n_reselected = own->n_reselected;
    gathered->n_exhaustive = own->n_exhaustive;
  }
  const struct {
    const void *mine;
    void *all;
    size_t size;
  } arrays[] = {{own->indices, root ? gathered->indices : NULL, k * sizeof(int64_t)},
                {own->distances, root ? gathered->distances : NULL, k * sizeof(double)},
                {own->n_found, root ? gathered->n_found : NULL, sizeof(int32_t)}};
  for (guint a = 0; a < G_N_ELEMENTS(arrays); a++) {
    for (size_t r = 0, at = 0; r < ranks; at += (size_t)counts[r], r++) {
      send[r] = r == 0 ? arrays[a].mine : NULL;
      send_bytes[r] = r == 0 ? own->n_queries * arrays[a].size : 0;
      receive[r] = root ? (char *)arrays[a].all + at * arrays[a].size : NULL;
      receive_bytes[r] = root ? (size_t)counts[r] * arrays[a].size : 0;
    }
    if (!group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error))
      return FALSE;
  }
  *all = g_steal_pointer(&gathered);
  return TRUE;
}
