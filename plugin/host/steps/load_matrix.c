/* Step load-matrix: a matrix file (CIBM, CSV, TSV, GCT, NPY, GEO, .h5ad, 10x) into a matrix value.
 */
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include "steps/steps_internal.h"
#include "runtime/split_input.h"

enum {
  PATH,
  FORMAT,
  TRANSPOSE,
  HEADER,
  LABEL_COLUMN,
  MISSING,
  LABELS,
  SKIP_COLUMNS,
  SPEARMAN_RANKS,
  USE_REP,
  LAYER,
  N_PARAMS
};

static const KnnwbParamSpec knnwb_load_matrix_params[N_PARAMS] = {
    [PATH] = {"path", KNNWB_PARAM_INPUT_FILE, NULL, 1, 0, NULL, "the matrix file"},
    [FORMAT] = {"format", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_ENUM_CHOICES(KNNWB_INPUT_NAMES),
                "file format (auto: by extension, then content)"},
    [TRANSPOSE] = {"transpose", KNNWB_PARAM_BOOLEAN, "false", 1, 0, NULL,
                   "the file's columns are the points"},
    [HEADER] = {"header", KNNWB_PARAM_CHOICE, "auto", 1, 0, KNNWB_ENUM_CHOICES(KNNWB_HEADER_NAMES),
                "CSV/TSV: whether the first line holds column names"},
    [LABEL_COLUMN] = {"label-column", KNNWB_PARAM_STRING, "1", 1, 0, NULL,
                      "CSV/TSV: the row labels' column: a number counted from 1 (as knnwb knn "
                      "--label-column), a header name, or none"},
    [MISSING] =
        {"missing", KNNWB_PARAM_CHOICE, "error", 1, 0, KNNWB_ENUM_CHOICES(KNNWB_MISSING_NAMES),
         "rows with missing values (NA, empty, NaN, Inf): an error, or left out with a warning "
         "(they keep their row numbers and get no edges)"},
    [LABELS] = {"labels", KNNWB_PARAM_INPUT_FILE, "", 1, 0, NULL,
                "a side file with one label per row of the file (any format; replaces the "
                "file's own row labels)"},
    [SKIP_COLUMNS] = {"skip-columns", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                      "CSV/TSV: annotation columns to leave out (header names or numbers from 1, "
                      "comma-separated); without it a text second column is left out with a "
                      "warning"},
    [SPEARMAN_RANKS] = {"spearman-ranks", KNNWB_PARAM_BOOLEAN, "false", 1, 0, NULL,
                        "text formats: also rank each row's values as read (double), for a "
                        "spearman step after it (docs/formats.md)"},
    [USE_REP] = {"use-rep", KNNWB_PARAM_STRING, "", 1, 0, NULL,
                 ".h5ad: read obsm[use-rep] (X_pca, say) instead of X"},
    [LAYER] = {"layer", KNNWB_PARAM_STRING, "", 1, 0, NULL,
               ".h5ad: read layers[layer] instead of X"},
};

static gboolean knnwb_load_matrix_run(KnnwbStepContext *context, GError **error)
{
  const KnnwbParamValue *p = context->params;
  KnnwbReadOptions options;
  knnwb_formats_read_options_init(&options);
  if (!knnwb_formats_input_from_string(p[FORMAT].v_string, &options.format, error))
    return FALSE;
  options.transpose = p[TRANSPOSE].v_int != 0;
  int header, missing;
  if (!knnwb_enum_from_string(&knnwb_header_table, p[HEADER].v_string, &header, error) ||
      !knnwb_enum_from_string(&knnwb_missing_table, p[MISSING].v_string, &missing, error) ||
      !knnwb_formats_label_column_from_string(p[LABEL_COLUMN].v_string, &options, error))
    return FALSE;
  options.header = (KnnwbHeaderMode)header;
  options.missing = (KnnwbMissingPolicy)missing;
  options.labels_path = p[LABELS].v_string;
  options.use_rep = *p[USE_REP].v_string != '\0' ? p[USE_REP].v_string : NULL;
  options.layer = *p[LAYER].v_string != '\0' ? p[LAYER].v_string : NULL;
  const char *skip = p[SKIP_COLUMNS].v_string;
  options.skip_columns = skip != NULL && *skip != '\0' ? skip : NULL;
  options.rank_rows = p[SPEARMAN_RANKS].v_int != 0;
  /* A large file (or a gzip-compressed one) takes seconds to read: Ctrl-C and the step's
   * progress line in bytes. */
  options.cancel = context->cancel;
  options.progress = context->progress;
  options.progress_data = context->progress_data;
  if (context->group == NULL)
    return knnwb_formats_read_matrix(p[PATH].v_string, &options, &context->output->matrix, NULL,
                                     error);
  /* Under mpirun, for split kNN steps: this rank's block of rows (the ranks agree on the read, so
   * a bad value seen by one rank fails every rank with its message); rank 0 keeps every label. */
  KnnwbValue *out = context->output;
  KnnwbHostSplitInput *split = g_new0(KnnwbHostSplitInput, 1);
  out->host_private = split;
  if (!knnwb_host_split_read(context->group, p[PATH].v_string, &options, context->cancel, split,
                             error))
    return FALSE;
  out->matrix = g_steal_pointer(&split->block);
  out->block_first = split->first_row;
  out->block_total = split->n_rows;
  out->block_labels = context->group->rank == 0 ? split->labels : NULL;
  return TRUE;
}

const KnnwbStepType knnwb_step_load_matrix = {
    "load-matrix",
    "read a matrix file (rows are points)",
    NULL,
    0,
    knnwb_load_matrix_params,
    N_PARAMS,
    KNNWB_KIND_MATRIX,
    knnwb_load_matrix_run,
    KNNWB_STEP_SPLIT_ROWS,
    NULL,
};
