/*
 * Exact MST of a precomputed distance matrix. The R package mstknnclust runs igraph's Prim on the
 * complete graph; with tied distances (dslanguages.csv has 502 distinct values among 3,486 pairs)
 * the tree depends on Prim's heap order, so the same igraph call on the same complete graph is the
 * only faithful way to reproduce the package.
 */
#include <math.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

gboolean knnwb_clustering_check_distance_matrix(const igraph_matrix_t *distances, GError **error)
{
  igraph_integer_t n = igraph_matrix_nrow(distances);
  if (igraph_matrix_ncol(distances) != n) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the distance matrix is %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT ", not square",
                (gint64)n, (gint64)igraph_matrix_ncol(distances));
    return FALSE;
  }
  for (igraph_integer_t i = 0; i < n; i++) {
    for (igraph_integer_t j = i + 1; j < n; j++) {
      double a = MATRIX(*distances, i, j), b = MATRIX(*distances, j, i);
      if (!isfinite(a) || !isfinite(b) || a < 0 || b < 0) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "distance (%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                    ") is not a finite non-negative number",
                    (gint64)i + 1, (gint64)j + 1);
        return FALSE;
      }
      if (fabs(a - b) > 1e-9 * MAX(1.0, fabs(a))) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                    "the distance matrix is not symmetric at (%" G_GINT64_FORMAT
                    ", %" G_GINT64_FORMAT "): %.17g vs %.17g",
                    (gint64)i + 1, (gint64)j + 1, a, b);
        return FALSE;
      }
    }
  }
  return TRUE;
}

igraph_error_t knnwb_clustering_prim_subset(const igraph_matrix_t *distances,
                                            const int64_t *members, int64_t s, int64_t *eu,
                                            int64_t *ev, double *ew)
{
  if (s <= 1)
    return IGRAPH_SUCCESS;
  igraph_integer_t pairs = s * (s - 1) / 2;
  igraph_vector_int_t edges, tree_edges;
  igraph_vector_t weights;
  igraph_t complete;
  IGRAPH_CHECK(igraph_vector_int_init(&edges, 2 * pairs));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &edges);
  IGRAPH_CHECK(igraph_vector_init(&weights, pairs));
  IGRAPH_FINALLY(igraph_vector_destroy, &weights);
  IGRAPH_CHECK(igraph_vector_int_init(&tree_edges, 0));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &tree_edges);
  igraph_integer_t e = 0;
  /* The upper triangle row by row, as the package's edge list. */
  for (int64_t i = 0; i < s; i++) {
    for (int64_t j = i + 1; j < s; j++, e++) {
      VECTOR(edges)[2 * e] = i;
      VECTOR(edges)[2 * e + 1] = j;
      VECTOR(weights)[e] = MATRIX(*distances, members[i], members[j]);
    }
  }
  IGRAPH_CHECK(igraph_create(&complete, &edges, s, IGRAPH_UNDIRECTED));
  IGRAPH_FINALLY(igraph_destroy, &complete);
  IGRAPH_CHECK(igraph_minimum_spanning_tree(&complete, &tree_edges, &weights));
  for (igraph_integer_t t = 0; t < igraph_vector_int_size(&tree_edges); t++) {
    igraph_integer_t id = VECTOR(tree_edges)[t];
    eu[t] = IGRAPH_FROM(&complete, id);
    ev[t] = IGRAPH_TO(&complete, id);
    ew[t] = VECTOR(weights)[id];
  }
  igraph_destroy(&complete);
  igraph_vector_int_destroy(&tree_edges);
  igraph_vector_destroy(&weights);
  igraph_vector_int_destroy(&edges);
  IGRAPH_FINALLY_CLEAN(4);
  return IGRAPH_SUCCESS;
}

gboolean knnwb_clustering_mst_distance_matrix(const igraph_matrix_t *distances, igraph_t *tree,
                                              igraph_vector_t *weights, GError **error)
{
  if (!knnwb_clustering_check_distance_matrix(distances, error))
    return FALSE;
  int64_t n = igraph_matrix_nrow(distances);
  int64_t m = MAX(n - 1, 0);
  int64_t *members = g_new(int64_t, MAX(n, 1));
  int64_t *eu = g_new(int64_t, MAX(m, 1)), *ev = g_new(int64_t, MAX(m, 1));
  double *ew = g_new(double, MAX(m, 1));
  for (int64_t i = 0; i < n; i++)
    members[i] = i;
  igraph_error_t code = knnwb_clustering_prim_subset(distances, members, n, eu, ev, ew);
  gboolean ok = knnwb_error_from_igraph(code, "Prim's minimum spanning tree", error) &&
                knnwb_clustering_tree_from_pairs(n, m, eu, ev, ew, FALSE, tree, weights, error);
  g_free(members);
  g_free(eu);
  g_free(ev);
  g_free(ew);
  return ok;
}
