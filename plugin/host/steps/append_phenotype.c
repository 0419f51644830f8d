/* Step append-phenotype: one row from a per-sample annotation table, matched by sample name. */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/phenotype.h>
#include "steps/steps_internal.h"
#include "runtime/split_input.h"

enum { TABLE, COLUMN, ID_COLUMN, LABEL, MISSING, N_PARAMS };

static const KnnwbParamSpec knnwb_append_phenotype_params[N_PARAMS] = {
    [TABLE] = {"table", KNNWB_PARAM_INPUT_FILE, NULL, 1, 0, NULL,
               "TSV/CSV with a header, one line per sample"},
    [COLUMN] = {"column", KNNWB_PARAM_STRING, NULL, 1, 0, NULL, "the numeric column to append"},
    [ID_COLUMN] = {"id-column", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                   "the column of sample names (default: the first)"},
    [LABEL] = {"label", KNNWB_PARAM_STRING, "", 1, 0, NULL,
               "the new row's label (default: the column name)"},
    [MISSING] = {"missing", KNNWB_PARAM_CHOICE, "complete", 1, 0, "complete|error",
                 "samples whose value is NA, empty or NaN: complete (left out of every row, with "
                 "a warning) or error"},
};

static const KnnwbPortSpec knnwb_append_phenotype_inputs[] = {
    {"data", KNNWB_KIND_MATRIX, FALSE, "the matrix (columns are the samples, named)"},
};

/* The input with the phenotype's row appended on a copy (on the last rank of split rows), or
 * NULL with error set. */
static KnnwbMatrix *knnwb_append_phenotype_copy(KnnwbStepContext *context,
                                                const KnnwbKnnGroup *group, GError **error)
{
  const KnnwbParamValue *p = context->params;
  const KnnwbMatrix *data = context->inputs[0]->matrix;
  /* The input value may feed other steps too: the row goes onto a copy (which then grows in
   * place). Check the table before copying a large matrix. */
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(p[TABLE].v_string, error);
  if (table == NULL)
    return NULL;
  const char *missing = p[MISSING].v_string;
  g_autofree float *values = NULL;
  if (!knnwb_phenotype_values_missing(data, table, p[ID_COLUMN].v_string, p[COLUMN].v_string,
                                      strcmp(missing, "error") == 0
                                          ? KNNWB_PHENOTYPE_MISSING_ERROR
                                          : KNNWB_PHENOTYPE_MISSING_COMPLETE,
                                      &values, NULL, error))
    return NULL;
  g_autofree gboolean *keep = g_try_new(gboolean, MAX(data->n_rows, (size_t)1));
  if (keep == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate");
    return NULL;
  }
  for (size_t i = 0; i < data->n_rows; i++)
    keep[i] = TRUE;
  KnnwbMatrix *copy = knnwb_matrix_select_rows(data, keep, error);
  if (copy == NULL || !knnwb_phenotype_complete_cases(&copy, values, error)) {
    g_clear_pointer(&copy, knnwb_matrix_free);
    return NULL;
  }
  /* Split rows under mpirun: the row joins the last rank's block, as it ends the whole. */
  const char *label = *p[LABEL].v_string ? p[LABEL].v_string : p[COLUMN].v_string;
  if ((group == NULL || group->rank == group->size - 1) &&
      !knnwb_phenotype_append_row(&copy, values, label, error))
    g_clear_pointer(&copy, knnwb_matrix_free);
  return copy;
}

static gboolean knnwb_append_phenotype_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbKnnGroup *group =
      context->group != NULL && context->inputs[0]->block_total > 0 ? context->group : NULL;
  context->output->matrix = knnwb_append_phenotype_copy(context, group, error);
  const gboolean ok = context->output->matrix != NULL;
  /* With split rows every rank agrees, whatever failed where (a rank that returned alone would
   * leave the others waiting in the agreement) */
  if (group == NULL)
    return ok;
  return group->agree(group, ok, error) &&
         knnwb_host_split_value_finish(group, context->output, error);
}

const KnnwbStepType knnwb_step_append_phenotype = {
    "append-phenotype",
    "append one row from a per-sample table (the seed's phenotype \"dummy probe\")",
    knnwb_append_phenotype_inputs,
    G_N_ELEMENTS(knnwb_append_phenotype_inputs),
    knnwb_append_phenotype_params,
    N_PARAMS,
    KNNWB_KIND_MATRIX,
    knnwb_append_phenotype_run,
    KNNWB_STEP_SPLIT_ROWS,
    NULL,
};
