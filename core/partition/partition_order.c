/*
 * A split rank's block lists put back in row order. In the search they lie by the rank that
 * searched them (partition_internal.h's block_list: the rows this rank searched first, then the
 * others, each in row order), so that phase one touches only the lists it writes. The combining
 * moves them into fresh arrays in row order a batch of rows at a time, each batch just before the
 * others' records for its rows are merged (partition_combine.c), so those records land in the
 * fresh arrays and the others' places are never faulted in; the pages each batch has read are
 * given back to the system as it goes: the block's lists are held about once, not twice (2.4 GB
 * at 10,000,000 rows, k = 30, two ranks), and a list nothing was written to is never copied.
 */
#include <math.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "engine/engine.h"
#include "partition/partition_internal.h"

typedef struct {
  const KnnwbNeighbors *from;
  KnnwbNeighbors *to;
  const int32_t *place;
  size_t base; /* the batch's first row */
} KnnwbPartitionOrderBatch;

static void knnwb_partition_order_rows(size_t first, size_t last, void *data)
{
  const KnnwbPartitionOrderBatch *o = data;
  const size_t k = o->from->k;
  for (size_t t = o->base + first; t < o->base + last; t++) {
    const size_t at = (size_t)o->place[t];
    o->to->n_found[t] = o->from->n_found[at];
    if (o->from->n_found[at] < 0) /* (unset: nothing here to copy, nor a page to touch) */
      continue;
    memcpy(o->to->indices + t * k, o->from->indices + at * k, k * sizeof(int64_t));
    memcpy(o->to->distances + t * k, o->from->distances + at * k, k * sizeof(double));
  }
}

void knnwb_partition_lists_give_back(const KnnwbNeighbors *lists, size_t from, size_t to)
{
  const size_t k = lists->k;
  knnwb_memory_give_back(lists->indices, from * k * sizeof(int64_t), to * k * sizeof(int64_t));
  knnwb_memory_give_back(lists->distances, from * k * sizeof(double), to * k * sizeof(double));
}

gboolean knnwb_partition_order_begin(KnnwbPartitionOrder *order, KnnwbNeighbors *lists,
                                     size_t first, size_t rows, const int32_t *place,
                                     size_t searched, size_t batch)
{
  *order = (KnnwbPartitionOrder){.from = lists,
                                 .place = place,
                                 .rows = rows,
                                 .searched = searched,
                                 .batch = MAX(batch, (size_t)1)};
  order->ordered = knnwb_knn_result_new_unset(first, rows, lists->k, NULL);
  return order->ordered != NULL;
}

/* The batch [at, last) copied, then the prefix of each run it read given back. */
static void knnwb_partition_order_batch(KnnwbPartitionOrder *order, size_t at, size_t last,
                                        int threads)
{
  KnnwbPartitionOrderBatch o = {
      .from = order->from, .to = order->ordered, .place = order->place, .base = at};
  knnwb_parallel_for(threads, last - at, 4096, knnwb_partition_order_rows, &o);
  /* (each run is read in row order: what a batch read of it is a prefix) */
  size_t mine_to = order->mine, others_to = order->others;
  gboolean mine_seen = FALSE, others_seen = FALSE;
  for (size_t t = last; t > at && !(mine_seen && others_seen); t--) {
    const size_t from = (size_t)order->place[t - 1];
    if (from < order->searched && !mine_seen) {
      mine_to = from + 1;
      mine_seen = TRUE;
    } else if (from >= order->searched && !others_seen) {
      others_to = from + 1 - order->searched;
      others_seen = TRUE;
    }
  }
  knnwb_partition_lists_give_back(order->from, order->mine, mine_to);
  knnwb_partition_lists_give_back(order->from, order->searched + order->others,
                                  order->searched + others_to);
  order->mine = mine_to;
  order->others = others_to;
}

void knnwb_partition_order_to(KnnwbPartitionOrder *order, size_t row, int threads)
{
  row = MIN(row, order->rows);
  while (order->done < row) {
    const size_t last = MIN(row, order->done + order->batch);
    knnwb_partition_order_batch(order, order->done, last, threads);
    order->done = last;
  }
}

static void knnwb_partition_order_empty(size_t first, size_t last, void *data)
{
  KnnwbNeighbors *lists = data;
  for (size_t t = first; t < last; t++)
    if (lists->n_found[t] < 0)
      knnwb_knn_result_empty_rows(lists, t, t + 1);
}

void knnwb_partition_lists_empty_unset(KnnwbNeighbors *lists, int threads)
{
  knnwb_parallel_for(threads, lists->n_queries, 65536, knnwb_partition_order_empty, lists);
}
