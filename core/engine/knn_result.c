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

KnnwbNeighbors *knnwb_knn_result_new_unset(size_t first, size_t rows, size_t k, GError **error)
{
  return knnwb_knn_result_alloc(first, rows, k, FALSE, error);
}

void knnwb_knn_result_empty_rows(KnnwbNeighbors *lists, size_t first, size_t last)
{
  knnwb_knn_result_clear(first * lists->k, last * lists->k, lists);
}

/* knnwb_knn_result_check's rows: the lowest row whose list breaks the contract, and why. */
typedef struct {
  const KnnwbNeighbors *result;
  gboolean self;
  size_t n_reference;
  size_t bad_row; /* the lowest bad row seen, under lock */
  const char *why;
  GMutex lock;
} KnnwbResultCheck;

/* Why row i's list breaks the contract, or NULL. */
static const char *knnwb_knn_result_row_fault(const KnnwbResultCheck *c, size_t i)
{
  const KnnwbNeighbors *r = c->result;
  const size_t k = r->k;
  const int64_t *index = r->indices + i * k;
  const double *distance = r->distances + i * k;
  const int32_t found = r->n_found[i];
  if (found < 0 || (size_t)found > k)
    return "its count of neighbours is out of range";
  for (size_t s = 0; s < (size_t)found; s++) {
    if (index[s] < 0 || (uint64_t)index[s] >= c->n_reference)
      return "it names a row that does not exist";
    if (c->self && (uint64_t)index[s] == r->first_row + i)
      return "it names the row itself";
    if (isnan(distance[s]))
      return "a distance is not a number";
    /* (distance, index) strictly increasing: ties by the lower index, and no row twice */
    if (s > 0 && !(distance[s - 1] < distance[s] ||
                   (distance[s - 1] == distance[s] && index[s - 1] < index[s])))
      return index[s - 1] == index[s] ? "it names a row twice"
                                      : "it is not in (distance, row) order";
  }
  for (size_t s = (size_t)found; s < k; s++)
    if (index[s] != -1)
      return "a slot past its count is not empty";
  return NULL;
}

static void knnwb_knn_result_check_rows(size_t first, size_t last, void *user)
{
  KnnwbResultCheck *c = user;
  for (size_t i = first; i < last; i++) {
    const char *why = knnwb_knn_result_row_fault(c, i);
    if (why == NULL)
      continue;
    g_mutex_lock(&c->lock);
    if (i < c->bad_row) {
      c->bad_row = i;
      c->why = why;
    }
    g_mutex_unlock(&c->lock);
    return;
  }
}

gboolean knnwb_knn_result_check(const KnnwbNeighbors *result, gboolean self, size_t n_reference,
                                int threads, GError **error)
{
  if (result == NULL || result->n_queries == 0 || result->k == 0)
    return TRUE;
  KnnwbResultCheck c = {result, self, n_reference, SIZE_MAX, NULL, {0}};
  g_mutex_init(&c.lock);
  knnwb_parallel_for(threads, result->n_queries, (size_t)1 << 14, knnwb_knn_result_check_rows, &c);
  g_mutex_clear(&c.lock);
  if (c.bad_row == SIZE_MAX)
    return TRUE;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED,
              "internal error: the neighbour list of row %zu is wrong (%s), so it is not written; "
              "please report this with the command and the input's shape",
              result->first_row + c.bad_row, c.why);
  return FALSE;
}
