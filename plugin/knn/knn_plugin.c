/* The kNN plugin: registers the knn-graph and knn-query steps with the knnwb host. */
#include <knnwb/device_list.h>
#include <knnwb/error.h>
#include <knnwb/version.h>
#include "knn_plugin_internal.h"

static gboolean knnwb_knn_plugin_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  return registrar->add_step(registrar, &knnwb_knn_step_graph, error) &&
         registrar->add_step(registrar, &knnwb_knn_step_query, error) &&
         registrar->add_step(registrar, &knnwb_knn_step_neighbourhood, error) &&
         registrar->add_step(registrar, &knnwb_knn_step_classify, error);
}

KNNWB_PLUGIN_DEFINE("knn", KNNWB_VERSION_STRING,
                    "exact kNN graphs (CPU, and CUDA when libknnwb is built with it)",
                    knnwb_knn_plugin_init);

gboolean knnwb_knn_plugin_options(const KnnwbStepContext *context, KnnwbKnnOptions *options,
                                  GArray *devices, GError **error)
{
  const KnnwbParamValue *p = context->params;
  knnwb_knn_options_init(options);
  options->group = context->group; /* NULL unless the ranks run this step together */
  options->k = (size_t)p[KNNWB_KNN_PARAM_K].v_int;
  if (!knnwb_metric_from_string(p[KNNWB_KNN_PARAM_METRIC].v_string, &options->metric, error) ||
      !knnwb_backend_from_string(p[KNNWB_KNN_PARAM_BACKEND].v_string, &options->backend, error) ||
      !knnwb_screen_from_string(p[KNNWB_KNN_PARAM_SCREEN].v_string, &options->screen, error))
    return FALSE;
  options->n_threads = p[KNNWB_KNN_PARAM_THREADS].v_int > 0 ? (int)p[KNNWB_KNN_PARAM_THREADS].v_int
                                                            : context->n_threads;
  options->memory_bytes = p[KNNWB_KNN_PARAM_MEMORY].v_int > 0
                              ? (size_t)p[KNNWB_KNN_PARAM_MEMORY].v_int
                              : context->memory_bytes;
  options->gpu_memory_bytes = (size_t)p[KNNWB_KNN_PARAM_GPU_MEMORY].v_int;
  options->drop_degenerate = p[KNNWB_KNN_PARAM_DROP_DEGENERATE].v_int != 0;
  options->data_name = context->step_id; /* warnings name the step, not "data" */
  if (!knnwb_device_list_parse(p[KNNWB_KNN_PARAM_DEVICES].v_string, "devices", devices, error))
    return FALSE;
  knnwb_device_list_warn_repeated(devices, "devices");
  if (devices->len > 0) {
    options->devices = (const int *)(void *)devices->data;
    options->n_devices = (int)devices->len;
  }
  options->progress = context->progress;
  options->progress_data = context->progress_data;
  options->cancel = context->cancel;
  return TRUE;
}

gboolean knnwb_knn_plugin_check(const KnnwbParamValue *params, GError **error)
{
  g_autoptr(GArray) devices = g_array_new(FALSE, FALSE, sizeof(int));
  return knnwb_device_list_parse(params[KNNWB_KNN_PARAM_DEVICES].v_string, "devices", devices,
                                 error);
}
