/* knnwb_formats_read_matrix: picks the reader, applies the missing-value report and transposition.
 */
#include "read_internal.h"

#include <sys/stat.h>

static const KnnwbEnumName knnwb_header_names[] = {KNNWB_HEADER_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_header_table =
    KNNWB_ENUM_TABLE(knnwb_header_names, 0, " or ", "unknown header mode ", ": use ", "", "(null)");
static const KnnwbEnumName knnwb_missing_names[] = {KNNWB_MISSING_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_missing_table = KNNWB_ENUM_TABLE(
    knnwb_missing_names, 0, " or ", "unknown missing-value policy ", ": use ", "", "(null)");

void knnwb_formats_read_options_init(KnnwbReadOptions *options)
{
  options->format = KNNWB_INPUT_AUTO;
  options->transpose = FALSE;
  options->header = KNNWB_HEADER_AUTO;
  options->label_column = 0;
  options->label_column_name = NULL;
  options->missing = KNNWB_MISSING_ERROR;
  options->labels_path = NULL;
  options->use_rep = NULL;
  options->layer = NULL;
  options->rank_rows = FALSE;
  options->skip_columns = NULL;
  options->block_index = 0;
  options->block_count = 0;
  options->group = NULL;
  options->cancel = NULL;
  options->progress = NULL;
  options->progress_data = NULL;
  options->n_threads = 0;
  options->shape_known = NULL;
  options->shape_known_data = NULL;
}

gboolean knnwb_formats_label_column_from_string(const char *text, KnnwbReadOptions *options,
                                                GError **error)
{
  guint64 column = 0;
  if (text == NULL || *text == '\0' || g_ascii_strcasecmp(text, "0") == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "label column '%s': expected a column number counted from 1, a column name or "
                "none",
                text ? text : "");
    return FALSE;
  }
  options->label_column_name = NULL;
  if (g_ascii_strcasecmp(text, "none") == 0)
    options->label_column = -1;
  else if (g_ascii_string_to_unsigned(text, 10, 1, G_MAXINT, &column, NULL))
    options->label_column = (int)column - 1;
  else
    options->label_column_name = text;
  return TRUE;
}

/* Names the rows with missing values: their count and the first few, by row number (counted from 0,
 * as in every output) and label. Without transposing they stay as absent rows (no edges, numbers
 * kept); transposed they were features and are gone. */
static void knnwb_formats_warn_missing_rows(const char *path, size_t n_rows,
                                            const char *const *labels, const unsigned char *absent,
                                            const KnnwbReadInfo *info, gboolean transposed,
                                            const char *unit)
{
  size_t n = info->n_dropped_rows;
  size_t n_absent = 0;
  for (size_t i = 0; absent != NULL && i < n_rows; i++)
    n_absent += absent[i] != 0;
  if (transposed || n_absent == 0) {
    g_warning("%s: dropped %zu row%s of the file with missing values (the first on %s %zu); "
              "after transposing they are features, and every column (sample) stays",
              path, n, KNNWB_PLURAL(n), unit, info->first_dropped_line);
    return;
  }
  enum { SHOWN = 5 };
  g_autoptr(GString) rows = g_string_new(NULL);
  size_t shown = 0;
  for (size_t i = 0; i < n_rows && shown < SHOWN; i++) {
    if (!absent[i])
      continue;
    const char *label = labels != NULL ? labels[i] : NULL;
    g_string_append_printf(rows, "%s%zu", shown > 0 ? ", " : "", i);
    if (label != NULL && *label != '\0')
      g_string_append_printf(rows, " (%s)", label);
    shown++;
  }
  if (n_absent > shown)
    g_string_append_printf(rows, " and %zu more", n_absent - shown);
  /* Text files also say the line; an NPY row is its number already. */
  g_autofree char *where = g_str_equal(unit, "line") ? g_strdup_printf("; the first on line %zu",
                                                                       info->first_dropped_line)
                                                     : g_strdup("");
  g_warning("%s: %zu row%s with missing values keep%s %s number%s but get%s no edges: row%s %s "
            "(counted from 0, as in the outputs%s)",
            path, n, KNNWB_PLURAL(n), n == 1 ? "s" : "", n == 1 ? "its" : "their", KNNWB_PLURAL(n),
            n == 1 ? "s" : "", KNNWB_PLURAL(n), rows->str, where);
}

void knnwb_formats_warn_read(const char *path, const KnnwbReadOptions *options,
                             const KnnwbReadInfo *info, size_t n_rows, const char *const *labels,
                             const unsigned char *absent)
{
  /* The text reader tells this itself after reading a file whole (before transposing). */
  const gboolean text = info->format == KNNWB_INPUT_CSV || info->format == KNNWB_INPUT_TSV;
  if (info->block_read && text && !options->transpose && options->label_column_name == NULL)
    knnwb_formats_warn_numeric_labels(path, labels, n_rows, options->label_column);
  if (info->n_dropped_rows > 0)
    knnwb_formats_warn_missing_rows(path, n_rows, labels, absent, info, options->transpose,
                                    info->format == KNNWB_INPUT_NPY ||
                                            info->format == KNNWB_INPUT_H5AD ||
                                            info->format == KNNWB_INPUT_10X
                                        ? "row"
                                        : "line");
  /* 1e-300 reads as 0 without a word otherwise: a row of such p-values turns constant. */
  if (info->n_tiny_values > 0)
    g_warning("%s: %zu value%s below float's smallest normal magnitude (1.2e-38) %s read with "
              "fewer digits or as 0 (the first on line %zu); knnwb computes in float32: scale "
              "such data first (-log10 of p-values, say)",
              path, info->n_tiny_values, KNNWB_PLURAL(info->n_tiny_values),
              info->n_tiny_values == 1 ? "was" : "were", info->first_tiny_line);
  knnwb_formats_warn_repeated_labels(path, labels, n_rows, options->n_threads);
}

gboolean knnwb_formats_read_matrix(const char *path, const KnnwbReadOptions *options,
                                   KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  g_return_val_if_fail(path != NULL && out != NULL, FALSE);
  g_autofree float *column_ranks = NULL; /* a transposed read's ranks, see below */
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
  /* The first bytes are read to tell the format, then the file is opened again for the data: a
   * pipe (`<(zcat x.gz)`, /dev/stdin) has no second reading and looked empty. */
  struct stat st;
  if (stat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: a pipe, not a file: knnwb reads its input more than once (the first bytes "
                "for the format, then the data); save it to a file first (gzip-compressed files "
                "are read as they are: no zcat needed)",
                path);
    return FALSE;
  }
  KnnwbInputFormat format = options->format;
  /* A directory is a 10x Genomics matrix directory (matrix.mtx.gz, barcodes, features). */
  const gboolean directory = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  if (directory && format != KNNWB_INPUT_AUTO && format != KNNWB_INPUT_10X) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                "%s: a directory, not a %s file (a directory is read as a 10x Genomics matrix "
                "directory: format auto or 10x)",
                path, knnwb_formats_input_to_string(format));
    return FALSE;
  }
  if (directory)
    format = KNNWB_INPUT_10X;
  else if (!knnwb_formats_resolve_input(path, options->format, &format, error))
    return FALSE;
  info->format = format;
  if ((options->use_rep != NULL || options->layer != NULL) && format != KNNWB_INPUT_H5AD) {
    /* Silently reading the whole matrix instead would give another graph than the one asked for. */
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: %s applies to AnnData .h5ad inputs, and this is %s", path,
                options->use_rep != NULL ? "--use-rep" : "--layer",
                knnwb_formats_input_to_string(format));
    return FALSE;
  }
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
  case KNNWB_INPUT_GEO:
    ok = knnwb_formats_read_geo(path, options, &matrix, info, error);
    break;
  case KNNWB_INPUT_H5AD:
    ok = knnwb_formats_read_h5ad(path, options, &matrix, info, error);
    break;
  case KNNWB_INPUT_10X:
    ok = knnwb_formats_read_10x(path, options, &matrix, info, error);
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
  /* The side file names the file's rows as stored (before transposing), as for NPY. */
  if (ok && options->labels_path != NULL &&
      !knnwb_formats_read_labels_file(options->labels_path, matrix->n_rows, matrix, FALSE,
                                      options->n_threads, error))
    return FALSE;
  if (!ok)
    return FALSE;
  /* A transposed read's ranks are already laid out for the transposed matrix (builder). */
  if (options->transpose)
    column_ranks = knnwb_matrix_steal_row_ranks(matrix);
  if (options->transpose && matrix->n_absent_rows > 0) {
    /* The file's rows with missing values are features after transposing: they go. */
    g_autofree gboolean *keep = knnwb_try_new_array(matrix->n_rows, sizeof(gboolean),
                                                    "the rows to keep", matrix->n_rows, error);
    if (keep == NULL)
      return FALSE;
    for (size_t i = 0; i < matrix->n_rows; i++)
      keep[i] = !knnwb_matrix_row_is_absent(matrix, i);
    KnnwbMatrix *kept = knnwb_matrix_select_rows(matrix, keep, error);
    if (kept == NULL)
      return FALSE;
    knnwb_matrix_free(matrix);
    matrix = kept;
  }
  if (options->transpose) {
    KnnwbMatrix *transposed = knnwb_matrix_transpose(matrix, error);
    if (transposed == NULL)
      return FALSE;
    knnwb_matrix_free(matrix);
    matrix = transposed;
    knnwb_matrix_take_row_ranks(matrix, g_steal_pointer(&column_ranks));
  }
  *out = g_steal_pointer(&matrix);
report:
  /* A block's rows are a part of the job's: the caller reports for all rows at once. */
  if (!info->block_read)
    knnwb_formats_warn_read(path, options, info, (*out)->n_rows,
                            (const char *const *)(*out)->row_labels, (*out)->absent_rows);
  return TRUE;
}
