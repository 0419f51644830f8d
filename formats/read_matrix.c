/* knnwb_formats_read_matrix: picks the reader, applies the missing-value report and transposition.
 */
#include "formats_internal.h"

void knnwb_formats_read_options_init(KnnwbReadOptions *options)
{
  options->format = KNNWB_INPUT_AUTO;
  options->transpose = FALSE;
  options->header = KNNWB_HEADER_AUTO;
  options->label_column = 0;
  options->missing = KNNWB_MISSING_ERROR;
  options->labels_path = NULL;
}

gboolean knnwb_formats_read_matrix(const char *path, const KnnwbReadOptions *options,
                                   KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  g_return_val_if_fail(path != NULL && out != NULL, FALSE);
  KnnwbReadOptions defaults;
  if (options == NULL) {
    knnwb_formats_read_options_init(&defaults);
    options = &defaults;
  }
  KnnwbReadInfo local_info;
  if (info == NULL)
    info = &local_info;
  *info = (KnnwbReadInfo){0};
  *out = NULL;
  KnnwbInputFormat format = options->format;
  if (format == KNNWB_INPUT_AUTO && !knnwb_formats_detect_input(path, &format, error))
    return FALSE;
  info->format = format;
  g_autoptr(KnnwbMatrix) matrix = NULL;
  gboolean ok = FALSE;
  switch (format) {
  case KNNWB_INPUT_CIBM:
    ok = knnwb_formats_read_cibm(path, options, &matrix, info, error);
    break;
  case KNNWB_INPUT_CSV:
    ok = knnwb_formats_read_delimited(path, options, ',', &matrix, info, error);
    break;
  case KNNWB_INPUT_TSV:
    ok = knnwb_formats_read_delimited(path, options, '\t', &matrix, info, error);
    break;
  case KNNWB_INPUT_GCT:
    ok = knnwb_formats_read_gct(path, options, &matrix, info, error);
    break;
  case KNNWB_INPUT_NPY:
    /* NPY transposes itself: a Fortran-order array transposed is the mapping as it is. */
    if (!knnwb_formats_read_npy(path, options, &matrix, info, error))
      return FALSE;
    *out = g_steal_pointer(&matrix);
    goto report;
  default:
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "unknown input format %d",
                (int)format);
    return FALSE;
  }
  if (!ok)
    return FALSE;
  if (options->transpose) {
    KnnwbMatrix *transposed = knnwb_matrix_transpose(matrix, error);
    if (transposed == NULL)
      return FALSE;
    knnwb_matrix_free(matrix);
    matrix = transposed;
  }
  *out = g_steal_pointer(&matrix);
report:
  if (info->n_dropped_rows > 0)
    g_warning("%s: dropped %zu row%s with missing values (the first on %s %zu)", path,
              info->n_dropped_rows, info->n_dropped_rows == 1 ? "" : "s",
              format == KNNWB_INPUT_NPY ? "row" : "line", info->first_dropped_line);
  return TRUE;
}
