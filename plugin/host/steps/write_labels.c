/* Step write-labels: the cluster table (label, cluster, cluster size). */
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "pipeline/value.h"
#include "steps/steps_internal.h"

enum { PATH, N_PARAMS };

static const KnnwbParamSpec knnwb_write_labels_params[N_PARAMS] = {
    [PATH] = {"path", KNNWB_PARAM_OUTPUT_FILE, NULL, 1, 0, NULL, "the TSV file to write"},
};

static const KnnwbPortSpec knnwb_write_labels_inputs[] = {
    {"clusters", KNNWB_KIND_CLUSTERING, FALSE, "the clustering"},
};

static gboolean knnwb_write_labels_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *clusters = context->inputs[0];
  return knnwb_formats_write_labels_tsv(context->params[PATH].v_string, &clusters->membership,
                                        knnwb_pipeline_value_labels(clusters), error);
}

const KnnwbStepType knnwb_step_write_labels = {
    "write-labels",
    "write the cluster table: label, cluster, cluster size",
    knnwb_write_labels_inputs,
    G_N_ELEMENTS(knnwb_write_labels_inputs),
    knnwb_write_labels_params,
    N_PARAMS,
    KNNWB_KIND_NONE,
    knnwb_write_labels_run,
    0,
    NULL,
};
