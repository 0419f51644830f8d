/* Step mst: the exact minimum spanning tree of the complete graph of the points. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps/steps_internal.h"

enum { METRIC, K, BACKEND, N_PARAMS };

static const KnnwbParamSpec knnwb_mst_params[N_PARAMS] = {
    [METRIC] = {"metric", KNNWB_PARAM_CHOICE, "pearson", 1, 0,
                KNNWB_ENUM_CHOICES(KNNWB_METRIC_NAMES), "distance"},
    [K] = {"k", KNNWB_PARAM_INT, "0", 0, 1e9, NULL,
           "length of the kNN lists that answer most queries (0: automatic)"},
    [BACKEND] = {"backend", KNNWB_PARAM_CHOICE, "auto", 1, 0,
                 KNNWB_ENUM_CHOICES(KNNWB_BACKEND_NAMES), "backend of the kNN lists"},
};

static const KnnwbPortSpec knnwb_mst_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points"},
};

static gboolean knnwb_mst_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  KnnwbMstOptions options;
  knnwb_clustering_mst_options_init(&options);
  if (!knnwb_metric_from_string(context->params[METRIC].v_string, &options.metric, error) ||
      !knnwb_backend_from_string(context->params[BACKEND].v_string, &options.backend, error))
    return FALSE;
  options.k = (size_t)context->params[K].v_int;
  options.n_threads = context->n_threads;
  options.memory_bytes = context->memory_bytes;
  options.cancel = context->cancel;
  /* The lists here, as the library would make them (k = 16 unless given), with the step's tile
   * progress: the library's own pass showed none (the longest phase of the step). */
  g_autoptr(KnnwbNeighbors) lists = NULL;
  const size_t n = in->matrix->n_rows;
  if (n > 1) {
    if (!knnwb_step_self_lists(context, in->matrix, options.metric, options.backend,
                               knnwb_clustering_mst_lists_k(&options, n), &lists, error))
      return FALSE;
    options.neighbors = lists;
  }
  if (!knnwb_clustering_mst_points(in->matrix, &options, &out->graph, &out->weights, error))
    return FALSE;
  out->has_graph = TRUE;
  out->points = in;
  return TRUE;
}

const KnnwbStepType knnwb_step_mst = {
    "mst",
    "exact minimum spanning tree of the complete graph of the points",
    knnwb_mst_inputs,
    G_N_ELEMENTS(knnwb_mst_inputs),
    knnwb_mst_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_mst_run,
    0,
    NULL,
};
