/*
 * Lists cut again between ranks. A whole-input run over a group's ranks gives each rank the lists
 * of its even share of the rows (knnwb_knn_group_rows), while split ranks hold blocks of any sizes
 * (text read by byte ranges gives uneven ones): when split ranks put their rows together for a
 * whole-input run, each rank's block's lists come from the even shares that hold them, in three
 * exchanges of contiguous slices (indices, distances, counts), nothing packed.
 */
#include "engine/engine.h"
#include "group/group.h"

/* Rows [*first, *last) of the blocks counts gives (rank r's). */
static void knnwb_group_block_of(const int64_t *counts, int r, size_t *first, size_t *last)
{
  *first = 0;
  for (int s = 0; s < r; s++)
    *first += (size_t)counts[s];
  *last = *first + (size_t)counts[r];
}

/* One array of the lists (width bytes a row) sent from this rank's even share (from) to the ranks
 * whose blocks hold its rows, received into this rank's block (to). */
static gboolean knnwb_group_recut_array(const KnnwbKnnGroup *group, const int64_t *counts, size_t n,
                                        const void *from, void *to, size_t width, GError **error)
{
  const int size = group->size;
  size_t even_first, even_last, mine_first, mine_last;
  knnwb_knn_group_rows(n, group->rank, size, &even_first, &even_last);
  knnwb_group_block_of(counts, group->rank, &mine_first, &mine_last);
  g_autofree const void **send = g_new0(const void *, (size_t)size);
  g_autofree void **receive = g_new0(void *, (size_t)size);
  g_autofree size_t *send_bytes = g_new0(size_t, (size_t)size);
  g_autofree size_t *receive_bytes = g_new0(size_t, (size_t)size);
  for (int r = 0; r < size; r++) {
    size_t first, last, other_first, other_last;
    knnwb_group_block_of(counts, r, &first, &last); /* r's block: what this rank sends it */
    first = MAX(first, even_first);
    last = MIN(last, even_last);
    if (first < last) {
      send[r] = (const char *)from + (first - even_first) * width;
      send_bytes[r] = (last - first) * width;
    }
    knnwb_knn_group_rows(n, r, size, &other_first, &other_last); /* what r sends this rank */
    other_first = MAX(other_first, mine_first);
    other_last = MIN(other_last, mine_last);
    if (other_first < other_last) {
      receive[r] = (char *)to + (other_first - mine_first) * width;
      receive_bytes[r] = (other_last - other_first) * width;
    }
  }
  return group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
}

/* Whether the blocks (counts, n rows in all) are the even shares. */
static gboolean knnwb_group_blocks_even(const KnnwbKnnGroup *group, const int64_t *counts, size_t n)
{
  gboolean even = TRUE;
  for (int r = 0; r < group->size; r++) {
    size_t first, last;
    knnwb_knn_group_rows(n, r, group->size, &first, &last);
    even = even && (size_t)counts[r] == last - first;
  }
  return even;
}

gboolean knnwb_knn_group_recut(const KnnwbKnnGroup *group, const int64_t *counts, size_t n,
                               KnnwbNeighbors **lists, GError **error)
{
  if (knnwb_group_blocks_even(group, counts, n))
    return TRUE;
  KnnwbNeighbors *even = *lists;
  const size_t k = even->k;
  size_t first, last;
  knnwb_group_block_of(counts, group->rank, &first, &last);
  KnnwbNeighbors *block = knnwb_knn_result_new(first, last - first, k, error);
  gboolean ok = group->agree(group, block != NULL, error) &&
                knnwb_group_recut_array(group, counts, n, even->indices, block->indices,
                                        k * sizeof(int64_t), error) &&
                knnwb_group_recut_array(group, counts, n, even->distances, block->distances,
                                        k * sizeof(double), error) &&
                knnwb_group_recut_array(group, counts, n, even->n_found, block->n_found,
                                        sizeof(int32_t), error);
  if (!ok) {
    knnwb_neighbors_free(block);
    g_clear_pointer(lists, knnwb_neighbors_free);
    return FALSE;
  }
  block->backend_used = g_steal_pointer(&even->backend_used);
  block->screen_used = even->screen_used;
  block->n_reselected = even->n_reselected;
  block->n_exhaustive = even->n_exhaustive;
  knnwb_neighbors_free(even);
  *lists = block;
  return TRUE;
}
