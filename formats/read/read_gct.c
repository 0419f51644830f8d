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
  int got = knnwb_gct_next_record(&input, fields, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, 1, 0,
                                "the file is empty (a GCT file starts with #1.2)");
    goto out;
  }
  knnwb_gct_drop_trailing_empty(fields);
  const char *version = fields->len == 1 ? g_ptr_array_index(fields, 0) : "";
  gboolean v13 = strcmp(version, "#1.3") == 0;
  if (!v13 && strcmp(version, "#1.2") != 0) {
    knnwb_formats_parse_error(error, path, input.line_number, 1,
                              "expected the GCT version line #1.2 or #1.3");
    goto out;
  }
  got = knnwb_gct_next_record(&input, fields, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, input.line_number + 1, 0,
                                "the file ends before the dimensions line");
    goto out;
  }
  knnwb_gct_drop_trailing_empty(fields);
  size_t dims_line = input.line_number;
  size_t n_rows = 0, n_cols = 0, n_row_meta = 1, n_col_meta = 0;
  size_t want = v13 ? 4 : 2;
  gboolean dims_ok = fields->len == want &&
                     knnwb_gct_parse_size(g_ptr_array_index(fields, 0), &n_rows) &&
                     knnwb_gct_parse_size(g_ptr_array_index(fields, 1), &n_cols);
  if (dims_ok && v13)
    dims_ok = knnwb_gct_parse_size(g_ptr_array_index(fields, 2), &n_row_meta) &&
              knnwb_gct_parse_size(g_ptr_array_index(fields, 3), &n_col_meta);
  if (!dims_ok) {
    knnwb_formats_parse_error(
        error, path, dims_line, 1,
        v13 ? "expected the dimensions line: rows, columns, row metadata "
              "and column metadata counts, tab-separated"
            : "expected the dimensions line: rows and columns, tab-separated");
    goto out;
  }
  if (n_rows == 0 || n_cols == 0) {
    knnwb_formats_parse_error(error, path, dims_line, 1, "the dimensions %zu x %zu hold no values",
                              n_rows, n_cols);
    goto out;
  }
  /* Absurd dimensions must not allocate: every value takes at least two bytes ("0\t"). */
  size_t n_values_total, minimum_bytes;
  if (!knnwb_size_multiply(n_rows, n_cols, &n_values_total) ||
      !knnwb_size_multiply(n_values_total, 2, &minimum_bytes) ||
      (input.size_bound > 0 && minimum_bytes > input.size_bound) || n_row_meta > 1000000 ||
      n_col_meta > 1000000) {
    knnwb_formats_parse_error(error, path, dims_line, 1,
                              "the dimensions %zu x %zu cannot fit in this file (%llu bytes%s)",
                              n_rows, n_cols, (unsigned long long)input.size_bound,
                              input.gzip ? " at most, decompressed" : "");
    goto out;
  }
  size_t n_fields = 1 + n_row_meta + n_cols;
  got = knnwb_gct_next_record(&input, fields, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, dims_line + 1, 0,
                                "the file ends before the column header");
    goto out;
  }
  knnwb_gct_drop_trailing_past(fields, n_fields);
  if (fields->len != n_fields) {
    knnwb_formats_parse_error(
        error, path, input.line_number, 0,
        "the header has %u field%s, expected %zu (name, %zu %s, %zu sample%s)", fields->len,
        KNNWB_PLURAL(fields->len), n_fields, n_row_meta,
        v13 ? "row metadata columns" : "description", n_cols, KNNWB_PLURAL(n_cols));
    goto out;
  }
  knnwb_matrix_builder_init(&builder, n_cols, TRUE);
  builder.col_labels = g_ptr_array_new_with_free_func(g_free);
  for (size_t j = 0; j < n_cols; j++)
    g_ptr_array_add(builder.col_labels, g_strdup(g_ptr_array_index(fields, 1 + n_row_meta + j)));
  for (size_t c = 0; c < n_col_meta; c++) {
    got = knnwb_gct_next_record(&input, fields, error);
    if (got <= 0) {
      if (got == 0)
        knnwb_formats_parse_error(error, path, input.line_number + 1, 0,
                                  "the file ends inside the %zu column metadata rows", n_col_meta);
      goto out;
    }
    knnwb_gct_drop_trailing_past(fields, n_fields);
    if (fields->len != n_fields) {
      knnwb_formats_parse_error(error, path, input.line_number, 0,
                                "the column metadata row has %u field%s, expected %zu", fields->len,
                                KNNWB_PLURAL(fields->len), n_fields);
      goto out;
    }
  }
  kinds = g_new0(guint8, n_fields);
  kinds[0] = KNNWB_COLUMN_LABEL;
  for (size_t f = 1; f <= n_row_meta; f++)
    kinds[f] = KNNWB_COLUMN_SKIP;
  if (!knnwb_matrix_builder_reserve(&builder, n_rows, error))
    goto out;
  KnnwbDelimitedLayout layout = {.delimiter = '\t',
                                 .kinds = kinds,
                                 .n_fields = n_fields,
                                 .missing = options->missing,
                                 .expected_rows = n_rows,
                                 .trailing_empty = TRUE /* the counts are declared */};
  if (!knnwb_formats_read_delimited_rows(&input, &layout, &builder, info, error))
    goto out;
  ok = knnwb_matrix_builder_finish_rows(&builder, path, input.line_number, info, out, error);
out:
  knnwb_matrix_builder_clear(&builder);
  knnwb_text_input_close(&input);
  return ok;
}
