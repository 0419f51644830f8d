/* kNN lists back from a directed kNN graph (k out-edges per vertex in rank order). */
#include <knnwb/community.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

gboolean knnwb_clustering_lists_from_graph(const igraph_t *graph, const igraph_vector_t *distances,
                                           KnnwbNeighbors **lists, GError **error)
{
  if (!igraph_is_directed(graph)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "kNN lists need the directed kNN graph (graph mode directed), not an undirected "
                "union or mutual graph");
    return FALSE;
  }
  igraph_integer_t n = igraph_vcount(graph), m = igraph_ecount(graph);
  if (!distances || igraph_vector_size(distances) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "kNN lists need one distance per edge");
    return FALSE;
  }
  int32_t *count = g_try_new0(int32_t, MAX(n, 1));
  if (!count) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %" IGRAPH_PRId " lists",
                n);
    return FALSE;
  }
  size_t k = 0;
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t from = IGRAPH_FROM(graph, e);
    if (count[from] == G_MAXINT32)
      break;
    count[from]++; /* not inside MAX: it evaluates its arguments twice */
    k = MAX(k, (size_t)count[from]);
  }
  KnnwbNeighbors *out = g_new0(KnnwbNeighbors, 1);
  out->n_queries = (size_t)n;
  out->k = k;
  out->indices = g_try_new(int64_t, MAX((size_t)n * k, 1));
  out->distances = g_try_new(double, MAX((size_t)n * k, 1));
  out->n_found = count;
  out->backend_used = g_strdup("graph");
  if (!out->indices || !out->distances) {
    knnwb_neighbors_free(out);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %" IGRAPH_PRId " lists of %zu", n, k);
    return FALSE;
  }
  for (igraph_integer_t v = 0; v < n; v++)
    count[v] = 0;
  for (igraph_integer_t e = 0; e < m; e++) {
    igraph_integer_t from = IGRAPH_FROM(graph, e), to = IGRAPH_TO(graph, e);
    double d = VECTOR(*distances)[e];
    size_t at = (size_t)from * k + (size_t)count[from];
    /* Rank order is (distance, index); a graph in any other order is not a kNN graph's lists. */
    gboolean ordered = count[from] == 0 || d > out->distances[at - 1] ||
                       (d == out->distances[at - 1] && to > out->indices[at - 1]);
    if (from == to || !ordered || !(d >= 0)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "edge %" IGRAPH_PRId " (%" IGRAPH_PRId " -> %" IGRAPH_PRId ", distance %g): %s",
                  e, from, to, d,
                  from == to  ? "a self-loop is not a neighbour"
                  : !(d >= 0) ? "a negative or NaN distance"
                              : "out-edges are not in rank order (distance, then index), so this "
                                "is not a directed kNN graph as knnwb builds it");
      knnwb_neighbors_free(out);
      return FALSE;
    }
    out->indices[at] = to;
    out->distances[at] = d;
    count[from]++;
  }
  for (igraph_integer_t v = 0; v < n; v++)
    for (size_t r = (size_t)count[v]; r < k; r++) {
      out->indices[(size_t)v * k + r] = -1;
      out->distances[(size_t)v * k + r] = G_MAXDOUBLE;
    }
  *lists = out;
  return TRUE;
}
