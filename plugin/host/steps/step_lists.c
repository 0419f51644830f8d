/* The kNN lists a clustering step computes itself when no usable lists came in (mst, mst-knn). */
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include "steps/steps_internal.h"

gboolean knnwb_step_self_lists(KnnwbStepContext *context, const KnnwbMatrix *points,
                               KnnwbMetric metric, KnnwbBackend backend, size_t k,
                               KnnwbNeighbors **lists, GError **error)
{
  /* The exact MST joins every row: a row dropped by the reader (missing values with
   * missing="drop-rows") has no distances, and the search would fail on it after minutes. */
  if (points->n_absent_rows > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s builds the exact minimum spanning tree over every row, and %zu of the %zu "
                "rows were dropped (missing values, missing=\"drop-rows\"); remove those rows "
                "from the input instead",
                context->type->name, points->n_absent_rows, points->n_rows);
    return FALSE;
  }
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = backend;
  options.n_threads = context->n_threads;
  options.memory_bytes = context->memory_bytes;
  options.cancel = context->cancel;
  options.progress = context->progress;
  options.progress_data = context->progress_data;
  return knnwb_knn_self(points, &options, lists, error);
}
