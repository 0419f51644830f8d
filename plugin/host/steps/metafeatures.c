/* Step metafeatures: one row per unordered pair of rows (a-b, a+b, a*b, a/b), handed on in memory.
 */
#include <knnwb/error.h>
#include <knnwb/metafeatures.h>
#include "steps/steps_internal.h"
#include "runtime/split_input.h"

enum { OPS, ROWS, MISSING, N_PARAMS };

static const KnnwbParamSpec knnwb_metafeatures_params[N_PARAMS] = {
    [OPS] = {"ops", KNNWB_PARAM_STRING, "difference", 1, 0, NULL,
             "operators in order, comma-separated, each once (all: every one not given before) "
             "of:" KNNWB_ENUM_SPACED(KNNWB_METAFEATURE_NAMES)},
    [ROWS] = {"rows", KNNWB_PARAM_INPUT_FILE, "", 1, 0, NULL,
              "pair only the rows named in this file (one label per line); default all rows"},
    [MISSING] = {"missing", KNNWB_PARAM_CHOICE, "error", 1, 0,
                 KNNWB_ENUM_CHOICES(KNNWB_MISSING_NAMES),
                 "a zero/subnormal denominator or an overflow: an error, or the pair dropped"},
};

static const KnnwbPortSpec knnwb_metafeatures_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the rows to pair"},
};

/* The operator list, as the run parses it (validation finds a typo before any step runs). */
static gboolean knnwb_metafeatures_step_check(const KnnwbParamValue *params, GError **error)
{
  KnnwbMetafeatureOp ops[KNNWB_METAFEATURE_COUNT];
  size_t n_ops = 0;
  return knnwb_metafeatures_parse_ops(params[OPS].v_string, ops, &n_ops, error);
}

static gboolean knnwb_metafeatures_step_expand(KnnwbStepContext *context, const KnnwbMatrix *data,
                                               KnnwbMatrix **result, GError **error)
{
  const KnnwbParamValue *p = context->params;
  KnnwbMetafeatureOp ops[KNNWB_METAFEATURE_COUNT];
  KnnwbMetafeatureOptions options;
  knnwb_metafeatures_options_init(&options);
  if (!knnwb_metafeatures_parse_ops(p[OPS].v_string, ops, &options.n_ops, error))
    return FALSE;
  options.ops = ops;
  g_autofree size_t *rows = NULL;
  if (p[ROWS].v_string != NULL && *p[ROWS].v_string != '\0') {
    if (!knnwb_metafeatures_rows_from_file(data, p[ROWS].v_string, &rows, &options.n_rows, error))
      return FALSE;
    options.rows = rows;
  }
  int missing;
  if (!knnwb_enum_from_string(&knnwb_missing_table, p[MISSING].v_string, &missing, error))
    return FALSE;
  options.missing = (KnnwbMissingPolicy)missing;
  options.n_threads = context->n_threads;
  options.cancel = context->cancel;
  options.progress = context->progress;
  options.progress_data = context->progress_data;
  if (context->group != NULL) {
    options.share_index = context->group->rank;
    options.share_count = context->group->size;
  }
  return knnwb_metafeatures_expand(data, &options, result, error);
}

static gboolean knnwb_metafeatures_step_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbValue *in = context->inputs[0];
  if (context->group == NULL || in->block_total == 0)
    return knnwb_metafeatures_step_expand(context, in->matrix, &context->output->matrix, error);
  /* Split rows under mpirun: the pairs combine every row with every other, so every rank puts the
   * (small) input together and generates only its share of the pair rows; the shares in rank
   * order are the single process's result. */
  const KnnwbKnnGroup *group = context->group;
  g_autoptr(KnnwbMatrix) whole = knnwb_host_split_value_whole(group, in, error);
  if (whole == NULL)
    return FALSE;
  gboolean ok = knnwb_metafeatures_step_expand(context, whole, &context->output->matrix, error);
  g_clear_pointer(&whole, knnwb_matrix_free);
  return group->agree(group, ok, error) &&
         knnwb_host_split_value_finish(group, context->output, error);
}

const KnnwbStepType knnwb_step_metafeatures = {
    "metafeatures",
    "add one row per unordered pair of rows: a-b, a+b, a*b, a/b (GPU-FS-kNN's expansion)",
    knnwb_metafeatures_inputs,
    G_N_ELEMENTS(knnwb_metafeatures_inputs),
    knnwb_metafeatures_params,
    N_PARAMS,
    KNNWB_KIND_MATRIX,
    knnwb_metafeatures_step_run,
    KNNWB_STEP_SPLIT_ROWS,
    knnwb_metafeatures_step_check,
};
