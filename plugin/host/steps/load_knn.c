/* Step load-knn: a .knn file (the GPU-FS-kNN output format) into a graph value. */
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "steps/steps_internal.h"

enum { PATH, DIRECTED, N_PARAMS };

static const KnnwbParamSpec knnwb_load_knn_params[N_PARAMS] = {
    [PATH] = {"path", KNNWB_PARAM_INPUT_FILE, NULL, 1, 0, NULL, "the .knn file"},
    [DIRECTED] = {"directed", KNNWB_PARAM_BOOLEAN, "true", 1, 0, NULL,
                  "edges are source -> target (the file does not say)"},
};

static const KnnwbPortSpec knnwb_load_knn_inputs[] = {
    {"points", KNNWB_KIND_MATRIX, TRUE, "the matrix whose rows the vertices are (for labels)"},
};

static gboolean knnwb_load_knn_run(KnnwbStepContext *context, GError **error)
{
  KnnwbValue *out = context->output;
  if (!knnwb_formats_read_knn(context->params[PATH].v_string, context->params[DIRECTED].v_int != 0,
                              &out->graph, &out->weights, error))
    return FALSE;
  out->has_graph = TRUE;
  const KnnwbValue *points = context->inputs[0];
  if (points != NULL) {
    if ((size_t)igraph_vcount(&out->graph) != points->matrix->n_rows) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "%s has %" IGRAPH_PRId " vert%s but the points matrix has %zu row%s",
                  context->params[PATH].v_string, igraph_vcount(&out->graph),
                  igraph_vcount(&out->graph) == 1 ? "ex" : "ices", points->matrix->n_rows,
                  KNNWB_PLURAL(points->matrix->n_rows));
      return FALSE;
    }
    out->points = points;
  }
  return TRUE;
}

const KnnwbStepType knnwb_step_load_knn = {
    "load-knn",
    "read a .knn graph file",
    knnwb_load_knn_inputs,
    G_N_ELEMENTS(knnwb_load_knn_inputs),
    knnwb_load_knn_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_load_knn_run,
    0,
    NULL,
};
