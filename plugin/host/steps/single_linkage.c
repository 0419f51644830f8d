/* Step single-linkage: flat single-linkage clusters from a spanning tree or forest, and the
 * dendrogram as Newick and as a scipy linkage matrix. */
#include <knnwb/atomic_file.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "pipeline/value.h"
#include "steps/steps_internal.h"

enum { HEIGHT, CLUSTERS, NEWICK, LINKAGE, N_PARAMS };

static const KnnwbParamSpec knnwb_single_linkage_params[N_PARAMS] = {
    [HEIGHT] = {"height", KNNWB_PARAM_DOUBLE, "-1", -1, 1e300, NULL,
                "cut at this distance (-1: cut by cluster count instead)"},
    [CLUSTERS] = {"clusters", KNNWB_PARAM_INT, "0", 0, 1e12, NULL,
                  "number of clusters wanted (give height or clusters, not both)"},
    [NEWICK] = {"newick", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
                "the dendrogram as Newick (ape::read.tree, Bio.Phylo; one tree per "
                "component of a forest)"},
    [LINKAGE] = {"linkage", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
                 "the scipy linkage matrix, .npy or TSV (a forest lacks the merges at "
                 "infinite height)"},
};

static const KnnwbPortSpec knnwb_single_linkage_inputs[] = {
    {"tree", KNNWB_KIND_GRAPH, FALSE, "a minimum spanning tree or forest (mst, spanning-forest)"},
};

static gboolean knnwb_single_linkage_dendrogram(KnnwbStepContext *context, const KnnwbValue *in,
                                                GError **error)
{
  const char *newick = context->params[NEWICK].v_string;
  const char *linkage_path = context->params[LINKAGE].v_string;
  if (!newick && !linkage_path)
    return TRUE;
  igraph_matrix_t linkage;
  if (!knnwb_error_from_igraph(igraph_matrix_init(&linkage, 0, 0), "igraph_matrix_init", error))
    return FALSE;
  gboolean ok = knnwb_clustering_single_linkage(&in->graph, &in->weights, &linkage, error);
  if (ok && linkage_path)
    ok = knnwb_formats_write_linkage(linkage_path, &linkage, error);
  if (ok && newick) {
    g_autofree char *text = knnwb_clustering_newick(&linkage, igraph_vcount(&in->graph),
                                                    knnwb_pipeline_value_labels(in), error);
    g_autoptr(KnnwbAtomicFile) file = text ? knnwb_atomic_file_open(newick, error) : NULL;
    ok = file != NULL;
    if (ok) {
      fputs(text, knnwb_atomic_file_stream(file));
      ok = knnwb_atomic_file_commit(g_steal_pointer(&file), error);
    }
  }
  igraph_matrix_destroy(&linkage);
  return ok;
}

/* What the values alone tell (validation and run): a height is -1 (none) or a distance, and
 * height and clusters exclude each other. */
static gboolean knnwb_single_linkage_check(const KnnwbParamValue *params, GError **error)
{
  const double height = params[HEIGHT].v_double;
  const gint64 clusters = params[CLUSTERS].v_int;
  if (height < 0 && height != -1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "height %g: a cut height is a distance, 0 or more (-1: cut by clusters)", height);
    return FALSE;
  }
  if (height >= 0 && clusters > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "give height or clusters, not both (height %g, clusters %" G_GINT64_FORMAT ")",
                height, clusters);
    return FALSE;
  }
  return TRUE;
}

static gboolean knnwb_single_linkage_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  KnnwbValue *out = context->output;
  out->source_graph = in;
  out->points = in->points;
  double height = context->params[HEIGHT].v_double;
  gint64 clusters = context->params[CLUSTERS].v_int;
  if (!knnwb_single_linkage_check(context->params, error))
    return FALSE;
  if (height < 0 && clusters < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "give either height (>= 0) or clusters (>= 1)");
    return FALSE;
  }
  if (!knnwb_single_linkage_dendrogram(context, in, error))
    return FALSE;
  if (height >= 0)
    return knnwb_clustering_cut_distance(&in->graph, &in->weights, height, &out->membership,
                                         &out->n_clusters, error);
  /* A forest of c components allows c .. n clusters: say what was returned instead and why. */
  igraph_integer_t n = igraph_vcount(&in->graph);
  igraph_integer_t wanted = (igraph_integer_t)MIN(clusters, (gint64)MAX(n, 1));
  if (!knnwb_clustering_cut_count(&in->graph, &in->weights, wanted, &out->membership,
                                  &out->n_clusters, error))
    return FALSE;
  if (out->n_clusters != clusters)
    g_warning("%s: asked for %" G_GINT64_FORMAT " cluster%s, returned %" IGRAPH_PRId ": %s",
              context->step_id, clusters, KNNWB_PLURAL(clusters), out->n_clusters,
              out->n_clusters > clusters
                  ? "the tree is a forest whose components are never joined (no edge between "
                    "them), so fewer clusters are impossible"
                  : "there are only that many points, each its own cluster");
  return TRUE;
}

const KnnwbStepType knnwb_step_single_linkage = {
    "single-linkage",
    "flat single-linkage clusters cut from a spanning tree; its dendrogram as Newick and a scipy "
    "linkage matrix",
    knnwb_single_linkage_inputs,
    G_N_ELEMENTS(knnwb_single_linkage_inputs),
    knnwb_single_linkage_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_single_linkage_run,
    0,
    knnwb_single_linkage_check,
};
