/* Neighbourhoods over rows split between the ranks of a group: which rank holds a row, and the
 * few rows (the members) that have to travel. */
#include <string.h>
#include <knnwb/error.h>
#include "neighbourhood_internal.h"

int knnwb_neighbourhood_rows_owner(const KnnwbNeighbourhoodRows *rows, int64_t row)
{
  int r = 0;
  while ((size_t)row >= rows->first[r + 1])
    r++;
  return r;
}

gboolean knnwb_neighbourhood_rows_gather(const KnnwbNeighbourhoodRows *rows, const int64_t *wanted,
                                         size_t n_wanted, gboolean root_only, KnnwbMatrix **values,
                                         GError **error)
{
  *values = NULL;
  const KnnwbKnnGroup *group = rows->group;
  const size_t d = rows->data->n_cols, ranks = (size_t)group->size, me = (size_t)group->rank;
  const gboolean receiving = !root_only || me == 0;
  /* Per rank, its rows in the order wanted: the layout of what it sends. */
  g_autofree size_t *count = g_new0(size_t, ranks);
  g_autofree int *owner = g_try_new(int, MAX(n_wanted, (size_t)1));
  for (size_t v = 0; owner != NULL && v < n_wanted; v++)
    count[owner[v] = knnwb_neighbourhood_rows_owner(rows, wanted[v])]++;
  g_autoptr(KnnwbMatrix) out = NULL;
  g_autofree float *mine = NULL, *received = NULL;
  if (owner != NULL) {
    out = receiving ? knnwb_matrix_new(n_wanted, d, error) : NULL;
    mine = g_try_new(float, MAX(count[me] * d, (size_t)1));
    received = receiving ? g_try_new(float, MAX(n_wanted * d, (size_t)1)) : NULL;
  }
  const gboolean held =
      owner != NULL && mine != NULL && (!receiving || (out != NULL && received != NULL));
  if (!held && (error == NULL || *error == NULL))
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot hold %zu rows of %zu values",
                n_wanted, d);
  /* Every rank agrees before the exchange, whatever failed where: a rank that returned alone
   * would leave the others waiting in it. */
  if (!group->agree(group, held, error))
    return FALSE;
  const size_t offset = rows->first[me];
  for (size_t v = 0, i = 0; v < n_wanted; v++)
    if ((size_t)owner[v] == me)
      memcpy(mine + d * i++, rows->data->values + ((size_t)wanted[v] - offset) * d,
             d * sizeof(float));
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  for (size_t r = 0, at = 0; r < ranks; at += count[r], r++) {
    const gboolean to_r = !root_only || r == 0;
    send[r] = to_r ? mine : NULL;
    send_bytes[r] = to_r ? count[me] * d * sizeof(float) : 0;
    receive[r] = receiving ? received + at * d : NULL;
    receive_bytes[r] = receiving ? count[r] * d * sizeof(float) : 0;
  }
  if (!group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error))
    return FALSE;
  if (!receiving)
    return TRUE;
  g_autofree size_t *next = g_new0(size_t, ranks);
  for (size_t r = 1; r < ranks; r++)
    next[r] = next[r - 1] + count[r - 1];
  for (size_t v = 0; v < n_wanted; v++)
    memcpy(out->values + v * d, received + d * next[owner[v]]++, d * sizeof(float));
  *values = g_steal_pointer(&out);
  return TRUE;
}

gboolean knnwb_neighbourhood_rows_broadcast(const KnnwbKnnGroup *group, int64_t **list, size_t *n,
                                            GError **error)
{
  const size_t ranks = (size_t)group->size;
  const gboolean root = group->rank == 0;
  int64_t count = root ? (int64_t)*n : 0;
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  /* Two transfers from rank 0: the count, then (once every rank has room) the rows. */
  for (size_t r = 0; r < ranks; r++) {
    /* Rank 0 keeps its own (no transfer onto the same buffer). */
    send[r] = root && r > 0 ? &count : NULL;
    send_bytes[r] = root && r > 0 ? sizeof count : 0;
    receive[r] = !root && r == 0 ? &count : NULL;
    receive_bytes[r] = !root && r == 0 ? sizeof count : 0;
  }
  if (!group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error))
    return FALSE;
  if (!root) {
    *n = (size_t)count;
    *list = g_try_new(int64_t, MAX(*n, (size_t)1));
    if (*list == NULL)
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot hold %zu row numbers", *n);
  }
  if (!group->agree(group, root || *list != NULL, error))
    return FALSE;
  for (size_t r = 0; r < ranks; r++) {
    send[r] = root && r > 0 ? *list : NULL;
    send_bytes[r] = root && r > 0 ? *n * sizeof(int64_t) : 0;
    receive[r] = !root && r == 0 ? *list : NULL;
    receive_bytes[r] = !root && r == 0 ? *n * sizeof(int64_t) : 0;
  }
  return group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
}
