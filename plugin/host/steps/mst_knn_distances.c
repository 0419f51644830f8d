/* Step mst-knn-distances: MST-kNN of a precomputed distance matrix (a CSV/TSV/NPY file or a
 * matrix from another step), the way the R package mstknnclust does it. */
#include <knnwb/formats.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "steps/steps_internal.h"

enum { PATH, N_PARAMS };

static const KnnwbParamSpec knnwb_mst_knn_distances_params[N_PARAMS] = {
    [PATH] = {"path", KNNWB_PARAM_INPUT_FILE, "", 1, 0, NULL,
              "square distance matrix file: labelled CSV as R's write.csv writes it (e.g. "
              "share/data/dslanguages.csv), the same layout in TSV, or NPY (float64/float32); "
              "or connect the distances input instead"},
};

static const KnnwbPortSpec knnwb_mst_knn_distances_inputs[] = {
    {"distances", KNNWB_KIND_MATRIX, TRUE,
     "an n x n distance matrix from another step (load-matrix), instead of path"},
};

static gboolean knnwb_mst_knn_distances_run(KnnwbStepContext *context, GError **error)
{
  KnnwbValue *out = context->output;
  const KnnwbValue *in = context->inputs[0];
  const char *path = context->params[PATH].v_string;
  if ((in != NULL) == (path != NULL)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "give the distance matrix either as parameter path or as input distances (%s)",
                in ? "both are given" : "neither is given");
    return FALSE;
  }
  igraph_matrix_t distances;
  if (!knnwb_error_from_igraph(igraph_matrix_init(&distances, 0, 0), "igraph_matrix_init", error))
    return FALSE;
  char **labels = NULL;
  gboolean ok = TRUE;
  if (path)
    ok = knnwb_formats_read_distance_matrix(path, &distances, &labels, error);
  else {
    const KnnwbMatrix *matrix = in->matrix;
    if (matrix->n_rows != matrix->n_cols) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                  "the distances input is %zu x %zu, not square", matrix->n_rows, matrix->n_cols);
      ok = FALSE;
    }
    ok = ok &&
         knnwb_error_from_igraph(igraph_matrix_resize(&distances, (igraph_integer_t)matrix->n_rows,
                                                      (igraph_integer_t)matrix->n_cols),
                                 "igraph_matrix_resize", error);
    for (size_t i = 0; ok && i < matrix->n_rows; i++)
      for (size_t j = 0; j < matrix->n_cols; j++)
        MATRIX(distances, i, j) = matrix->values[i * matrix->n_cols + j];
  }
  if (ok) {
    KnnwbMstKnnOptions options;
    knnwb_clustering_mstknn_options_init(&options);
    options.cancel = context->cancel;
    ok = knnwb_clustering_mstknn_distance_matrix(&distances, &options, &out->membership,
                                                 &out->graph, &out->weights, error);
    out->has_graph = ok;
  }
  if (ok && in)
    out->points = in;
  else if (ok) {
    /* A matrix with no columns carries the labels for the writers. */
    size_t n = (size_t)igraph_matrix_nrow(&distances);
    out->matrix = knnwb_matrix_new(n, 0, error);
    ok = out->matrix != NULL;
    for (size_t i = 0; ok && labels && i < n; i++)
      knnwb_matrix_set_row_label(out->matrix, i, labels[i]);
  }
  g_strfreev(labels);
  igraph_matrix_destroy(&distances);
  return ok;
}

const KnnwbStepType knnwb_step_mst_knn_distances = {
    "mst-knn-distances",
    "MST-kNN clustering of a precomputed distance matrix, as the R package mstknnclust (row i "
    "lists tied neighbours in the order i+1, ..., n, 1, ..., i-1; an object left alone is a "
    "cluster of its own, where the package drops it)",
    knnwb_mst_knn_distances_inputs,
    G_N_ELEMENTS(knnwb_mst_knn_distances_inputs),
    knnwb_mst_knn_distances_params,
    N_PARAMS,
    KNNWB_KIND_CLUSTERING,
    knnwb_mst_knn_distances_run,
    0,
    NULL,
};
