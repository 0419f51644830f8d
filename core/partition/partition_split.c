/*
 * The partitioned search of split ranks that keep to their blocks (when: partition_gather.c).
 * Each rank holds its block of rows. The partition is made as ranks that hold every row make it
 * (the choice on the sample one process takes, each rank's block assigned to the cells, the cells
 * shared, a digest compared), and then each rank brings only the rows it searches: the rows of the
 * groups it is given for phase one, and, for phase two, the visitors of its groups that it does not
 * hold yet. A row travels once to each rank that searches it; each row's pieces go back to its
 * block's rank and are merged there as for ranks that hold every row (partition_combine.c), so the
 * lists are those of one process.
 *
 * Memory per rank: its block, the rows of its groups and of their visitors, lists for every row it
 * holds (16 bytes an entry), and n-long arrays of 36 bytes a row (each row's cell, reach, place and
 * k-th distance, the members). Ranks that hold every row keep n rows and n lists each.
 */
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include "engine/engine.h"
#include "partition/partition_internal.h"

/* Whether row i's group in the phase at hand (run->owner) is rank r's. */
static inline gboolean knnwb_partition_split_searches(const KnnwbPartitionRun *run, size_t i, int r)
{
  const KnnwbPartition *p = run->p;
  return run->owner[p->group_of[p->cluster_of[i]]] == r;
}

/* lists grown to rows rows, the new ones empty. FALSE (lists as they were): memory. */
static gboolean knnwb_partition_split_grow(KnnwbNeighbors *lists, size_t rows)
{
  const size_t k = lists->k, before = lists->n_queries, cells = MAX(rows * k, (size_t)1);
  int64_t *indices = g_try_realloc(lists->indices, cells * sizeof(int64_t));
  lists->indices = indices != NULL ? indices : lists->indices;
  double *distances =
      indices != NULL ? g_try_realloc(lists->distances, cells * sizeof(double)) : NULL;
  lists->distances = distances != NULL ? distances : lists->distances;
  int32_t *found = distances != NULL
                       ? g_try_realloc(lists->n_found, MAX(rows, (size_t)1) * sizeof(int32_t))
                       : NULL;
  if (found == NULL)
    return FALSE;
  lists->n_found = found;
  memset(found + before, 0, (rows - before) * sizeof(int32_t));
  lists->n_queries = rows;
  knnwb_knn_result_empty_rows(lists, before, rows);
  return TRUE;
}

/* Rows [first, first + count) of this rank's block (rows[t]: rows[t] of it, when not NULL) as d
 * floats each, from data; NULL: memory. */
static float *knnwb_partition_split_pack(const KnnwbPartitionRun *run, const int64_t *rows,
                                         size_t count)
{
  const size_t d = run->d;
  float *out = g_try_new(float, MAX(count * d, (size_t)1));
  for (size_t t = 0; out != NULL && t < count; t++)
    memcpy(out + t * d, run->data->values + ((size_t)rows[t] - run->first) * d, d * sizeof(float));
  return out;
}

/* The rows sent to each rank and received from each (receive[r] pointing into run->held.values, at
 * the rows from rank r), then freed. Collective; the byte counts match pairwise by construction. */
static gboolean knnwb_partition_split_send(KnnwbPartitionRun *run, float **send,
                                           const size_t *send_rows, const size_t *receive_rows,
                                           size_t held_from, gboolean room, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  const size_t row_bytes = run->d * sizeof(float);
  size_t *send_bytes = g_new(size_t, size), *receive_bytes = g_new(size_t, size);
  void **receive = g_new0(void *, size);
  size_t at = held_from;
  for (int r = 0; r < size; r++) {
    send_bytes[r] = send_rows[r] * row_bytes;
    receive_bytes[r] = receive_rows[r] * row_bytes;
    receive[r] = receive_rows[r] > 0 && run->held.values != NULL
                     ? (char *)run->held.values + at * row_bytes
                     : NULL;
    at += receive_rows[r];
  }
  if (!room)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the rows this rank searches (%zu rows of %zu values)",
                at - held_from, run->d);
  const gboolean ok = group->agree(group, room, error) &&
                      group->exchange(group, (const void *const *)send, send_bytes,
                                      (void *const *)receive, receive_bytes, error);
  for (int r = 0; r < size; r++)
    g_clear_pointer(&send[r], g_free);
  g_free(send_bytes);
  g_free(receive_bytes);
  g_free(receive);
  return ok;
}

/* Places in slot for the rows of the other blocks that this rank searches in phase one (after its
 * block's), rank by rank and ascending, counted per block in receive_rows; -1 for the rest.
 * Returns the rows it brings. O(n). */
static size_t knnwb_partition_split_places(KnnwbPartitionRun *run, size_t *receive_rows)
{
  const KnnwbKnnGroup *group = run->options->group;
  const size_t block = run->last - run->first;
  size_t held = 0;
  for (int r = 0; r < group->size; r++) {
    size_t first, last;
    knnwb_partition_block_of(run->p, group, r, &first, &last);
    for (size_t i = first; i < last; i++) {
      if (r == group->rank) {
        run->slot[i] = (int64_t)(i - run->first);
      } else if (knnwb_partition_split_searches(run, i, group->rank)) {
        run->slot[i] = (int64_t)(block + held++);
        receive_rows[r]++;
      } else {
        run->slot[i] = -1;
      }
    }
  }
  return held;
}

gboolean knnwb_partition_split_own_rows(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size, me = group->rank;
  const size_t block = run->last - run->first;
  const gint64 start = g_get_monotonic_time();
  size_t *send_rows = g_new0(size_t, size), *receive_rows = g_new0(size_t, size);
  float **send = g_new0(float *, size);
  run->slot = g_try_new(int64_t, MAX(run->p->n, (size_t)1));
  gboolean room = run->slot != NULL;
  /* Test hook (as partition.c's KNNWB_PARTITION_BOUNDS_SHORT_RANK):
   * KNNWB_PARTITION_SPLIT_SHORT_RANK=r makes rank r short of memory for the rows it searches: every
   * rank stops with its message. */
  const char *short_rank = g_getenv("KNNWB_PARTITION_SPLIT_SHORT_RANK");
  const gboolean short_here = short_rank != NULL && *short_rank != '\0' && atoi(short_rank) == me;
  const size_t held = room ? knnwb_partition_split_places(run, receive_rows) : 0;
  run->held.values = room && !short_here ? g_try_new(float, MAX(held * run->d, (size_t)1)) : NULL;
  run->held.rows = held;
  room = room && run->held.values != NULL;
  run->lists = room ? knnwb_knn_result_new_unset(0, block + held, run->k, NULL) : NULL;
  room = room && run->lists != NULL;
  /* (each rank's rows of this block, ascending: the order it placed them in) */
  GArray **rows = g_new0(GArray *, size);
  for (int r = 0; r < size; r++)
    rows[r] = g_array_new(FALSE, FALSE, sizeof(int64_t));
  for (size_t i = run->first; room && i < run->last; i++) {
    const int r = run->owner[run->p->group_of[run->p->cluster_of[i]]];
    if (r != me)
      g_array_append_val(rows[r], i);
  }
  for (int r = 0; r < size; r++) {
    send_rows[r] = rows[r]->len;
    send[r] =
        room && r != me
            ? knnwb_partition_split_pack(run, (const int64_t *)(void *)rows[r]->data, rows[r]->len)
            : NULL;
    room = room && (r == me || send[r] != NULL);
    g_array_free(rows[r], TRUE);
  }
  g_free(rows);
  if (!room)
    memset(send_rows, 0, size * sizeof(size_t));
  const gboolean ok = knnwb_partition_split_send(run, send, send_rows,
                                                 room ? receive_rows : send_rows, 0, room, error);
  g_debug("knnwb: partition: rank %d: holds its block's %zu rows and %zu rows of its groups from "
          "the other blocks (brought in %.3f s)",
          me, block, held, (double)(g_get_monotonic_time() - start) / 1e6);
  g_free(send);
  g_free(send_rows);
  g_free(receive_rows);
  return ok;
}

/* The rows this rank searches in phase two that it does not hold (the rows of the groups with
 * visitors it is given, run->owner, which phase one may have given another rank, and their
 * visitors): their
 * places (after the rows held), and per rank the rows asked of it (ascending) in ask[r]. Returns
 * how many. O(n + visitors). */
static size_t knnwb_partition_split_wanted(KnnwbPartitionRun *run, GArray **ask)
{
  const KnnwbKnnGroup *group = run->options->group;
  const KnnwbPartition *p = run->p;
  const size_t visits = (size_t)run->query_start[p->groups];
  /* (-2: wanted; a row may visit several groups) */
  for (size_t t = 0; t < visits; t++)
    if (run->slot[run->queries[t]] == -1)
      run->slot[run->queries[t]] = -2;
  /* (a group without visitors is not searched again: its rows stay where they are) */
  for (size_t g = 0; g < p->groups; g++) {
    if (run->owner[g] != group->rank || run->query_start[g + 1] == run->query_start[g])
      continue;
    for (size_t t = p->start[g]; t < p->start[g + 1]; t++)
      if (run->slot[p->members[t]] == -1)
        run->slot[p->members[t]] = -2;
  }
  const size_t base = run->lists->n_queries;
  size_t wanted = 0;
  for (int r = 0; r < group->size; r++) {
    size_t first, last;
    knnwb_partition_block_of(run->p, group, r, &first, &last);
    for (size_t i = first; i < last; i++)
      if (run->slot[i] == -2) {
        run->slot[i] = (int64_t)(base + wanted++);
        const int64_t row = (int64_t)i;
        g_array_append_val(ask[r], row);
      }
  }
  return wanted;
}

gboolean knnwb_partition_split_visitor_rows(KnnwbPartitionRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->options->group;
  const int size = group->size;
  const gint64 start = g_get_monotonic_time();
  GArray **ask = g_new0(GArray *, size);
  for (int r = 0; r < size; r++)
    ask[r] = g_array_new(FALSE, FALSE, sizeof(int64_t));
  const size_t wanted = knnwb_partition_split_wanted(run, ask);
  const size_t before = run->lists->n_queries, held_before = run->held.rows;
  /* the asks out, each rank's asks of this one in */
  KnnwbPartitionTransfer t;
  knnwb_partition_transfer_init(&t, size);
  size_t *receive_rows = g_new0(size_t, size);
  for (int r = 0; r < size; r++) {
    receive_rows[r] = ask[r]->len;
    t.send_bytes[r] = ask[r]->len * sizeof(int64_t);
    t.send[r] = (char *)g_array_free(ask[r], FALSE);
  }
  g_free(ask);
  gboolean ok = knnwb_partition_ranks_exchange(group, &t, TRUE, "the rows asked for", error);
  /* room for the rows asked for, then the rows each rank asked of this one */
  float *values = NULL;
  gboolean room = ok;
  if (room && wanted > 0) {
    values = g_try_realloc(run->held.values,
                           MAX((held_before + wanted) * run->d, (size_t)1) * sizeof(float));
    run->held.values = values != NULL ? values : run->held.values;
    room = values != NULL && knnwb_partition_split_grow(run->lists, before + wanted);
  }
  size_t *send_rows = g_new0(size_t, size);
  float **send = g_new0(float *, size);
  for (int r = 0; ok && r < size; r++) {
    send_rows[r] = t.receive_bytes[r] / sizeof(int64_t);
    const int64_t *asked = (const int64_t *)(void *)t.receive[r];
    for (size_t u = 0; u < send_rows[r]; u++) /* (the ranks' own bookkeeping: never fails) */
      g_assert((size_t)asked[u] >= run->first && (size_t)asked[u] < run->last);
    send[r] =
        room && send_rows[r] > 0 ? knnwb_partition_split_pack(run, asked, send_rows[r]) : NULL;
    room = room && (send_rows[r] == 0 || send[r] != NULL);
  }
  knnwb_partition_transfer_clear(&t);
  if (ok && !room) {
    memset(send_rows, 0, size * sizeof(size_t));
    memset(receive_rows, 0, size * sizeof(size_t));
  }
  ok = ok &&
       knnwb_partition_split_send(run, send, send_rows, receive_rows, held_before, room, error);
  if (ok)
    run->held.rows = held_before + wanted;
  g_debug("knnwb: partition: rank %d: %zu rows of its groups' visits brought in %.3f s",
          group->rank, wanted, (double)(g_get_monotonic_time() - start) / 1e6);
  for (int r = 0; r < size; r++)
    g_free(send[r]);
  g_free(send);
  g_free(send_rows);
  g_free(receive_rows);
  return ok;
}

gboolean knnwb_partition_split_run(const KnnwbMatrix *block, const KnnwbMatrix *sample,
                                   const int64_t *counts, KnnwbPartition *p,
                                   const KnnwbKnnOptions *options, KnnwbPartitionMode mode,
                                   gboolean made, double expected, gint64 start,
                                   KnnwbNeighbors **result, GError **error)
{
  const KnnwbKnnGroup *group = options->group;
  p->block_start = g_new(size_t, (size_t)group->size + 1);
  p->block_start[0] = 0;
  for (int r = 0; r < group->size; r++)
    p->block_start[r + 1] = p->block_start[r] + (size_t)counts[r];
  p->data_first = p->block_start[group->rank];
  KnnwbKnnOptions split = *options;
  split.group_split = FALSE;
  split.group_split_gather = FALSE;
  gboolean chosen = TRUE;
  g_debug("knnwb: partition: each rank keeps its block of rows and brings the rows it searches");
  return knnwb_partition_settle(p, block, sample, &split, made, expected, start, "the split search",
                                &chosen, error) &&
         (!chosen ||
          knnwb_partition_run(block, &split, p, mode, expected, "the split search", result, error));
}
