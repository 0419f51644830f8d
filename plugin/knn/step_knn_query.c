/* Step knn-query: the k nearest reference rows of every query row, as a bipartite directed graph
 * (vertices: the queries, then the references; edges query -> reference in rank order). */
#include <knnwb/error.h>
#include "knn_plugin_internal.h"

enum { N_PARAMS = KNNWB_KNN_N_COMMON_PARAMS };

static const KnnwbParamSpec knnwb_knn_query_params[N_PARAMS] = {KNNWB_KNN_COMMON_PARAMS};

static const KnnwbPortSpec knnwb_knn_query_inputs[] = {
    {"query", KNNWB_KIND_MATRIX, FALSE, "the points whose neighbours are wanted"},
    {"reference", KNNWB_KIND_MATRIX, FALSE, "the points neighbours are taken from"},
};

/* A matrix value's rows and labels: the whole matrix's, or (split rows under mpirun) every rank's
 * rows and, on rank 0, every label. */
static size_t knnwb_knn_query_rows(const KnnwbValue *value, const char *const **labels)
{
  if (value->block_total > 0) {
    *labels = value->block_labels;
    return value->block_total;
  }
  *labels = (const char *const *)value->matrix->row_labels;
  return value->matrix->n_rows;
}

/* The vertex labels: queries then references (numbers where a side has none). */
static gboolean knnwb_knn_query_labels(const KnnwbValue *query, const KnnwbValue *reference,
                                       KnnwbValue *out, GError **error)
{
  const char *const *query_labels, *const *reference_labels;
  size_t n_query = knnwb_knn_query_rows(query, &query_labels);
  size_t n = n_query + knnwb_knn_query_rows(reference, &reference_labels);
  out->matrix = knnwb_matrix_new(n, 0, error);
  if (out->matrix == NULL)
    return FALSE;
  for (size_t i = 0; i < n; i++) {
    const gboolean is_query = i < n_query;
    const char *const *side = is_query ? query_labels : reference_labels;
    size_t row = is_query ? i : i - n_query;
    const char *label = side != NULL ? side[row] : NULL;
    g_autofree char *number = NULL;
    if (label == NULL)
      label = number = g_strdup_printf("%s%zu", is_query ? "q" : "r", row);
    knnwb_matrix_set_row_label(out->matrix, i, label);
  }
  return TRUE;
}

static gboolean knnwb_knn_query_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *query = context->inputs[0], *reference = context->inputs[1];
  KnnwbValue *out = context->output;
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  KnnwbKnnOptions options;
  gboolean ready = knnwb_knn_plugin_options(context, &options, devices, error);
  /* Split rows under mpirun: each rank passes its blocks and gets its query rows' lists, rank 0
   * gathers them and builds the graph. */
  const gboolean split =
      context->group != NULL && query->block_total > 0 && reference->block_total > 0;
  if (ready && split) {
    options.group = context->group;
    options.group_split = TRUE;
    options.group_own_rows = TRUE;
  }
  /* A query file may list the columns (samples, or genes after transposing) in another order. */
  g_autoptr(KnnwbMatrix) matched = NULL;
  ready = ready && knnwb_matrix_match_columns(query->matrix, reference->matrix, &matched, error);
  /* Under a group every rank agrees before the query's collectives (the split rows' exchange, or
   * the whole query's gather of the lists), whatever failed where: the reordered copy of a rank's
   * rows may not fit on that rank alone, and a rank that returned alone would leave the others
   * waiting in the query. */
  if (context->group != NULL && context->group->size > 1 &&
      !context->group->agree(context->group, ready, error))
    return FALSE;
  if (!ready)
    return FALSE;
  g_autoptr(KnnwbNeighbors) neighbors = NULL;
  if (!knnwb_knn_query(matched != NULL ? matched : query->matrix, reference->matrix, &options,
                       &neighbors, error))
    return FALSE;
  if (options.group_split) {
    g_autoptr(KnnwbNeighbors) own = g_steal_pointer(&neighbors);
    if (!knnwb_neighbors_gather_root(context->group, own, &neighbors, error))
      return FALSE;
    if (neighbors == NULL)
      return TRUE; /* not rank 0 */
  }
  const char *const *labels;
  const size_t n_query = knnwb_knn_query_rows(query, &labels);
  const size_t n_reference = knnwb_knn_query_rows(reference, &labels);

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
      [2 * e + 1] = (igraph_integer_t)(n_query + (size_t)neighbors->indices[i * neighbors->k + r]);
      VECTOR(out->weights)[e] = neighbors->distances[i * neighbors->k + r];
      e++;
    }
  gboolean ok = knnwb_error_from_igraph(igraph_create(&out->graph, &edges,
                                                      (igraph_integer_t)(n_query + n_reference),
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
    KNNWB_STEP_SPLIT_ROWS,
    knnwb_knn_plugin_check,
};
