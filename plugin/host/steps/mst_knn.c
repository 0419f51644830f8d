/* Step mst-knn: MST-kNN clustering of the points (Inostroza-Ponta et al.). */
#include <knnwb/atomic_file.h>
#include <knnwb/clustering.h>
#include <knnwb/formats.h>
#include <knnwb/community.h>
#include <knnwb/error.h>
#include <math.h>
#include "steps/steps_internal.h"

enum { METRIC, LIST_K, BACKEND, HIERARCHY, NEWICK, N_PARAMS };

static const KnnwbParamSpec knnwb_mst_knn_params[N_PARAMS] = {
    [METRIC] = {"metric", KNNWB_PARAM_CHOICE, "pearson", 1, 0,
                KNNWB_ENUM_CHOICES(KNNWB_METRIC_NAMES),
                "distance (must be the one of the knn input, when given)"},
    [LIST_K] = {"list-k", KNNWB_PARAM_INT, "0", 0, 1e9, NULL,
                "length of the global kNN lists (0: automatic; ignored with a knn input)"},
    [BACKEND] = {"backend", KNNWB_PARAM_CHOICE, "auto", 1, 0,
                 KNNWB_ENUM_CHOICES(KNNWB_BACKEND_NAMES), "backend of the kNN lists"},
    [HIERARCHY] = {"hierarchy", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
                   "the split hierarchy as TSV (node, parent, size, k, cluster)"},
    [NEWICK] = {"newick", KNNWB_PARAM_OUTPUT_FILE, "", 1, 0, NULL,
                "the split hierarchy as Newick, the points as leaves"},
};

static const KnnwbPortSpec knnwb_mst_knn_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points"},
    {"knn", KNNWB_KIND_GRAPH, TRUE,
     "the directed kNN graph of these points (knn-graph with graph=directed, or "
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
  /* Without usable lists from the knn input: the lists here, as long as the library would make
   * them (max(16, floor(ln n) + 1) unless list-k), with the step's tile progress (the library's
   * own pass showed none). */
  g_autoptr(KnnwbNeighbors) computed = NULL;
  const size_t n_points = in->matrix->n_rows;
  if (options.neighbors == NULL && n_points > 1) {
    if (!knnwb_step_self_lists(context, in->matrix, options.metric, options.backend,
                               knnwb_clustering_mstknn_lists_k(&options, n_points), &computed,
                               error))
      return FALSE;
    options.neighbors = computed;
  }
  const char *hierarchy_path = context->params[HIERARCHY].v_string;
  const char *newick_path = context->params[NEWICK].v_string;
  KnnwbMstKnnHierarchy hierarchy;
  gboolean want_hierarchy = hierarchy_path || newick_path;
  if (want_hierarchy) {
    if (!knnwb_mstknn_hierarchy_init(&hierarchy, error))
      return FALSE;
    options.hierarchy = &hierarchy;
  }
  /* The cluster forest becomes the value's own graph: write-graph draws it when given only the
   * clustering. */
  gboolean ok = knnwb_clustering_mstknn_points(in->matrix, &options, &out->membership, &out->graph,
                                               &out->weights, error);
  out->has_graph = ok;
  out->points = in;
  if (ok && hierarchy_path)
    ok = knnwb_formats_write_hierarchy_tsv(hierarchy_path, &hierarchy.parent, &hierarchy.size,
                                           &hierarchy.k, &hierarchy.cluster, error);
  if (ok && newick_path) {
    g_autofree char *text = knnwb_mstknn_hierarchy_newick(
        &hierarchy, &out->membership, (const char *const *)in->matrix->row_labels, error);
    g_autoptr(KnnwbAtomicFile) file = text ? knnwb_atomic_file_open(newick_path, error) : NULL;
    ok = file != NULL;
    if (ok) {
      fputs(text, knnwb_atomic_file_stream(file));
      ok = knnwb_atomic_file_commit(g_steal_pointer(&file), error);
    }
  }
  if (want_hierarchy)
    knnwb_mstknn_hierarchy_destroy(&hierarchy);
  return ok;
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
    0,
    NULL,
};
