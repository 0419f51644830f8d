/* Step mst-knn-distances: MST-kNN of a precomputed distance matrix (R's write.csv layout), the
 * way the R package mstknnclust does it. */
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps.h"

enum { PATH, N_PARAMS };

static const KnnwbParamSpec knnwb_mst_knn_distances_params[N_PARAMS] = {
    [PATH] = {"path", KNNWB_PARAM_INPUT_FILE, NULL, 1, 0, NULL,
              "labelled square distance matrix in CSV (e.g. share/data/dslanguages.csv)"},
};

static gboolean knnwb_mst_knn_distances_run(KnnwbStepContext *context, GError **error)
{
  KnnwbValue *out = context->output;
  igraph_matrix_t distances;
  igraph_matrix_init(&distances, 0, 0);
  char **labels = NULL;
  gboolean ok = knnwb_clustering_read_distance_csv(context->params[PATH].v_string, &distances,
                                                   &labels, error);
  if (ok) {
    KnnwbMstKnnOptions options;
    knnwb_clustering_mstknn_options_init(&options);
    options.cancel = context->cancel;
    ok = knnwb_clustering_mstknn_distance_matrix(&distances, &options, &out->membership,
                                                 &out->graph, &out->weights, error);
    out->has_graph = ok;
  }
  if (ok) {
    /* A matrix with no columns carries the labels for the writers. */
    size_t n = (size_t)igraph_matrix_nrow(&distances);
    out->matrix = knnwb_matrix_new(n, 0, error);
    ok = out->matrix != NULL;
    for (size_t i = 0; ok && i < n; i++)
      knnwb_matrix_set_row_label(out->matrix, i, labels[i]);
  }
  g_strfreev(labels);
  igraph_matrix_destroy(&distances);
  return ok;
}

const KnnwbStepType knnwb_step_mst_knn_distances = {
    "mst-knn-distances",
    "MST-kNN clustering of a precomputed distance matrix file",
    NULL,
    0,
    knnwb_mst_knn_distances_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_mst_knn_distances_run,
};
