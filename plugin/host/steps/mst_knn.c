/* Step mst-knn: MST-kNN clustering of the points (Inostroza-Ponta et al.). */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps.h"

enum { METRIC, TREE, FOREST_K, LIST_K, BACKEND, N_PARAMS };

static const KnnwbParamSpec knnwb_mst_knn_params[N_PARAMS] = {
    [METRIC] = {"metric", KNNWB_PARAM_CHOICE, "pearson", 1, 0, KNNWB_STEP_METRICS, "distance"},
    [TREE] = {"tree", KNNWB_PARAM_CHOICE, "exact", 1, 0, "exact|knn-forest",
              "exact: the published algorithm; knn-forest: faster approximation"},
    [FOREST_K] = {"forest-k", KNNWB_PARAM_INT, "0", 0, 1e9, NULL,
                  "k of the knn-forest tree (0: floor(ln n))"},
    [LIST_K] = {"list-k", KNNWB_PARAM_INT, "0", 0, 1e9, NULL,
                "length of the global kNN lists (0: automatic)"},
    [BACKEND] = {"backend", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_STEP_BACKENDS,
                 "backend of the kNN lists"},
};

static const KnnwbPortSpec knnwb_mst_knn_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points"},
};

static gboolean knnwb_mst_knn_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  KnnwbMstKnnOptions options;
  knnwb_clustering_mstknn_options_init(&options);
  if (!knnwb_metric_from_string(context->params[METRIC].v_string, &options.metric, error) ||
      !knnwb_backend_from_string(context->params[BACKEND].v_string, &options.backend, error))
    return FALSE;
  options.tree = g_str_equal(context->params[TREE].v_string, "knn-forest")
                     ? KNNWB_MSTKNN_TREE_KNN_FOREST
                     : KNNWB_MSTKNN_TREE_EXACT;
  options.forest_k = (size_t)context->params[FOREST_K].v_int;
  options.list_k = (size_t)context->params[LIST_K].v_int;
  options.n_threads = context->n_threads;
  options.memory_bytes = context->memory_bytes;
  options.cancel = context->cancel;
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
    "MST-kNN clustering of the points (clusters and their forest)",
    knnwb_mst_knn_inputs,
    G_N_ELEMENTS(knnwb_mst_knn_inputs),
    knnwb_mst_knn_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_mst_knn_run,
};
