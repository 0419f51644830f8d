/* Neighbour lists (KnnwbNeighbors): allocated for a block of rows, every slot emptied in
 * parallel (or left for a search that writes them all), and freed. */
#include <math.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine_internal.h"

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

void knnwb_knn_result_clear(size_t first, size_t last, void *user)
{
  KnnwbNeighbors *result = user;
  for (size_t i = first; i < last; i++) {
    result->indices[i] = -1;
    result->distances[i] = INFINITY;
  }
}

/* This thread's kept arrays (knnwb_knn_result_keep_set), or NULL. */
static _Thread_local KnnwbResultKeep *knnwb_result_keep;

void knnwb_knn_result_keep_set(KnnwbResultKeep *keep)
{
  knnwb_result_keep = keep;
}

void knnwb_knn_result_keep_clear(KnnwbResultKeep *keep)
{
  g_clear_pointer(&keep->indices, g_free);
  g_clear_pointer(&keep->distances, g_free);
  keep->cells = 0;
}

void knnwb_knn_result_keep_put(KnnwbResultKeep *keep, KnnwbNeighbors *lists)
{
  if (lists == NULL)
    return;
  const size_t cells = lists->indices != NULL && lists->indices == keep->lent
                           ? keep->lent_cells
                           : lists->n_queries * lists->k;
  if (cells > keep->cells && lists->indices != NULL && lists->distances != NULL) {
    knnwb_knn_result_keep_clear(keep);
    keep->indices = g_steal_pointer(&lists->indices);
    keep->distances = g_steal_pointer(&lists->distances);
    keep->cells = cells;
  }
  knnwb_neighbors_free(lists);
}

/* Index and distance arrays of cells each: the thread's kept ones when they are large enough. */
static void knnwb_knn_result_arrays(KnnwbNeighbors *result, size_t cells)
{
  KnnwbResultKeep *keep = knnwb_result_keep;
  if (keep != NULL && keep->cells >= cells && keep->cells > 0) {
    result->indices = g_steal_pointer(&keep->indices);
    result->distances = g_steal_pointer(&keep->distances);
    keep->lent = result->indices;
    keep->lent_cells = keep->cells;
    keep->cells = 0;
    return;
  }
  result->indices = knnwb_memory_try_alloc(MAX(cells, (size_t)1) * sizeof(int64_t), FALSE);
  result->distances = knnwb_memory_try_alloc(MAX(cells, (size_t)1) * sizeof(double), FALSE);
}

/* Lists for rows [first, first + rows); with clear every slot empty, filled by every core (at
 * large k the lists are tens of GB, and their first touch, page faults, is the slow part), else
 * left unset for a caller that writes every slot (n_found is zero either way). */
KnnwbNeighbors *knnwb_knn_result_alloc(size_t first, size_t rows, size_t k, gboolean clear,
                                       GError **error)
{
  KnnwbNeighbors *result = g_new0(KnnwbNeighbors, 1);
  result->n_queries = rows;
  result->k = k;
  result->first_row = first;
  const size_t cells = rows * k; /* checked by knnwb_knn_check_request */
  knnwb_knn_result_arrays(result, cells);
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
