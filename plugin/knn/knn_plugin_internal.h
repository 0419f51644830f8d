/* Private to plugin/knn/: the kNN plugin's step types and the parameters they share. */
#ifndef KNNWB_KNN_PLUGIN_INTERNAL_H
#define KNNWB_KNN_PLUGIN_INTERNAL_H

#include <knnwb/knn.h>
#include <knnwb/plugin.h>

extern const KnnwbStepType knnwb_knn_step_graph;
extern const KnnwbStepType knnwb_knn_step_query;
extern const KnnwbStepType knnwb_knn_step_neighbourhood;
extern const KnnwbStepType knnwb_knn_step_classify;

/* The parameters both steps share, first in both parameter tables in this order. */
enum {
  KNNWB_KNN_PARAM_K,
  KNNWB_KNN_PARAM_METRIC,
  KNNWB_KNN_PARAM_BACKEND,
  KNNWB_KNN_PARAM_THREADS,
  KNNWB_KNN_PARAM_MEMORY,
  KNNWB_KNN_PARAM_GPU_MEMORY,
  KNNWB_KNN_PARAM_DEVICES,
  KNNWB_KNN_PARAM_DROP_DEGENERATE,
  KNNWB_KNN_PARAM_SCREEN,
  KNNWB_KNN_N_COMMON_PARAMS
};

/* The common parameter specs, to open both steps' tables (C has no array concatenation). */
/* clang-format off */
#define KNNWB_KNN_COMMON_PARAMS                                                                   \
  {"k", KNNWB_PARAM_INT, NULL, 1, 1e12, NULL, "neighbours per point"},                            \
  {"metric", KNNWB_PARAM_CHOICE, "pearson", 1, 0,                                                 \
   KNNWB_ENUM_CHOICES(KNNWB_METRIC_NAMES), "distance"},                        \
  {"backend", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_ENUM_CHOICES(KNNWB_BACKEND_NAMES), "where tiles are computed"},     \
  {"threads", KNNWB_PARAM_INT, "0", 0, 4096, NULL, "CPU threads (0: the host's setting)"},        \
  {"memory", KNNWB_PARAM_BYTES, "0", 1, 0, NULL, "CPU tile budget (0: the host's setting)"},      \
  {"gpu-memory", KNNWB_PARAM_BYTES, "0", 1, 0, NULL, "per-GPU budget (0: 90% of free)"},          \
  {"devices", KNNWB_PARAM_STRING, "", 1, 0, NULL, "GPUs, e.g. 0,1 (empty: all)"},                 \
  {"drop-degenerate", KNNWB_PARAM_BOOLEAN, "false", 1, 0, NULL,                                   \
   "constant/zero rows get no edges (warning) instead of an error"},                               \
  {"screen", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_ENUM_CHOICES(KNNWB_SCREEN_NAMES),                        \
   "screening precision (the lists are exact with each)"}
/* clang-format on */

/**
 * Fills options from the common parameters and the host's settings; devices receives the GPU list
 * (options->devices points into it). Errors: KNNWB_ERROR_INVALID_ARGUMENT.
 */
gboolean knnwb_knn_plugin_options(const KnnwbStepContext *context, KnnwbKnnOptions *options,
                                  GArray *devices, GError **error);

/**
 * The common parameters' check without data (KnnwbStepType.check of the kNN steps): the device
 * list, parsed as knnwb_knn_plugin_options parses it. Errors: KNNWB_ERROR_INVALID_ARGUMENT.
 */
gboolean knnwb_knn_plugin_check(const KnnwbParamValue *params, GError **error);

#endif
