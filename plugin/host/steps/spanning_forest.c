/* Step spanning-forest: the minimum spanning forest of a graph (Borůvka), as a graph. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps/steps_internal.h"

enum { BACKEND, N_PARAMS };

static const KnnwbParamSpec knnwb_spanning_forest_params[N_PARAMS] = {
    [BACKEND] = {"backend", KNNWB_PARAM_CHOICE, "auto", 1, 0,
                 KNNWB_ENUM_CHOICES(KNNWB_BACKEND_NAMES), "where Borůvka runs"},
};

static const KnnwbPortSpec knnwb_spanning_forest_inputs[] = {
    {"graph", KNNWB_KIND_GRAPH, FALSE, "the (kNN) graph, edges taken as undirected"},
};

static gboolean knnwb_spanning_forest_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  KnnwbForestOptions options;
  knnwb_clustering_forest_options_init(&options);
  options.n_threads = context->n_threads;
  if (!knnwb_backend_from_string(context->params[BACKEND].v_string, &options.backend, error))
    return FALSE;
  igraph_vector_int_t edges;
  if (!knnwb_error_from_igraph(igraph_vector_int_init(&edges, 0), "igraph_vector_int_init", error))
    return FALSE;
  gboolean ok = knnwb_clustering_spanning_forest(&in->graph, &in->weights, &options, &edges, NULL,
                                                 NULL, error) &&
                knnwb_clustering_forest_graph(&in->graph, &in->weights, &edges, &out->graph,
                                              &out->weights, error);
  igraph_vector_int_destroy(&edges);
  out->has_graph = ok;
  out->points = in->points;
  return ok;
}

const KnnwbStepType knnwb_step_spanning_forest = {
    "spanning-forest",
    "minimum spanning forest of a graph (Borůvka)",
    knnwb_spanning_forest_inputs,
    G_N_ELEMENTS(knnwb_spanning_forest_inputs),
    knnwb_spanning_forest_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_spanning_forest_run,
    0,
    NULL,
};
