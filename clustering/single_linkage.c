/* Single linkage from a minimum spanning tree/forest: the merge table and flat cuts. */
#include <math.h>
#include <stdlib.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

static int knnwb_single_linkage_compare(const void *a, const void *b, void *data)
{
  const igraph_vector_t *weights = data;
  igraph_integer_t x = *(const igraph_integer_t *)a, y = *(const igraph_integer_t *)b;
  double wx = VECTOR(*weights)[x], wy = VECTOR(*weights)[y];
  if (wx != wy)
    return wx < wy ? -1 : 1;
  return (x > y) - (x < y);
}

/* Edge ids sorted by (weight, id): the merge order of single linkage. NULL when out of memory. */
static igraph_integer_t *knnwb_single_linkage_order(const igraph_vector_t *weights,
                                                    igraph_integer_t m, GError **error)
{
  igraph_integer_t *order = g_try_new(igraph_integer_t, MAX(m, 1));
  if (!order) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot sort %" G_GINT64_FORMAT " edges",
                (gint64)m);
    return NULL;
  }
  for (igraph_integer_t e = 0; e < m; e++)
    order[e] = e;
  g_qsort_with_data(order, (gint)m, sizeof *order, knnwb_single_linkage_compare, (gpointer)weights);
  return order;
}

gboolean knnwb_clustering_single_linkage(const igraph_t *tree, const igraph_vector_t *weights,
                                         igraph_matrix_t *linkage, GError **error)
{
  if (!knnwb_clustering_check_weights(tree, weights, error))
    return FALSE;
  int64_t n = igraph_vcount(tree);
  igraph_integer_t m = igraph_ecount(tree);
  if (m > MAX(n - 1, 0)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%" G_GINT64_FORMAT " edges on %" G_GINT64_FORMAT " vertices cannot be a forest",
                (gint64)m, (gint64)n);
    return FALSE;
  }
  igraph_integer_t *order = knnwb_single_linkage_order(weights, m, error);
  if (!order)
    return FALSE;
  int64_t *parent = g_new(int64_t, MAX(n, 1));
  int64_t *cluster = g_new(int64_t, MAX(n, 1)); /* linkage id of each root's cluster */
  int64_t *size = g_new(int64_t, MAX(n, 1));
  for (int64_t v = 0; v < n; v++) {
    parent[v] = v;
    cluster[v] = v;
    size[v] = 1;
  }
  gboolean ok = FALSE;
  igraph_error_t code = igraph_matrix_resize(linkage, m, 4);
  if (!knnwb_error_from_igraph(code, "resizing the linkage matrix", error))
    goto out;
  for (igraph_integer_t row = 0; row < m; row++) {
    igraph_integer_t e = order[row];
    int64_t a = knnwb_clustering_find(parent, IGRAPH_FROM(tree, e));
    int64_t b = knnwb_clustering_find(parent, IGRAPH_TO(tree, e));
    if (a == b) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "edge %" G_GINT64_FORMAT " closes a cycle: the graph is not a forest", (gint64)e);
      goto out;
    }
    MATRIX(*linkage, row, 0) = (double)MIN(cluster[a], cluster[b]);
    MATRIX(*linkage, row, 1) = (double)MAX(cluster[a], cluster[b]);
    MATRIX(*linkage, row, 2) = VECTOR(*weights)[e];
    MATRIX(*linkage, row, 3) = (double)(size[a] + size[b]);
    knnwb_clustering_union(parent, a, b);
    int64_t root = knnwb_clustering_find(parent, a);
    cluster[root] = n + row;
    size[root] = size[a] + size[b];
  }
  ok = TRUE;
out:
  g_free(order);
  g_free(parent);
  g_free(cluster);
  g_free(size);
  return ok;
}

/* Joins the edges of order[0 .. limit) (all of them when stop_count is 0, else until stop_count
 * sets remain), then numbers the sets. */
static gboolean knnwb_single_linkage_join(const igraph_t *tree, const igraph_integer_t *order,
                                          igraph_integer_t limit, igraph_integer_t stop_count,
                                          igraph_vector_int_t *membership,
                                          igraph_integer_t *n_clusters, GError **error)
{
  int64_t n = igraph_vcount(tree);
  int64_t *parent = g_new(int64_t, MAX(n, 1));
  for (int64_t v = 0; v < n; v++)
    parent[v] = v;
  int64_t count = n;
  for (igraph_integer_t i = 0; i < limit && (stop_count == 0 || count > stop_count); i++) {
    igraph_integer_t e = order ? order[i] : i;
    count -= knnwb_clustering_union(parent, IGRAPH_FROM(tree, e), IGRAPH_TO(tree, e));
  }
  igraph_error_t code = knnwb_clustering_number_sets(parent, n, membership, n_clusters);
  g_free(parent);
  return knnwb_error_from_igraph(code, "numbering clusters", error);
}

gboolean knnwb_clustering_cut_distance(const igraph_t *tree, const igraph_vector_t *weights,
                                       double height, igraph_vector_int_t *membership,
                                       igraph_integer_t *n_clusters, GError **error)
{
  if (!knnwb_clustering_check_weights(tree, weights, error))
    return FALSE;
  if (isnan(height)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "the cut height is NaN");
    return FALSE;
  }
  igraph_integer_t m = igraph_ecount(tree);
  igraph_integer_t *order = knnwb_single_linkage_order(weights, m, error);
  if (!order)
    return FALSE;
  igraph_integer_t limit = 0;
  while (limit < m && VECTOR(*weights)[order[limit]] <= height)
    limit++;
  gboolean ok = knnwb_single_linkage_join(tree, order, limit, 0, membership, n_clusters, error);
  g_free(order);
  return ok;
}

gboolean knnwb_clustering_cut_count(const igraph_t *tree, const igraph_vector_t *weights,
                                    igraph_integer_t n_clusters, igraph_vector_int_t *membership,
                                    igraph_integer_t *n_clusters_out, GError **error)
{
  if (!knnwb_clustering_check_weights(tree, weights, error))
    return FALSE;
  igraph_integer_t n = igraph_vcount(tree);
  if (n_clusters < 1 || n_clusters > MAX(n, 1)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the number of clusters must be between 1 and %" G_GINT64_FORMAT
                " (got %" G_GINT64_FORMAT ")",
                (gint64)MAX(n, 1), (gint64)n_clusters);
    return FALSE;
  }
  igraph_integer_t m = igraph_ecount(tree);
  igraph_integer_t *order = knnwb_single_linkage_order(weights, m, error);
  if (!order)
    return FALSE;
  gboolean ok =
      knnwb_single_linkage_join(tree, order, m, n_clusters, membership, n_clusters_out, error);
  g_free(order);
  return ok;
}
