/*
 * The undirected (union or mutual) kNN graph's edges when the lists are spread over a group's
 * ranks, each holding its block of rows: an edge {lo, hi} belongs to the rank that holds row lo
 * (as one process buckets it under lo), so each rank sends the directions i -> j of its lists
 * whose lower end is another rank's (j < i, an earlier block) to that rank, and merges what it
 * holds and receives exactly as one process does (graph.c's merge). The ranks' edges in rank order
 * are then the single process's edge list, and no rank ever holds more than its rows' pairs.
 */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/graph.h>
#include "graph_internal.h"

/* One direction travelling to the owner of its lower end. */
typedef struct {
  int64_t lo, hi;
  double weight;
} KnnwbGraphPair;

/* The rank whose block [firsts[r], firsts[r + 1]) holds row. */
static int knnwb_graph_owner(const int64_t *firsts, int size, int64_t row)
{
  int low = 0, high = size - 1;
  while (low < high) {
    int middle = (low + high + 1) / 2;
    if (firsts[middle] <= row)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}

/* The allocations of one call, freed at the end whatever happened. */
typedef struct {
  int64_t *firsts, *send_counts, *receive_counts;
  size_t *send_at, *start, *fill;
  KnnwbGraphPair *send, *receive;
  KnnwbHalfEdge *half;
} KnnwbGraphGroupBuffers;

static void knnwb_graph_group_buffers_clear(KnnwbGraphGroupBuffers *b)
{
  g_free(b->firsts);
  g_free(b->send_counts);
  g_free(b->receive_counts);
  g_free(b->send_at);
  g_free(b->start);
  g_free(b->fill);
  g_free(b->send);
  g_free(b->receive);
  g_free(b->half);
}

/* Sends every rank the directions whose lower end it holds; *received gets their count. */
static gboolean knnwb_graph_send_pairs(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                       KnnwbGraphGroupBuffers *b, size_t *received, GError **error)
{
  const size_t ranks = (size_t)group->size, first = own->first_row, k = own->k;
  size_t n_send = 0;
  for (size_t r = 0; r < ranks; r++)
    n_send += (size_t)b->send_counts[r];
  b->send_at = g_try_new0(size_t, ranks);
  b->send = g_try_new(KnnwbGraphPair, MAX(n_send, (size_t)1));
  gboolean ok = b->send_at != NULL && b->send != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot hold %zu edge directions for other ranks", n_send);
  if (!group->agree(group, ok, error))
    return FALSE;
  for (size_t r = 1; r < ranks; r++)
    b->send_at[r] = b->send_at[r - 1] + (size_t)b->send_counts[r - 1];
  for (size_t q = 0; q < own->n_queries; q++)
    for (int32_t s = 0; s < own->n_found[q]; s++) {
      int64_t i = (int64_t)(first + q), j = own->indices[q * k + (size_t)s];
      if (j >= (int64_t)first)
        continue; /* this rank's own bucket */
      size_t to = (size_t)knnwb_graph_owner(b->firsts, group->size, j);
      b->send[b->send_at[to]++] = (KnnwbGraphPair){j, i, own->distances[q * k + (size_t)s]};
    }
  /* Counts first (each rank learns what comes), then the pairs. */
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  for (size_t r = 0; r < ranks; r++) {
    send[r] = &b->send_counts[r];
    receive[r] = &b->receive_counts[r];
    send_bytes[r] = receive_bytes[r] = sizeof(int64_t);
  }
  if (!group->exchange(group, send, send_bytes, receive, receive_bytes, error))
    return FALSE;
  *received = 0;
  for (size_t r = 0; r < ranks; r++)
    *received += (size_t)b->receive_counts[r];
  b->receive = g_try_new(KnnwbGraphPair, MAX(*received, (size_t)1));
  ok = b->receive != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot hold %zu edge directions from other ranks", *received);
  if (!group->agree(group, ok, error))
    return FALSE;
  size_t from = 0;
  for (size_t r = 0; r < ranks; r++) {
    size_t at = r == 0 ? 0 : b->send_at[r - 1];
    send[r] = b->send + at;
    send_bytes[r] = (size_t)b->send_counts[r] * sizeof(KnnwbGraphPair);
    receive[r] = b->receive + from;
    receive_bytes[r] = (size_t)b->receive_counts[r] * sizeof(KnnwbGraphPair);
    from += (size_t)b->receive_counts[r];
  }
  if (!group->exchange(group, send, send_bytes, receive, receive_bytes, error))
    return FALSE;
  g_clear_pointer(&b->send, g_free);
  return TRUE;
}

gboolean knnwb_graph_edges_from_own_neighbors(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                              KnnwbGraphMode mode, igraph_vector_int_t *edges,
                                              igraph_vector_t *weights, GError **error)
{
  g_return_val_if_fail(group != NULL && own != NULL && mode != KNNWB_GRAPH_DIRECTED, FALSE);
  const size_t ranks = (size_t)group->size, m = own->n_queries, first = own->first_row, k = own->k;
  KnnwbGraphGroupBuffers b = {0};
  gboolean ok = FALSE;
  b.firsts = g_new(int64_t, ranks + 1);
  if (!knnwb_knn_group_gather_values(group, (int64_t)m, b.firsts + 1, error))
    goto done;
  b.firsts[0] = 0;
  for (size_t r = 1; r <= ranks; r++)
    b.firsts[r] += b.firsts[r - 1];

  /* Bucket sizes of this rank's rows, and what goes to each earlier rank. */
  b.send_counts = g_new0(int64_t, ranks);
  b.receive_counts = g_new0(int64_t, ranks);
  b.start = g_try_new0(size_t, m + 1);
  ok = b.start != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate edge buckets");
  if (!group->agree(group, ok, error))
    goto failed;
  for (size_t q = 0; q < m; q++)
    for (int32_t s = 0; s < own->n_found[q]; s++) {
      int64_t j = own->indices[q * k + (size_t)s];
      if (j >= (int64_t)first)
        b.start[MIN(q, (size_t)j - first) + 1]++;
      else
        b.send_counts[knnwb_graph_owner(b.firsts, group->size, j)]++;
    }
  size_t received = 0;
  if (!knnwb_graph_send_pairs(group, own, &b, &received, error))
    goto failed;
  for (size_t p = 0; p < received; p++) {
    const KnnwbGraphPair *pair = &b.receive[p];
    g_assert(pair->lo >= (int64_t)first && pair->lo < (int64_t)(first + m));
    b.start[(size_t)pair->lo - first + 1]++;
  }
  for (size_t q = 0; q < m; q++)
    b.start[q + 1] += b.start[q];
  const size_t total = b.start[m];
  b.half = g_try_new(KnnwbHalfEdge, MAX(total, (size_t)1));
  b.fill = g_try_new(size_t, MAX(m, (size_t)1));
  ok = b.half != NULL && b.fill != NULL;
  if (!ok) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %zu half edges", total);
  } else {
    memcpy(b.fill, b.start, m * sizeof(size_t));
    for (size_t q = 0; q < m; q++)
      for (int32_t s = 0; s < own->n_found[q]; s++) {
        int64_t j = own->indices[q * k + (size_t)s];
        if (j < (int64_t)first)
          continue;
        size_t lo = MIN(q, (size_t)j - first);
        size_t hi = first + MAX(q, (size_t)j - first);
        b.half[b.fill[lo]++] =
            (KnnwbHalfEdge){(igraph_integer_t)hi, own->distances[q * k + (size_t)s]};
      }
    for (size_t p = 0; p < received; p++) {
      const KnnwbGraphPair *pair = &b.receive[p];
      b.half[b.fill[pair->lo - (int64_t)first]++] =
          (KnnwbHalfEdge){(igraph_integer_t)pair->hi, pair->weight};
    }
    g_clear_pointer(&b.receive, g_free);
    g_clear_pointer(&b.fill, g_free);
    ok = knnwb_error_from_igraph(knnwb_graph_merge_half_edges(b.half, b.start, m, first,
                                                              mode == KNNWB_GRAPH_MUTUAL, edges,
                                                              weights),
                                 "building the kNN edge list", error);
  }
failed:
  ok = group->agree(group, ok, error);
done:
  knnwb_graph_group_buffers_clear(&b);
  return ok;
}
