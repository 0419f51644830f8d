/* Weakly connected components of a graph, numbered by lowest vertex. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

gboolean knnwb_clustering_components(const igraph_t *graph, igraph_vector_int_t *membership,
                                     igraph_vector_int_t *sizes, igraph_integer_t *n_components,
                                     GError **error)
{
  int64_t n = igraph_vcount(graph);
  igraph_integer_t m = igraph_ecount(graph);
  /* Union-find over the edge list: one pass, no adjacency lists (igraph's BFS would build them). */
  int64_t *parent = g_try_new(int64_t, MAX(n, 1));
  if (!parent) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %" G_GINT64_FORMAT " component labels", (gint64)n);
    return FALSE;
  }
  for (int64_t v = 0; v < n; v++)
    parent[v] = v;
  for (igraph_integer_t e = 0; e < m; e++)
    knnwb_clustering_union(parent, IGRAPH_FROM(graph, e), IGRAPH_TO(graph, e));
  igraph_integer_t count = 0;
  igraph_error_t code = knnwb_clustering_number_sets(parent, n, membership, &count);
  g_free(parent);
  if (code == IGRAPH_SUCCESS && sizes) {
    code = igraph_vector_int_resize(sizes, count);
    if (code == IGRAPH_SUCCESS) {
      igraph_vector_int_null(sizes);
      for (int64_t v = 0; v < n; v++)
        VECTOR(*sizes)[VECTOR(*membership)[v]]++;
    }
  }
  if (n_components)
    *n_components = count;
  return knnwb_error_from_igraph(code, "numbering components", error);
}
