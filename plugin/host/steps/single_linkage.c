/* Step single-linkage: flat single-linkage clusters from a spanning tree or forest. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps.h"

enum { HEIGHT, CLUSTERS, N_PARAMS };

static const KnnwbParamSpec knnwb_single_linkage_params[N_PARAMS] = {
    [HEIGHT] = {"height", KNNWB_PARAM_DOUBLE, "-1", -1, 1e300, NULL,
                "cut at this distance (-1: cut by cluster count instead)"},
    [CLUSTERS] = {"clusters", KNNWB_PARAM_INT, "0", 0, 1e12, NULL,
                  "number of clusters wanted (used when height is -1)"},
};

static const KnnwbPortSpec knnwb_single_linkage_inputs[] = {
    {"tree", KNNWB_KIND_GRAPH, FALSE, "a minimum spanning tree or forest (mst, spanning-forest)"},
};

static gboolean knnwb_single_linkage_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  out->source_graph = in;
  out->points = in->points;
  double height = context->params[HEIGHT].v_double;
  gint64 clusters = context->params[CLUSTERS].v_int;
  if (height >= 0)
    return knnwb_clustering_cut_distance(&in->graph, &in->weights, height, &out->membership,
                                         &out->n_clusters, error);
  if (clusters < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "give either height (>= 0) or clusters (>= 1)");
    return FALSE;
  }
  return knnwb_clustering_cut_count(&in->graph, &in->weights, (igraph_integer_t)clusters,
                                    &out->membership, &out->n_clusters, error);
}

const KnnwbStepType knnwb_step_single_linkage = {
    "single-linkage",
    "flat single-linkage clusters cut from a spanning tree",
    knnwb_single_linkage_inputs,
    G_N_ELEMENTS(knnwb_single_linkage_inputs),
    knnwb_single_linkage_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_single_linkage_run,
};
