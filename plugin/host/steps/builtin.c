/* The host's own steps, registered through the same descriptor as a plugin's.
 *
 * Why built in and not plugins: reading and writing files and the clustering algorithms are plain
 * libknnwb code with no optional dependency, and nearly every pipeline starts with load-matrix and
 * ends with a writer. Shipping them inside the host means a pipeline never fails because a plugin
 * directory is missing or stale, while the kNN step (the one with an optional CUDA backend, and the
 * entry point other igraph tools open) is a real plugin that exercises the plugin path. */
#include <knnwb/error.h>
#include <knnwb/version.h>
#include "steps/steps.h"
#include "steps/steps_internal.h"

static gboolean knnwb_builtin_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  const KnnwbStepType *types[] = {&knnwb_step_load_matrix,
                                  &knnwb_step_load_knn,
                                  &knnwb_step_write_graph,
                                  &knnwb_step_write_labels,
                                  &knnwb_step_spanning_forest,
                                  &knnwb_step_components,
                                  &knnwb_step_mst,
                                  &knnwb_step_mst_knn,
                                  &knnwb_step_mst_knn_distances,
                                  &knnwb_step_single_linkage,
                                  &knnwb_step_snn_graph,
                                  &knnwb_step_community,
                                  &knnwb_step_evaluate,
                                  &knnwb_step_metafeatures,
                                  &knnwb_step_append_phenotype};
  for (guint i = 0; i < G_N_ELEMENTS(types); i++)
    if (!registrar->add_step(registrar, types[i], error))
      return FALSE;
  return TRUE;
}

static const KnnwbPluginDescriptor knnwb_builtin = {
    KNNWB_PLUGIN_ABI_VERSION, "builtin", KNNWB_VERSION_STRING,
    "reading and writing files (formats) and clustering", knnwb_builtin_init};

const KnnwbPluginDescriptor *knnwb_host_builtin_descriptor(void)
{
  return &knnwb_builtin;
}
