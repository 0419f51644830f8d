/* Step knn-query: the k nearest reference rows of every query row, as a bipartite directed graph
 * (vertices: the queries, then the references; edges query -> reference in rank order). */
#include <knnwb/error.h>
#include "knn_plugin.h"

enum { N_PARAMS = KNNWB_KNN_N_COMMON_PARAMS };

static const KnnwbParamSpec knnwb_knn_query_params[N_PARAMS] = {KNNWB_KNN_COMMON_PARAMS};

static const KnnwbPortSpec knnwb_knn_query_inputs[] = {
    {"query", KNNWB_KIND_MATRIX, FALSE, "the points whose neighbours are wanted"},
    {"reference", KNNWB_KIND_MATRIX, FALSE, "the points neighbours are taken from"},
};

/* The vertex labels: queries then references (numbers where a side has none). */
static gboolean knnwb_knn_query_labels(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                       KnnwbValue *out, GError **error)
{
  size_t n = query->n_rows + reference->n_rows;
  out->matrix = knnwb_matrix_new(n, 0, error);
  if (out->matrix == NULL)
    return FALSE;
  for (size_t i = 0; i < n; i++) {
    const KnnwbMatrix *side = i < query->n_rows ? query : reference;
    size_t row = i < query->n_rows ? i : i - query->n_rows;
    const char *label = knnwb_matrix_row_label(side, row);
    g_autofree char *number = NULL;
    if (label == NULL)
      label = number = g_strdup_printf("%s%zu", side == query ? "q" : "r", row);
    knnwb_matrix_set_row_label(out->matrix, i, label);
  }
  return TRUE;
}

static gboolean knnwb_knn_query_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbMatrix *query = context->inputs[0]->matrix;
  const KnnwbMatrix *reference = context->inputs[1]->matrix;
  KnnwbValue *out = context->output;
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  KnnwbKnnOptions options;
  if (!knnwb_knn_plugin_options(context, &options, devices, error))
    return FALSE;
  g_autoptr(KnnwbNeighbors) neighbors = NULL;
  if (!knnwb_knn_query(query, reference, &options, &neighbors, error))
    return FALSE;

  size_t n_edges = 0;
  for (size_t i = 0; i < neighbors->n_queries; i++)
    n_edges += (size_t)neighbors->n_found[i];
  igraph_vector_int_t edges;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, (igraph_integer_t)(2 * n_edges)),
                               "igraph_vector_int_init", error))
    return FALSE;
  if (!knnwb_error_from_igraph(igraph_vector_resize(&out->weights, (igraph_integer_t)n_edges),
                               "igraph_vector_resize", error)) {
    igraph_vector_int_destroy(&edges);
    return FALSE;
  }
  size_t e = 0;
  for (size_t i = 0; i < neighbors->n_queries; i++)
    for (int32_t r = 0; r < neighbors->n_found[i]; r++) {
      VECTOR(edges)[2 * e] = (igraph_integer_t)i;
      VECTOR(edges)
      [2 * e + 1] =
          (igraph_integer_t)(query->n_rows + (size_t)neighbors->indices[i * neighbors->k + r]);
      VECTOR(out->weights)[e] = neighbors->distances[i * neighbors->k + r];
      e++;
    }
  gboolean ok = knnwb_error_from_igraph(
      igraph_create(&out->graph, &edges, (igraph_integer_t)(query->n_rows + reference->n_rows),
                    IGRAPH_DIRECTED),
      "igraph_create", error);
  igraph_vector_int_destroy(&edges);
  if (!ok)
    return FALSE;
  out->has_graph = TRUE;
  return knnwb_knn_query_labels(query, reference, out, error);
}

const KnnwbStepType knnwb_knn_step_query = {
    "knn-query",
    "k nearest reference rows of every query row (bipartite directed graph)",
    knnwb_knn_query_inputs,
    G_N_ELEMENTS(knnwb_knn_query_inputs),
    knnwb_knn_query_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_knn_query_run,
};
