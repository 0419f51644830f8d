/* Union-find, set numbering and small graph helpers used across the clustering files. */
#include <math.h>
#include <stdlib.h>
#include <knnwb/error.h>
#include "clustering_internal.h"

int64_t knnwb_clustering_find(int64_t *parent, int64_t x)
{
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

gboolean knnwb_clustering_union(int64_t *parent, int64_t a, int64_t b)
{
  a = knnwb_clustering_find(parent, a);
  b = knnwb_clustering_find(parent, b);
  if (a == b)
    return FALSE;
  /* The lower root wins so that roots are each set's lowest element after numbering. */
  if (a < b)
    parent[b] = a;
  else
    parent[a] = b;
  return TRUE;
}

igraph_error_t knnwb_clustering_number_sets(int64_t *parent, int64_t n,
                                            igraph_vector_int_t *membership,
                                            igraph_integer_t *n_sets)
{
  IGRAPH_CHECK(igraph_vector_int_resize(membership, n));
  igraph_integer_t count = 0;
  /* Sets are numbered by their lowest element: the first one met in vertex order. */
  for (int64_t v = 0; v < n; v++)
    VECTOR(*membership)[v] = -1;
  for (int64_t v = 0; v < n; v++) {
    int64_t root = knnwb_clustering_find(parent, v);
    if (VECTOR(*membership)[root] < 0)
      VECTOR(*membership)[root] = count++;
    VECTOR(*membership)[v] = VECTOR(*membership)[root];
  }
  if (n_sets)
    *n_sets = count;
  return IGRAPH_SUCCESS;
}

gboolean knnwb_clustering_check_weights(const igraph_t *graph, const igraph_vector_t *weights,
                                        GError **error)
{
  igraph_integer_t m = igraph_ecount(graph);
  if (!weights || igraph_vector_size(weights) != m) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the weight vector has %" G_GINT64_FORMAT " entries but the graph %" G_GINT64_FORMAT
                " edges",
                weights ? (gint64)igraph_vector_size(weights) : (gint64)-1, (gint64)m);
    return FALSE;
  }
  for (igraph_integer_t e = 0; e < m; e++) {
    if (isnan(VECTOR(*weights)[e])) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "weight of edge %" G_GINT64_FORMAT " is NaN", (gint64)e);
      return FALSE;
    }
  }
  return TRUE;
}

typedef struct {
  int64_t u, v;
  double w;
} KnnwbClusteringPair;

static int knnwb_clustering_pair_compare(const void *a, const void *b)
{
  const KnnwbClusteringPair *x = a, *y = b;
  if (x->w != y->w)
    return x->w < y->w ? -1 : 1;
  int64_t xa = MIN(x->u, x->v), ya = MIN(y->u, y->v);
  if (xa != ya)
    return xa < ya ? -1 : 1;
  int64_t xb = MAX(x->u, x->v), yb = MAX(y->u, y->v);
  return (xb > yb) - (xb < yb);
}

static igraph_error_t knnwb_clustering_build_tree(int64_t n, int64_t m,
                                                  const KnnwbClusteringPair *pairs, igraph_t *tree,
                                                  igraph_vector_t *weights)
{
  igraph_vector_int_t edges;
  IGRAPH_CHECK(igraph_vector_int_init(&edges, 2 * m));
  IGRAPH_FINALLY(igraph_vector_int_destroy, &edges);
  IGRAPH_CHECK(igraph_vector_resize(weights, m));
  for (int64_t i = 0; i < m; i++) {
    VECTOR(edges)[2 * i] = MIN(pairs[i].u, pairs[i].v);
    VECTOR(edges)[2 * i + 1] = MAX(pairs[i].u, pairs[i].v);
    VECTOR(*weights)[i] = pairs[i].w;
  }
  IGRAPH_CHECK(igraph_create(tree, &edges, n, IGRAPH_UNDIRECTED));
  igraph_vector_int_destroy(&edges);
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

gboolean knnwb_clustering_tree_from_pairs(int64_t n, int64_t m, const int64_t *u, const int64_t *v,
                                          const double *w, gboolean sort, igraph_t *tree,
                                          igraph_vector_t *weights, GError **error)
{
  KnnwbClusteringPair *pairs = g_try_new(KnnwbClusteringPair, MAX(m, 1));
  if (!pairs) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate %" G_GINT64_FORMAT " tree edges", (gint64)m);
    return FALSE;
  }
  for (int64_t i = 0; i < m; i++)
    pairs[i] = (KnnwbClusteringPair){u[i], v[i], w[i]};
  if (sort)
    qsort(pairs, (size_t)m, sizeof *pairs, knnwb_clustering_pair_compare);
  igraph_error_t code = knnwb_clustering_build_tree(n, m, pairs, tree, weights);
  g_free(pairs);
  return knnwb_error_from_igraph(code, "building the tree graph", error);
}
