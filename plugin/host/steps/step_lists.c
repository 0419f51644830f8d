/* The kNN lists a clustering step computes itself when no usable lists came in (mst, mst-knn). */
#include <knnwb/knn.h>
#include "steps/steps_internal.h"

gboolean knnwb_step_self_lists(KnnwbStepContext *context, const KnnwbMatrix *points,
                               KnnwbMetric metric, KnnwbBackend backend, size_t k,
                               KnnwbNeighbors **lists, GError **error)
{
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
