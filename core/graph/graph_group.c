/*
 * The undirected (union or mutual) kNN graph's edges when the lists are spread over a group's
 * ranks, each holding its block of rows: one process buckets an edge {lo, hi} under lo and lists
 * the buckets in order, so rank r takes the edges whose lo lies in its range of rows (ranges cut so
 * that every rank gets about as many directions), receives from every rank the directions i -> j
 * whose smaller end lies there, and merges them exactly as one process does (graph.c's merge). The
 * ranks' edges in rank order are then the single process's edge list.
 */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/graph.h>
#include "graph/graph_internal.h"

/* One direction travelling to the owner of its lower end. */
typedef struct {
  int64_t lo, hi;
  double weight;
} KnnwbGraphPair;

/* The rank r with cuts[r] <= row < cuts[r + 1] (empty ranges skipped). */
static int knnwb_graph_owner(const int64_t *cuts, int size, int64_t row)
{
  int low = 0, high = size - 1;
  while (low < high) {
    int middle = (low + high + 1) / 2;
    if (cuts[middle] <= row)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}

/* Direction s of own row q as a pair (lo, hi), and the rank that merges it. */
static int knnwb_graph_direction(const KnnwbNeighbors *own, size_t q, int32_t s,
                                 const int64_t *cuts, int size, KnnwbGraphPair *pair)
{
  const int64_t i = (int64_t)(own->first_row + q), j = own->indices[q * own->k + (size_t)s];
  *pair = (KnnwbGraphPair){MIN(i, j), MAX(i, j), own->distances[q * own->k + (size_t)s]};
  return knnwb_graph_owner(cuts, size, pair->lo);
}

/* The allocations of one call, freed at the end whatever happened. */
typedef struct {
  int64_t *cuts, *send_counts, *receive_counts, *histogram;
  size_t *send_at, *start, *fill;
  KnnwbGraphPair *send, *receive;
  KnnwbHalfEdge *half;
} KnnwbGraphGroupBuffers;

static void knnwb_graph_group_buffers_clear(KnnwbGraphGroupBuffers *b)
{
  g_free(b->cuts);
  g_free(b->send_counts);
  g_free(b->receive_counts);
  g_free(b->histogram);
  g_free(b->send_at);
  g_free(b->start);
  g_free(b->fill);
  g_free(b->send);
  g_free(b->receive);
  g_free(b->half);
}

/* Bins of the smaller ends' histogram: enough to cut within a few rows' worth of directions. */
enum { KNNWB_GRAPH_CUT_BINS = 1 << 16 };

/*
 * The rows [cuts[r], cuts[r + 1]) whose edges rank r merges and writes. Cut by rows alone, rank 0
 * would get most edges (every pair with a row of the first block has its smaller end there: about
 * three quarters at 2 ranks); so the job's directions are counted by their smaller end in bins
 * (a sum over the ranks), and rank r's range starts at the first bin where r / R of them are
 * reached. Every rank computes the same cuts from the same sums.
 */
static gboolean knnwb_graph_cut(const KnnwbKnnGroup *group, const KnnwbNeighbors *own, size_t n,
                                KnnwbGraphGroupBuffers *b, GError **error)
{
  const size_t ranks = (size_t)group->size, bins = MAX((size_t)1, MIN(n, KNNWB_GRAPH_CUT_BINS));
  b->histogram = g_new0(int64_t, bins);
  for (size_t q = 0; q < own->n_queries; q++)
    for (int32_t s = 0; s < own->n_found[q]; s++) {
      const uint64_t i = own->first_row + q, j = (uint64_t)own->indices[q * own->k + (size_t)s];
      b->histogram[MIN(i, j) * bins / n]++;
    }
  if (!group->reduce(group, b->histogram, bins, KNNWB_GROUP_SUM, error))
    return FALSE;
  int64_t total = 0;
  for (size_t bin = 0; bin < bins; bin++)
    total += b->histogram[bin];
  b->cuts = g_new(int64_t, ranks + 1);
  b->cuts[0] = 0;
  b->cuts[ranks] = (int64_t)n;
  size_t bin = 0;
  int64_t below = 0; /* directions in the bins before bin */
  for (size_t r = 1; r < ranks; r++) {
    const int64_t target = (int64_t)((double)total * (double)r / (double)ranks);
    while (bin < bins && below < target)
      below += b->histogram[bin++];
    b->cuts[r] = (int64_t)((bin * n + bins - 1) / bins); /* the first row of bin */
  }
  return TRUE;
}

/* Sends every rank the directions it merges; *received gets their count. */
static gboolean knnwb_graph_send_pairs(const KnnwbKnnGroup *group, const KnnwbNeighbors *own,
                                       KnnwbGraphGroupBuffers *b, size_t *received, GError **error)
{
  const size_t ranks = (size_t)group->size;
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
      KnnwbGraphPair pair;
      const int to = knnwb_graph_direction(own, q, s, b->cuts, group->size, &pair);
      if (to != group->rank)
        b->send[b->send_at[to]++] = pair;
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
  const size_t ranks = (size_t)group->size;
  KnnwbGraphGroupBuffers b = {0};
  gboolean ok = FALSE;
  int64_t n = (int64_t)own->n_queries;
  if (!group->reduce(group, &n, 1, KNNWB_GROUP_SUM, error) ||
      !knnwb_graph_cut(group, own, (size_t)n, &b, error))
    goto done;
  const size_t first = (size_t)b.cuts[group->rank], m = (size_t)b.cuts[group->rank + 1] - first;

  /* Bucket sizes of this rank's range, and what goes to each other rank. */
  b.send_counts = g_new0(int64_t, ranks);
  b.receive_counts = g_new0(int64_t, ranks);
  b.start = g_try_new0(size_t, m + 1);
  ok = b.start != NULL;
  if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate edge buckets");
  if (!group->agree(group, ok, error))
    goto failed;
  for (size_t q = 0; q < own->n_queries; q++)
    for (int32_t s = 0; s < own->n_found[q]; s++) {
      KnnwbGraphPair pair;
      const int to = knnwb_graph_direction(own, q, s, b.cuts, group->size, &pair);
      if (to == group->rank)
        b.start[(size_t)pair.lo - first + 1]++;
      else
        b.send_counts[to]++;
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
    for (size_t q = 0; q < own->n_queries; q++)
      for (int32_t s = 0; s < own->n_found[q]; s++) {
        KnnwbGraphPair pair;
        if (knnwb_graph_direction(own, q, s, b.cuts, group->size, &pair) == group->rank)
          b.half[b.fill[pair.lo - (int64_t)first]++] =
              (KnnwbHalfEdge){(igraph_integer_t)pair.hi, pair.weight};
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
