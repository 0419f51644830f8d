/* Neighbour lists into igraph graphs: directed kNN graph, undirected union or mutual graph. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/enum_names.h>
#include <knnwb/graph.h>
#include <knnwb/parallel.h>
#include "graph/graph_internal.h"

static const KnnwbEnumName knnwb_graph_mode_names[] = {KNNWB_GRAPH_MODE_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_graph_mode_table = KNNWB_ENUM_TABLE(
    knnwb_graph_mode_names, 0, " or ", "unknown graph mode ", ": use ", "", "(null)");

gboolean knnwb_graph_mode_from_string(const char *name, KnnwbGraphMode *mode, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_graph_mode_table, name, &value, error))
    return FALSE;
  *mode = (KnnwbGraphMode)value;
  return TRUE;
}

static int knnwb_half_edge_compare(const void *a, const void *b)
{
  const KnnwbHalfEdge *x = a, *y = b;
  return x->other < y->other ? -1 : (x->other > y->other);
}

igraph_error_t knnwb_graph_merge_half_edges(KnnwbHalfEdge *half, const size_t *start,
                                            size_t n_buckets, size_t first, gboolean mutual,
                                            igraph_vector_int_t *edges, igraph_vector_t *weights)
{
  const size_t total = start[n_buckets];
  igraph_vector_int_clear(edges);
  igraph_vector_clear(weights);
  IGRAPH_CHECK(igraph_vector_int_reserve(edges, 2 * (igraph_integer_t)total));
  IGRAPH_CHECK(igraph_vector_reserve(weights, (igraph_integer_t)total));
  for (size_t lo = 0; lo < n_buckets; lo++) {
    KnnwbHalfEdge *bucket = half + start[lo];
    size_t size = start[lo + 1] - start[lo];
    qsort(bucket, size, sizeof *bucket, knnwb_half_edge_compare);
    for (size_t a = 0; a < size;) {
      size_t b = a + 1;
      double weight = bucket[a].weight;
      while (b < size && bucket[b].other == bucket[a].other) {
        weight = MIN(weight, bucket[b].weight);
        b++;
      }
      if (!mutual || b - a >= 2) {
        /* reserved: cannot fail */
        igraph_vector_int_push_back(edges, (igraph_integer_t)(first + lo));
        igraph_vector_int_push_back(edges, bucket[a].other);
        igraph_vector_push_back(weights, weight);
      }
      a = b;
    }
  }
  return IGRAPH_SUCCESS;
}

/* Undirected edges from directed lists: bucket each pair under its smaller endpoint (counting sort,
 * O(E)), then sort each bucket by the other endpoint and merge the two directions. */
static igraph_error_t knnwb_graph_undirected_edges(const KnnwbNeighbors *nb, gboolean mutual,
                                                   igraph_vector_int_t *edges,
                                                   igraph_vector_t *weights)
{
  const size_t n = nb->n_queries, k = nb->k;
  size_t *start = g_try_malloc0((n + 1) * sizeof(size_t));
  KnnwbHalfEdge *half = NULL;
  if (start == NULL)
    IGRAPH_ERROR("cannot allocate edge buckets", IGRAPH_ENOMEM);
  IGRAPH_FINALLY(g_free, start);
  size_t total = 0;
  for (size_t i = 0; i < n; i++)
    for (int32_t r = 0; r < nb->n_found[i]; r++) {
      size_t j = (size_t)nb->indices[i * k + (size_t)r];
      start[MIN(i, j) + 1]++;
      total++;
    }
  for (size_t i = 0; i < n; i++)
    start[i + 1] += start[i];
  half = g_try_malloc(MAX(total, (size_t)1) * sizeof(KnnwbHalfEdge));
  if (half == NULL)
    IGRAPH_ERROR("cannot allocate edge list", IGRAPH_ENOMEM);
  IGRAPH_FINALLY(g_free, half);
  size_t *fill = g_try_malloc(MAX(n, (size_t)1) * sizeof(size_t));
  if (fill == NULL)
    IGRAPH_ERROR("cannot allocate edge buckets", IGRAPH_ENOMEM);
  memcpy(fill, start, n * sizeof(size_t));
  for (size_t i = 0; i < n; i++)
    for (int32_t r = 0; r < nb->n_found[i]; r++) {
      size_t j = (size_t)nb->indices[i * k + (size_t)r];
      size_t lo = MIN(i, j), hi = MAX(i, j);
      half[fill[lo]++] = (KnnwbHalfEdge){(igraph_integer_t)hi, nb->distances[i * k + (size_t)r]};
    }
  g_free(fill);
  IGRAPH_CHECK(knnwb_graph_merge_half_edges(half, start, n, 0, mutual, edges, weights));
  g_free(half);
  g_free(start);
  IGRAPH_FINALLY_CLEAN(2);
  return IGRAPH_SUCCESS;
}

static igraph_error_t knnwb_graph_edges(const KnnwbNeighbors *nb, KnnwbGraphMode mode,
                                        igraph_vector_int_t *edges, igraph_vector_t *weights)
{
  const size_t n = nb->n_queries, k = nb->k;
  if (mode == KNNWB_GRAPH_DIRECTED) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
      total += (size_t)nb->n_found[i];
    IGRAPH_CHECK(igraph_vector_int_resize(edges, 2 * (igraph_integer_t)total));
    IGRAPH_CHECK(igraph_vector_resize(weights, (igraph_integer_t)total));
    size_t e = 0;
    for (size_t i = 0; i < n; i++)
      for (int32_t r = 0; r < nb->n_found[i]; r++, e++) {
        VECTOR(*edges)[2 * e] = (igraph_integer_t)i;
        VECTOR(*edges)[2 * e + 1] = (igraph_integer_t)nb->indices[i * k + (size_t)r];
        VECTOR(*weights)[e] = nb->distances[i * k + (size_t)r];
      }
    return IGRAPH_SUCCESS;
  }
  return knnwb_graph_undirected_edges(nb, mode == KNNWB_GRAPH_MUTUAL, edges, weights);
}

static igraph_error_t knnwb_graph_build(const KnnwbNeighbors *nb, KnnwbGraphMode mode,
                                        igraph_t *graph, igraph_vector_t *weights)
{
  igraph_vector_int_t edges;
  IGRAPH_VECTOR_INT_INIT_FINALLY(&edges, 0);
  IGRAPH_CHECK(knnwb_graph_edges(nb, mode, &edges, weights));
  IGRAPH_CHECK(igraph_create(graph, &edges, (igraph_integer_t)nb->n_queries,
                             mode == KNNWB_GRAPH_DIRECTED ? IGRAPH_DIRECTED : IGRAPH_UNDIRECTED));
  igraph_vector_int_destroy(&edges);
  IGRAPH_FINALLY_CLEAN(1);
  return IGRAPH_SUCCESS;
}

/* Refuses a graph of about n * k edges that cannot fit, with the numbers. Per edge igraph keeps
 * from, to and two index vectors (4 integers), and building it takes the edge vector (2 integers)
 * and the weights (1 double); with_lists adds the neighbour lists (index + distance) that exist
 * while the graph is built. */
static gboolean knnwb_graph_check_memory(size_t n, size_t k, gboolean with_lists, GError **error)
{
  double per_edge = 6.0 * sizeof(igraph_integer_t) + sizeof(double) +
                    (with_lists ? sizeof(int64_t) + sizeof(double) : 0.0);
  double needed = (double)n * (double)k * per_edge;
  size_t available = knnwb_memory_available();
  if (needed <= (double)available)
    return TRUE;
  g_autofree char *needed_text = knnwb_memory_format((size_t)MIN(needed, (double)SIZE_MAX));
  g_autofree char *available_text = knnwb_memory_format(available);
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
              "a kNN graph of %zu rows with k = %zu needs about %s of memory for its %s but only "
              "%s is available: lower k, or run on a machine with more memory",
              n, k, needed_text, with_lists ? "neighbour lists and igraph graph" : "igraph graph",
              available_text);
  return FALSE;
}

gboolean knnwb_graph_from_neighbors(const KnnwbNeighbors *neighbors, KnnwbGraphMode mode,
                                    igraph_t *graph, igraph_vector_t *weights, GError **error)
{
  g_return_val_if_fail(neighbors != NULL && graph != NULL && weights != NULL, FALSE);
  if (neighbors->n_queries > (size_t)IGRAPH_INTEGER_MAX / 2 / MAX(neighbors->k, (size_t)1)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%zu x %zu edges exceed igraph's limits",
                neighbors->n_queries, neighbors->k);
    return FALSE;
  }
  if (!knnwb_graph_check_memory(neighbors->n_queries, neighbors->k, FALSE, error))
    return FALSE;
  return knnwb_error_from_igraph(knnwb_graph_build(neighbors, mode, graph, weights),
                                 "building the kNN graph", error);
}

gboolean knnwb_graph_edges_from_neighbors(const KnnwbNeighbors *neighbors, KnnwbGraphMode mode,
                                          igraph_vector_int_t *edges, igraph_vector_t *weights,
                                          GError **error)
{
  g_return_val_if_fail(neighbors != NULL && edges != NULL && weights != NULL, FALSE);
  if (neighbors->n_queries > (size_t)IGRAPH_INTEGER_MAX / 2 / MAX(neighbors->k, (size_t)1)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "%zu x %zu edges exceed igraph's limits",
                neighbors->n_queries, neighbors->k);
    return FALSE;
  }
  return knnwb_error_from_igraph(knnwb_graph_edges(neighbors, mode, edges, weights),
                                 "building the kNN edge list", error);
}

gboolean knnwb_knn_graph(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                         KnnwbGraphMode mode, igraph_t *graph, igraph_vector_t *weights,
                         GError **error)
{
  g_autoptr(KnnwbNeighbors) neighbors = NULL;
  /* Up front: the lists and the graph together, before hours of search. k beyond the rows is
   * knnwb_knn_self's error to report. */
  if (data != NULL && options != NULL && data->n_rows > 0 &&
      !knnwb_graph_check_memory(data->n_rows, MIN(options->k, data->n_rows - 1), TRUE, error))
    return FALSE;
  if (!knnwb_knn_self(data, options, &neighbors, error))
    return FALSE;
  return knnwb_graph_from_neighbors(neighbors, mode, graph, weights, error);
}

gboolean knnwb_graph_set_attributes(igraph_t *graph, const igraph_vector_t *weights,
                                    const KnnwbMatrix *data, GError **error)
{
  if (graph->attr == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IGRAPH,
                "the graph has no attribute store: call igraph_set_attribute_table("
                "&igraph_cattribute_table) before creating any graph");
    return FALSE;
  }
  if (weights != NULL) {
    int code = igraph_cattribute_EAN_setv(graph, "weight", weights);
    if (!knnwb_error_from_igraph(code, "setting edge attribute 'weight'", error))
      return FALSE;
  }
  if (data != NULL && data->row_labels != NULL && data->n_rows == (size_t)igraph_vcount(graph)) {
    igraph_strvector_t names;
    int code = igraph_strvector_init(&names, (igraph_integer_t)data->n_rows);
    for (size_t i = 0; code == IGRAPH_SUCCESS && i < data->n_rows; i++)
      code = igraph_strvector_set(&names, (igraph_integer_t)i,
                                  data->row_labels[i] ? data->row_labels[i] : "");
    if (code == IGRAPH_SUCCESS)
      code = igraph_cattribute_VAS_setv(graph, "name", &names);
    igraph_strvector_destroy(&names);
    if (!knnwb_error_from_igraph(code, "setting vertex attribute 'name'", error))
      return FALSE;
  }
  return TRUE;
}
