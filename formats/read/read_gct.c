/* GCT 1.2 and 1.3, the Broad's expression format: #version, dimensions, header, (metadata), rows.
 */
#include "read_internal.h"

#include <string.h>

/* Parses a non-negative decimal integer filling the whole string; FALSE on junk or overflow. */
static gboolean knnwb_gct_parse_size(const char *text, size_t *value)
{
  if (*text == '\0')
    return FALSE;
  size_t v = 0;
  for (const char *c = text; *c != '\0'; c++) {
    if (*c < '0' || *c > '9' || v > (SIZE_MAX - 9) / 10)
      return FALSE;
    v = v * 10 + (size_t)(*c - '0');
  }
  *value = v;
  return TRUE;
}

/* GCT writers often pad short lines with tabs up to the table width: ignore trailing empties. */
static void knnwb_gct_drop_trailing_empty(GPtrArray *fields)
{
  while (fields->len > 0 && *(const char *)g_ptr_array_index(fields, fields->len - 1) == '\0')
    g_ptr_array_remove_index(fields, fields->len - 1);
}

/* The same past the declared width only (an empty sample name inside it stays an error). */
static void knnwb_gct_drop_trailing_past(GPtrArray *fields, size_t n_fields)
{
  while (fields->len > n_fields &&
         *(const char *)g_ptr_array_index(fields, fields->len - 1) == '\0')
    g_ptr_array_remove_index(fields, fields->len - 1);
}

static int knnwb_gct_next_record(KnnwbTextInput *input, GPtrArray *fields, GError **error)
{
  const char *line;
  size_t length;
  g_ptr_array_set_size(fields, 0);
  for (;;) {
    int got = knnwb_text_input_next_line(input, &line, &length, error);
    if (got <= 0)
      return got;
    if (length > 0)
      break;
  }
  if (!knnwb_formats_split_record(input, '\t', &line, &length, fields, error))
    return -1;
  return 1;
}

/* What the first two lines of a GCT file declare. */
typedef struct {
  gboolean v13; /* #1.3 (row and column metadata counts declared) */
  size_t dims_line;
  size_t n_rows, n_cols, n_row_meta, n_col_meta;
} KnnwbGctDimensions;

/* The version line and the dimensions line, checked against the file's size. */
static gboolean knnwb_gct_read_dimensions(KnnwbTextInput *input, const char *path,
                                          GPtrArray *fields, KnnwbGctDimensions *dims,
                                          GError **error)
{
  int got = knnwb_gct_next_record(input, fields, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, 1, 0,
                                "the file is empty (a GCT file starts with #1.2)");
    return FALSE;
  }
  knnwb_gct_drop_trailing_empty(fields);
  const char *version = fields->len == 1 ? g_ptr_array_index(fields, 0) : "";
  const gboolean v13 = dims->v13 = strcmp(version, "#1.3") == 0;
  if (!v13 && strcmp(version, "#1.2") != 0) {
    knnwb_formats_parse_error(error, path, input->line_number, 1,
                              "expected the GCT version line #1.2 or #1.3");
    return FALSE;
  }
  got = knnwb_gct_next_record(input, fields, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, input->line_number + 1, 0,
                                "the file ends before the dimensions line");
    return FALSE;
  }
  knnwb_gct_drop_trailing_empty(fields);
  dims->dims_line = input->line_number;
  dims->n_row_meta = 1;
  size_t want = v13 ? 4 : 2;
  gboolean dims_ok = fields->len == want &&
                     knnwb_gct_parse_size(g_ptr_array_index(fields, 0), &dims->n_rows) &&
                     knnwb_gct_parse_size(g_ptr_array_index(fields, 1), &dims->n_cols);
  if (dims_ok && v13)
    dims_ok = knnwb_gct_parse_size(g_ptr_array_index(fields, 2), &dims->n_row_meta) &&
              knnwb_gct_parse_size(g_ptr_array_index(fields, 3), &dims->n_col_meta);
  if (!dims_ok) {
    knnwb_formats_parse_error(
        error, path, dims->dims_line, 1,
        v13 ? "expected the dimensions line: rows, columns, row metadata "
              "and column metadata counts, tab-separated"
            : "expected the dimensions line: rows and columns, tab-separated");
    return FALSE;
  }
  if (dims->n_rows == 0 || dims->n_cols == 0) {
    knnwb_formats_parse_error(error, path, dims->dims_line, 1,
                              "the dimensions %zu x %zu hold no values", dims->n_rows,
                              dims->n_cols);
    return FALSE;
  }
  /* Absurd dimensions must not allocate: every value takes at least two bytes ("0\t"). */
  size_t n_values_total, minimum_bytes;
  if (!knnwb_size_multiply(dims->n_rows, dims->n_cols, &n_values_total) ||
      !knnwb_size_multiply(n_values_total, 2, &minimum_bytes) ||
      (input->size_bound > 0 && minimum_bytes > input->size_bound) || dims->n_row_meta > 1000000 ||
      dims->n_col_meta > 1000000) {
    knnwb_formats_parse_error(error, path, dims->dims_line, 1,
                              "the dimensions %zu x %zu cannot fit in this file (%llu bytes%s)",
                              dims->n_rows, dims->n_cols, (unsigned long long)input->size_bound,
                              input->gzip ? " at most, decompressed" : "");
    return FALSE;
  }
  return TRUE;
}

/* The column header (the sample names into builder's column labels) and the 1.3 column metadata
 * rows, which are skipped. */
static gboolean knnwb_gct_read_column_header(KnnwbTextInput *input, const char *path,
                                             GPtrArray *fields, const KnnwbGctDimensions *dims,
                                             KnnwbMatrixBuilder *builder, GError **error)
{
  const size_t n_fields = 1 + dims->n_row_meta + dims->n_cols;
  int got = knnwb_gct_next_record(input, fields, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, dims->dims_line + 1, 0,
                                "the file ends before the column header");
    return FALSE;
  }
  knnwb_gct_drop_trailing_past(fields, n_fields);
  if (fields->len != n_fields) {
    knnwb_formats_parse_error(
        error, path, input->line_number, 0,
        "the header has %u field%s, expected %zu (name, %zu %s, %zu sample%s)", fields->len,
        KNNWB_PLURAL(fields->len), n_fields, dims->n_row_meta,
        dims->v13 ? "row metadata columns" : "description", dims->n_cols,
        KNNWB_PLURAL(dims->n_cols));
    return FALSE;
  }
  builder->col_labels = g_ptr_array_new_with_free_func(g_free);
  for (size_t j = 0; j < dims->n_cols; j++)
    g_ptr_array_add(builder->col_labels,
                    g_strdup(g_ptr_array_index(fields, 1 + dims->n_row_meta + j)));
  for (size_t c = 0; c < dims->n_col_meta; c++) {
    got = knnwb_gct_next_record(input, fields, error);
    if (got <= 0) {
      if (got == 0)
        knnwb_formats_parse_error(error, path, input->line_number + 1, 0,
                                  "the file ends inside the %zu column metadata rows",
                                  dims->n_col_meta);
      return FALSE;
    }
    knnwb_gct_drop_trailing_past(fields, n_fields);
    if (fields->len != n_fields) {
      knnwb_formats_parse_error(error, path, input->line_number, 0,
                                "the column metadata row has %u field%s, expected %zu", fields->len,
                                KNNWB_PLURAL(fields->len), n_fields);
      return FALSE;
    }
  }
  return TRUE;
}

gboolean knnwb_formats_read_gct(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  knnwb_text_input_watch(&input, options);
  gboolean ok = FALSE;
  KnnwbMatrixBuilder builder = {0};
  g_autoptr(GPtrArray) fields = g_ptr_array_new_with_free_func(g_free);
  g_autofree guint8 *kinds = NULL;
  KnnwbGctDimensions dims = {0};
  if (!knnwb_gct_read_dimensions(&input, path, fields, &dims, error))
    goto out;
  knnwb_matrix_builder_init(&builder, dims.n_cols, TRUE);
  if (options->rank_rows)
    knnwb_matrix_builder_keep_ranks(&builder, options->transpose);
  if (!knnwb_gct_read_column_header(&input, path, fields, &dims, &builder, error))
    goto out;
  const size_t n_fields = 1 + dims.n_row_meta + dims.n_cols;
  kinds = g_new0(guint8, n_fields);
  kinds[0] = KNNWB_COLUMN_LABEL;
  for (size_t f = 1; f <= dims.n_row_meta; f++)
    kinds[f] = KNNWB_COLUMN_SKIP;
  if (!knnwb_matrix_builder_reserve(&builder, dims.n_rows, error))
    goto out;
  KnnwbDelimitedLayout layout = {.delimiter = '\t',
                                 .kinds = kinds,
                                 .n_fields = n_fields,
                                 .missing = options->missing,
                                 .expected_rows = dims.n_rows,
                                 .trailing_empty = TRUE /* the counts are declared */};
  if (!knnwb_formats_read_delimited_rows(&input, &layout, &builder, info, error))
    goto out;
  ok = knnwb_matrix_builder_finish_rows(&builder, path, input.line_number, info, out, error);
out:
  knnwb_matrix_builder_clear(&builder);
  knnwb_text_input_close(&input);
  return ok;
}
