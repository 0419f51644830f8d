/* Step snn-graph: the shared-nearest-neighbour graph of a directed kNN graph (R bluster's
 * makeSNNGraph weights). */
#include <knnwb/community.h>
#include <knnwb/error.h>
#include "steps/steps_internal.h"

enum { WEIGHTING, N_PARAMS };

static const KnnwbParamSpec knnwb_snn_graph_params[N_PARAMS] = {
    [WEIGHTING] = {"weighting", KNNWB_PARAM_CHOICE, "rank", 1, 0,
                   KNNWB_ENUM_CHOICES(KNNWB_SNN_WEIGHTING_NAMES),
                   "edge weights as bluster's makeSNNGraph type"},
};

static const KnnwbPortSpec knnwb_snn_graph_inputs[] = {
    {"knn", KNNWB_KIND_GRAPH, FALSE,
     "the directed kNN graph (knn-graph with graph=directed, or load-knn)"},
};

static gboolean knnwb_snn_graph_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  KnnwbSnnWeighting weighting;
  if (!knnwb_snn_weighting_from_string(context->params[WEIGHTING].v_string, &weighting, error))
    return FALSE;
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (!knnwb_clustering_lists_from_graph(&in->graph, &in->weights, &lists, error))
    return FALSE;
  igraph_vector_t similarities;
  if (!knnwb_error_from_igraph(igraph_vector_init(&similarities, 0), "igraph_vector_init", error))
    return FALSE;
  gboolean ok = knnwb_clustering_snn_graph(lists, weighting, context->n_threads, &out->graph,
                                           &similarities, error);
  if (ok) {
    out->has_graph = TRUE;
    /* Graph values carry distances >= 0: scale / w - 1, which the default similarity 1/(1+d) of
     * the community step and of the GML/GraphML `weight` turns back into w / scale (a uniform
     * scale: modularity and Leiden/Louvain with the modularity objective do not change). */
    double scale = knnwb_snn_weight_scale(weighting, lists->k);
    igraph_integer_t m = igraph_vector_size(&similarities);
    ok = knnwb_error_from_igraph(igraph_vector_resize(&out->weights, m), "resize", error);
    for (igraph_integer_t e = 0; ok && e < m; e++)
      VECTOR(out->weights)[e] = scale / VECTOR(similarities)[e] - 1.0;
    out->points = in->points;
  }
  igraph_vector_destroy(&similarities);
  return ok;
}

const KnnwbStepType knnwb_step_snn_graph = {
    "snn-graph",
    "shared-nearest-neighbour graph of a directed kNN graph (R bluster's rank/number/jaccard "
    "weights; edge distance scale/w - 1, scale k, k + 1 or 1)",
    knnwb_snn_graph_inputs,
    G_N_ELEMENTS(knnwb_snn_graph_inputs),
    knnwb_snn_graph_params,
    N_PARAMS,
    KNNWB_KIND_GRAPH,
    knnwb_snn_graph_run,
    0,
    NULL,
};
