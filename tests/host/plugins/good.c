/* A test plugin that registers one step: "test-scale" multiplies a matrix by a factor. */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/plugin.h>

static const KnnwbParamSpec test_scale_params[] = {
    {"factor", KNNWB_PARAM_DOUBLE, "2", -1e6, 1e6, NULL, "multiplier"},
};
static const KnnwbPortSpec test_scale_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the points"},
};

static gboolean test_scale_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbMatrix *in = context->inputs[0]->matrix;
  KnnwbMatrix *out = knnwb_matrix_new(in->n_rows, in->n_cols, error);
  if (out == NULL)
    return FALSE;
  for (size_t i = 0; i < in->n_rows * in->n_cols; i++)
    out->values[i] = in->values[i] * (float)context->params[0].v_double;
  for (size_t i = 0; i < in->n_rows; i++)
    if (knnwb_matrix_row_label(in, i) != NULL)
      knnwb_matrix_set_row_label(out, i, knnwb_matrix_row_label(in, i));
  context->output->matrix = out;
  return TRUE;
}

static const KnnwbStepType test_scale = {"test-scale",
                                         "multiply a matrix by a factor",
                                         test_scale_inputs,
                                         1,
                                         test_scale_params,
                                         1,
                                         KNNWB_KIND_MATRIX,
                                         test_scale_run,
                                         0,
                                         NULL};

static gboolean test_init(KnnwbPluginRegistrar *registrar, GError **error)
{
  return registrar->add_step(registrar, &test_scale, error);
}

KNNWB_PLUGIN_DEFINE("test-good", "1.0", "a test plugin", test_init);
