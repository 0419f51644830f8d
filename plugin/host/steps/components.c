/* Step components: connected components of a graph as a clustering. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps/steps_internal.h"

static const KnnwbPortSpec knnwb_components_inputs[] = {
    {"graph", KNNWB_KIND_GRAPH, FALSE, "edges taken as undirected"},
};

static gboolean knnwb_components_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  out->source_graph = in;
  out->points = in->points;
  return knnwb_clustering_components(&in->graph, &out->membership, NULL, &out->n_clusters, error);
}

const KnnwbStepType knnwb_step_components = {
    "components",
    "connected components of a graph (with k = 1: the 1-NN clusters)",
    knnwb_components_inputs,
    G_N_ELEMENTS(knnwb_components_inputs),
    NULL,
    0,
    KNNWB_KIND_CLUSTERING,
    knnwb_components_run,
    0,
    NULL,
};
