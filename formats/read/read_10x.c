/* 10x Genomics Market Exchange: a directory holding matrix.mtx, barcodes.tsv and features.tsv (v2:
 * genes.tsv), each gzip-compressed or not, or a bare Matrix Market file. The file is features x
 * barcodes; the cells (barcodes) are the points, so each entry is scattered into the transposed
 * place as it is read (no second copy). Barcodes label the rows; feature names (the second field,
 * the gene symbol, as scanpy's var_names) label the columns, with the ids and types as column
 * annotations gene_ids and feature_types. */
#include "read_internal.h"

#include <errno.h>
#include <sys/stat.h>

/* The first of dir/name + each suffix that exists, or NULL. */
static char *knnwb_10x_find(const char *directory, const char *name)
{
  static const char *const suffixes[] = {".gz", ""};
  for (size_t i = 0; i < G_N_ELEMENTS(suffixes); i++) {
    g_autofree char *file = g_strconcat(name, suffixes[i], NULL);
    char *candidate = g_build_filename(directory, file, NULL);
    if (g_file_test(candidate, G_FILE_TEST_IS_REGULAR))
      return candidate;
    g_free(candidate);
  }
  return NULL;
}

/* Reads the header and size line: rows (features), columns (barcodes), entries; *pattern when the
 * entries carry no value. */
static gboolean knnwb_10x_header(KnnwbTextInput *input, const char *path, size_t *rows,
                                 size_t *columns, uint64_t *entries, gboolean *pattern,
                                 GError **error)
{
  const char *line;
  size_t length;
  int got = knnwb_text_input_next_line(input, &line, &length, error);
  if (got < 0)
    return FALSE;
  g_autofree char *header = got > 0 ? g_ascii_strdown(line, (gssize)length) : g_strdup("");
  g_auto(GStrv) words = g_strsplit_set(header, " \t", -1);
  if (g_strv_length(words) < 5 || !g_str_has_prefix(words[0], "%%matrixmarket") ||
      g_strcmp0(words[1], "matrix") != 0 || g_strcmp0(words[2], "coordinate") != 0 ||
      g_strcmp0(words[4], "general") != 0 ||
      (g_strcmp0(words[3], "integer") != 0 && g_strcmp0(words[3], "real") != 0 &&
       g_strcmp0(words[3], "pattern") != 0)) {
    knnwb_formats_parse_error(error, path, input->line_number, 0,
                              "expected '%%%%MatrixMarket matrix coordinate integer|real|pattern "
                              "general' (a 10x matrix.mtx); dense arrays, complex and symmetric "
                              "matrices are not read");
    return FALSE;
  }
  *pattern = g_strcmp0(words[3], "pattern") == 0;
  while ((got = knnwb_text_input_next_line(input, &line, &length, error)) > 0)
    if (length > 0 && line[0] != '%')
      break;
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, input->line_number, 0,
                                "no size line (rows, columns, entries)");
    return FALSE;
  }
  g_autofree char *text = g_strndup(line, length);
  guint64 values[3];
  g_auto(GStrv) fields = g_strsplit_set(g_strstrip(text), " \t", -1);
  if (g_strv_length(fields) != 3 ||
      !g_ascii_string_to_unsigned(fields[0], 10, 0, G_MAXINT64, &values[0], NULL) ||
      !g_ascii_string_to_unsigned(fields[1], 10, 0, G_MAXINT64, &values[1], NULL) ||
      !g_ascii_string_to_unsigned(fields[2], 10, 0, G_MAXINT64, &values[2], NULL)) {
    knnwb_formats_parse_error(error, path, input->line_number, 0,
                              "expected the size line 'rows columns entries' (three whole "
                              "numbers)");
    return FALSE;
  }
  /* Every entry takes at least 6 bytes ("1 1 1\n"): a size the file cannot hold is refused
   * before the matrix is allocated. */
  if (input->size_bound > 0 && values[2] > input->size_bound / 6) {
    knnwb_formats_parse_error(error, path, input->line_number, 0,
                              "%" G_GUINT64_FORMAT " entries cannot fit in a file of this size",
                              values[2]);
    return FALSE;
  }
  *rows = values[0];
  *columns = values[1];
  *entries = values[2];
  return TRUE;
}

/* One entry line "feature barcode [value]" into the matrix (barcodes x features). */
static gboolean knnwb_10x_entry(KnnwbTextInput *input, const char *path, const char *line,
                                size_t length, gboolean pattern, KnnwbMatrix *matrix,
                                const KnnwbReadOptions *options, GError **error)
{
  const char *p = line, *end = line + length;
  guint64 index[2];
  for (int k = 0; k < 2; k++) {
    while (p < end && (*p == ' ' || *p == '\t'))
      p++;
    const char *start = p;
    guint64 value = 0;
    while (p < end && (unsigned)(*p - '0') < 10 && value < G_MAXUINT32)
      value = value * 10 + (guint64)(*p++ - '0');
    const size_t limit = k == 0 ? matrix->n_cols : matrix->n_rows;
    if (p == start || value < 1 || value > limit || (p < end && *p != ' ' && *p != '\t')) {
      knnwb_formats_parse_error(error, path, input->line_number, (size_t)(start - line) + 1,
                                "expected a %s number from 1 to %zu",
                                k == 0 ? "feature (row)" : "barcode (column)", limit);
      return FALSE;
    }
    index[k] = value - 1;
  }
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  float value = 1.0f;
  if (!pattern) {
    const char *stop = p;
    KnnwbFloatStatus status = knnwb_formats_parse_float(p, end, &value, &stop);
    const char *rest = stop;
    while (rest < end && (*rest == ' ' || *rest == '\t' || *rest == '\r'))
      rest++;
    const char *token_end = p;
    while (token_end < end && *token_end != ' ' && *token_end != '\t' && *token_end != '\r')
      token_end++;
    const gboolean missing = knnwb_formats_is_missing_token(p, (size_t)(token_end - p));
    if (missing || status == KNNWB_FLOAT_RANGE) {
      if (options->missing != KNNWB_MISSING_DROP_ROWS) {
        knnwb_formats_parse_error(error, path, input->line_number, (size_t)(p - line) + 1,
                                  "a missing or infinite value (--drop-missing leaves such cells "
                                  "without edges)");
        return FALSE;
      }
      knnwb_matrix_set_row_absent(matrix, index[1]);
      return TRUE;
    }
    if ((status != KNNWB_FLOAT_OK && status != KNNWB_FLOAT_TINY) || rest != end) {
      knnwb_formats_parse_error(error, path, input->line_number, (size_t)(p - line) + 1,
                                "expected a number after the feature and barcode");
      return FALSE;
    }
  }
  /* Repeated coordinates add up, as scipy and Seurat read them. */
  matrix->values[index[1] * matrix->n_cols + index[0]] += value;
  return TRUE;
}

/* The Matrix Market file into a new barcodes x features matrix. */
static gboolean knnwb_10x_matrix(const char *path, const KnnwbReadOptions *options,
                                 KnnwbMatrix **out, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  knnwb_text_input_watch(&input, options);
  size_t rows = 0, columns = 0;
  uint64_t entries = 0, seen = 0;
  gboolean pattern = FALSE, ok = FALSE;
  g_autoptr(KnnwbMatrix) matrix = NULL;
  const char *line;
  size_t length;
  int got = 0;
  if (!knnwb_10x_header(&input, path, &rows, &columns, &entries, &pattern, error))
    goto out;
  GError *local = NULL;
  matrix = knnwb_matrix_new(columns, rows, &local);
  if (matrix == NULL) {
    g_set_error(error, KNNWB_ERROR, local->code, "%s: %zu barcodes x %zu features: %s", path,
                columns, rows, local->message);
    g_error_free(local);
    goto out;
  }
  while ((got = knnwb_text_input_next_line(&input, &line, &length, error)) > 0) {
    if (length == 0 || line[0] == '%')
      continue;
    if (seen == entries) {
      knnwb_formats_parse_error(error, path, input.line_number, 1,
                                "more entries than the %" G_GUINT64_FORMAT " the size line says",
                                entries);
      goto out;
    }
    if (!knnwb_10x_entry(&input, path, line, length, pattern, matrix, options, error))
      goto out;
    seen++;
  }
  if (got < 0)
    goto out;
  if (seen != entries) {
    knnwb_formats_parse_error(error, path, input.line_number, 0,
                              "the file ends after %" G_GUINT64_FORMAT " of the %" G_GUINT64_FORMAT
                              " entries the size line says",
                              seen, entries);
    goto out;
  }
  *out = g_steal_pointer(&matrix);
  ok = TRUE;
out:
  knnwb_text_input_close(&input);
  return ok;
}

/* Line i of a side file into the matrix: the barcode (first field), or the feature's name (second
 * field, else the first) with its id and type as annotations. */
static void knnwb_10x_side_set(KnnwbMatrix *matrix, gboolean features, size_t i, char *text)
{
  g_auto(GStrv) fields = g_strsplit(text, "\t", 4);
  if (!features) {
    knnwb_matrix_set_row_label(matrix, i, fields[0]);
    return;
  }
  knnwb_matrix_set_col_label(matrix, i, fields[1] != NULL ? fields[1] : fields[0]);
  knnwb_matrix_set_annotation(matrix, KNNWB_MATRIX_COLUMNS, "gene_ids", i, fields[0]);
  if (fields[1] != NULL && fields[2] != NULL)
    knnwb_matrix_set_annotation(matrix, KNNWB_MATRIX_COLUMNS, "feature_types", i, fields[2]);
}

/* A side file of one line per barcode or feature: tab-separated fields, the first (barcodes) or
 * the first three (id, name, type) used. Its line count must be expected. The lines are kept until
 * the count is known, so that a header's count (a matrix's size line can declare millions of
 * barcodes) sizes no allocation before the file agrees with it. */
static gboolean knnwb_10x_side(const char *path, size_t expected, gboolean features,
                               KnnwbMatrix *matrix, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  const char *line;
  size_t length;
  int got;
  gboolean ok = FALSE;
  g_autoptr(GPtrArray) lines = g_ptr_array_new_with_free_func(g_free);
  while ((got = knnwb_text_input_next_line(&input, &line, &length, error)) > 0) {
    if (length == 0)
      continue;
    const char *invalid;
    if (!g_utf8_validate_len(line, length, &invalid) || memchr(line, '\0', length) != NULL) {
      knnwb_formats_parse_error(error, path, input.line_number, 0, "not valid UTF-8 text");
      goto out;
    }
    if (lines->len == expected) {
      knnwb_formats_parse_error(error, path, input.line_number, 0,
                                "more lines than the matrix's %zu %s", expected,
                                features ? "features (rows)" : "barcodes (columns)");
      goto out;
    }
    g_ptr_array_add(lines, g_strndup(line, length));
  }
  if (got < 0)
    goto out;
  if (lines->len != expected) {
    knnwb_formats_parse_error(error, path, input.line_number, 0, "%u lines for the matrix's %zu %s",
                              lines->len, expected,
                              features ? "features (rows)" : "barcodes (columns)");
    goto out;
  }
  for (size_t i = 0; i < expected; i++)
    knnwb_10x_side_set(matrix, features, i, g_ptr_array_index(lines, i));
  ok = TRUE;
out:
  knnwb_text_input_close(&input);
  return ok;
}

gboolean knnwb_formats_read_10x(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  g_autofree char *matrix_path = NULL, *barcodes = NULL, *features = NULL;
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    matrix_path = knnwb_10x_find(path, "matrix.mtx");
    if (matrix_path == NULL) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO,
                  "%s: a directory without matrix.mtx or matrix.mtx.gz (a 10x Genomics matrix "
                  "directory holds matrix.mtx.gz, barcodes.tsv.gz and features.tsv.gz)",
                  path);
      return FALSE;
    }
    barcodes = knnwb_10x_find(path, "barcodes.tsv");
    features = knnwb_10x_find(path, "features.tsv");
    if (features == NULL)
      features = knnwb_10x_find(path, "genes.tsv");
  } else {
    matrix_path = g_strdup(path);
    /* Beside a file named as 10x names it, its side files are taken too. */
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *directory = g_path_get_dirname(path);
    if (g_str_has_prefix(base, "matrix.mtx")) {
      barcodes = knnwb_10x_find(directory, "barcodes.tsv");
      features = knnwb_10x_find(directory, "features.tsv");
      if (features == NULL)
        features = knnwb_10x_find(directory, "genes.tsv");
    }
  }
  g_autoptr(KnnwbMatrix) matrix = NULL;
  if (!knnwb_10x_matrix(matrix_path, options, &matrix, error) ||
      (barcodes != NULL && !knnwb_10x_side(barcodes, matrix->n_rows, FALSE, matrix, error)) ||
      (features != NULL && !knnwb_10x_side(features, matrix->n_cols, TRUE, matrix, error)))
    return FALSE;
  for (size_t i = 0; i < matrix->n_rows && matrix->n_absent_rows > 0; i++)
    if (knnwb_matrix_row_is_absent(matrix, i)) {
      memset(matrix->values + i * matrix->n_cols, 0, matrix->n_cols * sizeof(float));
      if (info->n_dropped_rows++ == 0)
        info->first_dropped_line = i + 1;
    }
  if (matrix->n_rows == 0) {
    knnwb_formats_parse_error(error, matrix_path, 1, 0, "no barcodes (the matrix has no columns)");
    return FALSE;
  }
  *out = g_steal_pointer(&matrix);
  return TRUE;
}
