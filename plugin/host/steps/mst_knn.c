/* Step mst-knn: MST-kNN clustering of the points (Inostroza-Ponta et al.). */
#include <knnwb/clustering.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <math.h>
#include "steps.h"

enum { METRIC, LIST_K, BACKEND, N_PARAMS };

static const KnnwbParamSpec knnwb_mst_knn_params[N_PARAMS] = {
    [METRIC] = {"metric", KNNWB_PARAM_CHOICE, "pearson", 1, 0, KNNWB_STEP_METRICS,
                "distance (must be the one of the knn input, when given)"},
    [LIST_K] = {"list-k", KNNWB_PARAM_INT, "0", 0, 1e9, NULL,
                "length of the global kNN lists (0: automatic; ignored with a knn input)"},
    [BACKEND] = {"backend", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_STEP_BACKENDS,
                 "backend of the kNN lists"},
};

static const KnnwbPortSpec knnwb_mst_knn_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points"},
    {"knn", KNNWB_KIND_GRAPH, TRUE,
     "optional: the directed kNN graph of these points (knn-graph with graph=directed, or "
     "load-knn), reused when it lists at least floor(ln n) neighbours per point"},
};

static gboolean knnwb_mst_knn_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  const KnnwbValue *knn = context->inputs[1];
  KnnwbValue *out = context->output;
  KnnwbMstKnnOptions options;
  knnwb_clustering_mstknn_options_init(&options);
  if (!knnwb_metric_from_string(context->params[METRIC].v_string, &options.metric, error) ||
      !knnwb_backend_from_string(context->params[BACKEND].v_string, &options.backend, error))
    return FALSE;
  options.list_k = (size_t)context->params[LIST_K].v_int;
  options.n_threads = context->n_threads;
  options.memory_bytes = context->memory_bytes;
  options.cancel = context->cancel;
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (knn) {
    size_t n = in->matrix->n_rows;
    if ((size_t)igraph_vcount(&knn->graph) != n) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "the knn graph has %" IGRAPH_PRId " vertices, the data %zu rows",
                  igraph_vcount(&knn->graph), n);
      return FALSE;
    }
    if (!knnwb_clustering_lists_from_graph(&knn->graph, &knn->weights, &lists, error)) {
      g_prefix_error(error, "input knn: ");
      return FALSE;
    }
    size_t needed = n > 1 ? MIN((size_t)MAX(1.0, floor(log((double)n))), n - 1) : 0;
    if (lists->k < needed)
      g_message("mst-knn: the knn input lists %zu neighbours, MST-kNN needs %zu for %zu points: "
                "computing new lists",
                lists->k, needed, n);
    else
      options.neighbors = lists;
  }
  /* The cluster forest becomes the value's own graph: write-graph draws it when given only the
   * clustering. */
  if (!knnwb_clustering_mstknn_points(in->matrix, &options, &out->membership, &out->graph,
                                      &out->weights, error))
    return FALSE;
  out->has_graph = TRUE;
  out->points = in;
  return TRUE;
}

const KnnwbStepType knnwb_step_mst_knn = {
    "mst-knn",
    "MST-kNN clustering of the points (clusters and their forest), on the exact MST",
    knnwb_mst_knn_inputs,
    G_N_ELEMENTS(knnwb_mst_knn_inputs),
    knnwb_mst_knn_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_mst_knn_run,
};
