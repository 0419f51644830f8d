/* Step community: Leiden, Louvain or walktrap (igraph) on a graph whose distances become
 * similarity weights. */
#include <knnwb/community.h>
#include <knnwb/error.h>
#include "steps/steps_internal.h"

enum { METHOD, RESOLUTION, OBJECTIVE, SEED, STEPS, SIMILARITY, N_PARAMS };

static const KnnwbParamSpec knnwb_community_params[N_PARAMS] = {
    [METHOD] = {"method", KNNWB_PARAM_CHOICE, "leiden", 1, 0,
                KNNWB_ENUM_CHOICES(KNNWB_COMMUNITY_METHOD_NAMES),
                "igraph_community_leiden, _multilevel or _walktrap"},
    [RESOLUTION] = {"resolution", KNNWB_PARAM_DOUBLE, "1", 1e-300, 1e300, NULL,
                    "Leiden/Louvain resolution (modularity: 1 = Newman's)"},
    [OBJECTIVE] = {"objective", KNNWB_PARAM_CHOICE, "modularity", 1, 0,
                   KNNWB_ENUM_CHOICES(KNNWB_COMMUNITY_OBJECTIVE_NAMES),
                   "Leiden's quality function"},
    [SEED] = {"seed", KNNWB_PARAM_INT, "42", 0, 4294967295.0, NULL, "igraph's RNG seed"},
    [STEPS] = {"steps", KNNWB_PARAM_INT, "4", 1, KNNWB_COMMUNITY_MAX_STEPS, NULL,
               "walktrap's walk length"},
    [SIMILARITY] = {"similarity", KNNWB_PARAM_CHOICE, "inverse", 1, 0,
                    KNNWB_ENUM_CHOICES(KNNWB_SIMILARITY_NAMES),
                    "distance to weight: 1/(1+d), exp(-d/mean d) or 1"},
};

static const KnnwbPortSpec knnwb_community_inputs[] = {
    {"graph", KNNWB_KIND_GRAPH, FALSE,
     "a kNN graph (union or directed; directed edges are merged) or an SNN graph"},
};

static gboolean knnwb_community_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  KnnwbCommunityOptions options;
  knnwb_community_options_init(&options);
  KnnwbSimilarity similarity;
  if (!knnwb_community_method_from_string(context->params[METHOD].v_string, &options.method,
                                          error) ||
      !knnwb_community_objective_from_string(context->params[OBJECTIVE].v_string,
                                             &options.objective, error) ||
      !knnwb_similarity_from_string(context->params[SIMILARITY].v_string, &similarity, error))
    return FALSE;
  options.resolution = context->params[RESOLUTION].v_double;
  options.seed = (guint64)context->params[SEED].v_int;
  options.steps = context->params[STEPS].v_int;
  igraph_vector_t weights;
  if (!knnwb_error_from_igraph(igraph_vector_init(&weights, 0), "igraph_vector_init", error))
    return FALSE;
  double modularity = 0;
  gboolean ok = knnwb_clustering_similarity(&in->weights, similarity, &weights, error) &&
                knnwb_clustering_community(&in->graph, &weights, &options, &out->membership,
                                           &modularity, error);
  igraph_vector_destroy(&weights);
  if (!ok)
    return FALSE;
  g_message("%s: %s, modularity %.4f", context->step_id, context->params[METHOD].v_string,
            modularity);
  out->source_graph = in;
  out->points = in->points;
  return TRUE;
}

const KnnwbStepType knnwb_step_community = {
    "community",
    "community detection through igraph: Leiden, Louvain or walktrap on similarity weights",
    knnwb_community_inputs,
    G_N_ELEMENTS(knnwb_community_inputs),
    knnwb_community_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_community_run,
    0,
    NULL,
};
