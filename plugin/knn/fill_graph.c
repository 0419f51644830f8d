/* The plugin's entry point for other igraph tools (see knnwb/knn_plugin.h). */
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/graph.h>
#include <knnwb/knn_plugin.h>
#include "knn_plugin_internal.h"

/* The caller keeps its values: a destroy function that does nothing makes that explicit. */
static void knnwb_knn_plugin_keep_values(void *values, size_t n_bytes, void *data)
{
  (void)values;
  (void)n_bytes;
  (void)data;
}

static int knnwb_knn_plugin_fail(GError *error, char **error_message)
{
  int code = IGRAPH_FAILURE;
  if (error->domain == KNNWB_ERROR) {
    if (error->code == KNNWB_ERROR_INVALID_ARGUMENT || error->code == KNNWB_ERROR_INVALID_DATA)
      code = IGRAPH_EINVAL;
    else if (error->code == KNNWB_ERROR_NO_MEMORY)
      code = IGRAPH_ENOMEM;
  }
  if (error_message != NULL)
    *error_message = strdup(error->message); /* free()able by callers that do not use GLib */
  g_error_free(error);
  return code;
}

G_MODULE_EXPORT int knnwb_knn_plugin_fill_graph(int entry_version, const float *values,
                                                int64_t n_rows, int64_t n_cols, const char *metric,
                                                int64_t k, const char *mode, int n_threads,
                                                igraph_t *graph, igraph_vector_t *weights,
                                                char **error_message);

G_MODULE_EXPORT int knnwb_knn_plugin_fill_graph(int entry_version, const float *values,
                                                int64_t n_rows, int64_t n_cols, const char *metric,
                                                int64_t k, const char *mode, int n_threads,
                                                igraph_t *graph, igraph_vector_t *weights,
                                                char **error_message)
{
  GError *error = NULL;
  if (error_message != NULL)
    *error_message = NULL;
  if (entry_version != KNNWB_KNN_PLUGIN_ENTRY_VERSION) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "entry point version %d requested, this plugin has version %d", entry_version,
                KNNWB_KNN_PLUGIN_ENTRY_VERSION);
    return knnwb_knn_plugin_fail(error, error_message);
  }
  if (n_rows < 0 || n_cols < 0 || k < 1 || (values == NULL && n_rows > 0 && n_cols > 0) ||
      graph == NULL || weights == NULL) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "invalid arguments (n_rows %" G_GINT64_FORMAT ", n_cols %" G_GINT64_FORMAT
                ", k %" G_GINT64_FORMAT ")",
                (gint64)n_rows, (gint64)n_cols, (gint64)k);
    return knnwb_knn_plugin_fail(error, error_message);
  }
  size_t cells;
  if (!knnwb_size_multiply((size_t)n_rows, (size_t)n_cols, &cells) ||
      !knnwb_size_multiply(cells, sizeof(float), &cells)) {
    g_set_error(&error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "a %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT " matrix does not fit in memory",
                (gint64)n_rows, (gint64)n_cols);
    return knnwb_knn_plugin_fail(error, error_message);
  }
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  KnnwbGraphMode graph_mode = KNNWB_GRAPH_DIRECTED;
  if ((metric != NULL && !knnwb_metric_from_string(metric, &options.metric, &error)) ||
      (mode != NULL && !knnwb_graph_mode_from_string(mode, &graph_mode, &error)))
    return knnwb_knn_plugin_fail(error, error_message);
  options.k = (size_t)k;
  options.n_threads = n_threads;
  /* The caller's values are only read: wrap them without copying or taking ownership. */
  KnnwbMatrix *data = knnwb_matrix_new_wrapped((size_t)n_rows, (size_t)n_cols, (float *)values,
                                               knnwb_knn_plugin_keep_values, NULL);
  gboolean ok = knnwb_knn_graph(data, &options, graph_mode, graph, weights, &error);
  knnwb_matrix_free(data);
  if (!ok)
    return knnwb_knn_plugin_fail(error, error_message);
  return IGRAPH_SUCCESS;
}
