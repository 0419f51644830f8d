/* Step knn-graph: the exact kNN graph of the rows of a matrix. */
#include <knnwb/error.h>
#include <knnwb/graph.h>
#include "knn_plugin_internal.h"

enum { GRAPH_MODE = KNNWB_KNN_N_COMMON_PARAMS, N_PARAMS };

static const KnnwbParamSpec knnwb_knn_graph_params[N_PARAMS] = {
    KNNWB_KNN_COMMON_PARAMS,
    [GRAPH_MODE] = {"graph", KNNWB_PARAM_CHOICE, "directed", 1, 0,
                    KNNWB_ENUM_CHOICES(KNNWB_GRAPH_MODE_NAMES),
                    "directed: k edges per point in rank order; union/mutual: undirected"},
};

static const KnnwbPortSpec knnwb_knn_graph_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points (rows)"},
};

static gboolean knnwb_knn_graph_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  KnnwbKnnOptions options;
  KnnwbGraphMode mode;
  if (!knnwb_knn_plugin_options(context, &options, devices, error) ||
      !knnwb_graph_mode_from_string(context->params[GRAPH_MODE].v_string, &mode, error))
    return FALSE;
  if (context->group != NULL && in->block_total > 0) {
    /* Split rows under mpirun: the ranks compute together, each gets its rows' lists, rank 0
     * gathers them and alone builds the graph the steps after this one use. */
    options.group = context->group;
    options.group_split = TRUE;
    /* (clustered rows go together for the partitioned search where every rank has room) */
    options.group_split_gather = TRUE;
    options.group_own_rows = TRUE;
    g_autoptr(KnnwbNeighbors) own = NULL, neighbors = NULL;
    if (!knnwb_knn_self(in->matrix, &options, &own, error) ||
        !knnwb_neighbors_gather_root(context->group, own, &neighbors, error))
      return FALSE;
    if (neighbors == NULL)
      return TRUE; /* not rank 0 */
    g_clear_pointer(&own, knnwb_neighbors_free);
    if (!knnwb_graph_from_neighbors(neighbors, mode, &out->graph, &out->weights, error))
      return FALSE;
  } else if (!knnwb_knn_graph(in->matrix, &options, mode, &out->graph, &out->weights, error)) {
    return FALSE;
  }
  out->has_graph = TRUE;
  out->points = in;
  return TRUE;
}

const KnnwbStepType knnwb_knn_step_graph = {
    "knn-graph",
    "exact kNN graph of the rows of a matrix",
    knnwb_knn_graph_inputs,
    G_N_ELEMENTS(knnwb_knn_graph_inputs),
    knnwb_knn_graph_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_knn_graph_run,
    KNNWB_STEP_SPLIT_ROWS,
    knnwb_knn_plugin_check,
};
