/*
 * NCBI GEO series matrix files (GSE..._series_matrix.txt, usually .gz): `!Series_` and `!Sample_`
 * header lines (tab-separated, values in double quotes), then the expression table between
 * `!series_matrix_table_begin` and `!series_matrix_table_end`, whose first column is ID_REF (the
 * probe) and whose header names the samples (GSM accessions). The `!Sample_` lines become column
 * annotations: each under its own name without the "!" ("Sample_title", a repeated line as
 * "Sample_characteristics_ch1#2"), and every "key: value" of a `!Sample_characteristics_` line
 * also under its key ("tissue", "age"), which is what phenotype and class tables use.
 */
#include "read_internal.h"

#include <string.h>

static const char knnwb_geo_table_begin[] = "!series_matrix_table_begin";
static const char knnwb_geo_table_end[] = "!series_matrix_table_end";

/* One !Sample_ line, kept until the table says how many samples there are. */
typedef struct {
  char *key;         /* "Sample_title", "Sample_characteristics_ch1#2" */
  gboolean features; /* a characteristics line: values are "key: value" */
  GPtrArray *values;
  size_t line;
} KnnwbGeoSampleLine;

static void knnwb_geo_sample_line_free(gpointer data)
{
  KnnwbGeoSampleLine *sample_line = data;
  g_free(sample_line->key);
  g_ptr_array_unref(sample_line->values);
  g_free(sample_line);
}

static gboolean knnwb_geo_starts_with(const char *line, size_t length, const char *prefix)
{
  size_t n = strlen(prefix);
  return length >= n && memcmp(line, prefix, n) == 0;
}

static gboolean knnwb_geo_is_blank(const char *line, size_t length)
{
  for (size_t i = 0; i < length; i++)
    if (line[i] != ' ' && line[i] != '\t')
      return FALSE;
  return TRUE;
}

/* Keeps a !Sample_ line (already split). Repeated names get "#2", "#3"... */
static void knnwb_geo_keep_sample_line(GPtrArray *sample_lines, GHashTable *seen, GPtrArray *fields,
                                       size_t line)
{
  const char *name = (const char *)g_ptr_array_index(fields, 0) + 1; /* without the "!" */
  guint count = GPOINTER_TO_UINT(g_hash_table_lookup(seen, name)) + 1;
  KnnwbGeoSampleLine *sample_line = g_new0(KnnwbGeoSampleLine, 1);
  sample_line->key = count == 1 ? g_strdup(name) : g_strdup_printf("%s#%u", name, count);
  g_hash_table_insert(seen, g_strdup(name), GUINT_TO_POINTER(count));
  sample_line->features = g_str_has_prefix(name, "Sample_characteristics");
  sample_line->values = g_ptr_array_new_with_free_func(g_free);
  for (guint f = 1; f < fields->len; f++)
    g_ptr_array_add(sample_line->values, g_strdup(g_ptr_array_index(fields, f)));
  /* Trailing empty fields (a trailing tab) are not samples. */
  while (sample_line->values->len > 0 &&
         *(const char *)g_ptr_array_index(sample_line->values, sample_line->values->len - 1) ==
             '\0')
    g_ptr_array_remove_index(sample_line->values, sample_line->values->len - 1);
  sample_line->line = line;
  g_ptr_array_add(sample_lines, sample_line);
}

/* The sample lines as column annotations of matrix (n_cols samples). */
static gboolean knnwb_geo_annotate(const char *path, GPtrArray *sample_lines, KnnwbMatrix *matrix,
                                   GError **error)
{
  for (guint s = 0; s < sample_lines->len; s++) {
    const KnnwbGeoSampleLine *sample_line = g_ptr_array_index(sample_lines, s);
    if (sample_line->values->len != matrix->n_cols) {
      knnwb_formats_parse_error(
          error, path, sample_line->line, 0, "!%s has %u value%s but the table has %zu sample%s",
          sample_line->key, sample_line->values->len, KNNWB_PLURAL(sample_line->values->len),
          matrix->n_cols, KNNWB_PLURAL(matrix->n_cols));
      return FALSE;
    }
    for (size_t j = 0; j < matrix->n_cols; j++) {
      const char *value = g_ptr_array_index(sample_line->values, j);
      knnwb_matrix_set_annotation(matrix, KNNWB_MATRIX_COLUMNS, sample_line->key, j, value);
      const char *colon = sample_line->features ? strstr(value, ": ") : NULL;
      if (colon != NULL && colon > value) {
        g_autofree char *key = g_strndup(value, (size_t)(colon - value));
        g_strstrip(key);
        const char *const *existing = knnwb_matrix_annotation(matrix, KNNWB_MATRIX_COLUMNS, key);
        /* The first line that names a key for this sample wins. */
        if (*key != '\0' && (existing == NULL || existing[j] == NULL))
          knnwb_matrix_set_annotation(matrix, KNNWB_MATRIX_COLUMNS, key, j, colon + 2);
      }
    }
    if (g_str_equal(sample_line->key, "Sample_geo_accession") && matrix->col_labels != NULL)
      for (size_t j = 0; j < matrix->n_cols; j++)
        if (strcmp(g_ptr_array_index(sample_line->values, j), matrix->col_labels[j]) != 0) {
          knnwb_formats_parse_error(
              error, path, sample_line->line, 0,
              "!Sample_geo_accession names sample %zu '%s' but the table's column %zu is '%s'",
              j + 1, (const char *)g_ptr_array_index(sample_line->values, j), j + 2,
              matrix->col_labels[j]);
          return FALSE;
        }
  }
  return TRUE;
}

/* The header lines up to !series_matrix_table_begin; the !Sample_ ones are kept in sample_lines
 * for the column annotations. */
static gboolean knnwb_geo_read_header_lines(KnnwbTextInput *input, const char *path,
                                            GPtrArray *sample_lines, GError **error)
{
  g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  g_autoptr(GPtrArray) fields = g_ptr_array_new_with_free_func(g_free);
  const char *line;
  size_t length;
  gboolean any_header = FALSE;
  for (;;) {
    int got = knnwb_text_input_next_line(input, &line, &length, error);
    if (got < 0)
      return FALSE;
    if (got == 0) {
      knnwb_formats_parse_error(error, path, MAX(input->line_number, 1), 0,
                                any_header ? "no %s line: the series matrix has no data table"
                                           : "the file is empty (a GEO series matrix starts with "
                                             "!Series_ lines, then %s)",
                                knnwb_geo_table_begin);
      return FALSE;
    }
    if (knnwb_geo_is_blank(line, length))
      continue;
    if (knnwb_geo_starts_with(line, length, knnwb_geo_table_begin))
      return TRUE;
    if (line[0] != '!') {
      g_autofree char *shown = knnwb_formats_quote_field(line, MIN(length, 40));
      knnwb_formats_parse_error(error, path, input->line_number, 1,
                                "expected a !Series_ or !Sample_ header line or %s, found %s",
                                knnwb_geo_table_begin, shown);
      return FALSE;
    }
    any_header = TRUE;
    if (!knnwb_geo_starts_with(line, length, "!Sample_"))
      continue; /* series-level lines describe the study, not the samples */
    size_t sample_line_number = input->line_number;
    g_ptr_array_set_size(fields, 0);
    if (!knnwb_formats_split_record(input, '\t', &line, &length, fields, error))
      return FALSE;
    knnwb_geo_keep_sample_line(sample_lines, seen, fields, sample_line_number);
  }
}

/* The table's header: ID_REF, then the sample names (into fields, trailing empty ones cut). */
static gboolean knnwb_geo_read_table_header(KnnwbTextInput *input, const char *path,
                                            GPtrArray *fields, GError **error)
{
  size_t begin_line = input->line_number;
  const char *line;
  size_t length;
  int got;
  do {
    got = knnwb_text_input_next_line(input, &line, &length, error);
  } while (got > 0 && knnwb_geo_is_blank(line, length));
  if (got < 0)
    return FALSE;
  if (got == 0 || knnwb_geo_starts_with(line, length, knnwb_geo_table_end)) {
    knnwb_formats_parse_error(error, path, got == 0 ? begin_line : input->line_number, 0,
                              "the data table is empty: no ID_REF header after %s",
                              knnwb_geo_table_begin);
    return FALSE;
  }
  size_t header_line = input->line_number;
  if (!knnwb_formats_split_record(input, '\t', &line, &length, fields, error))
    return FALSE;
  while (fields->len > 1 && *(const char *)g_ptr_array_index(fields, fields->len - 1) == '\0')
    g_ptr_array_remove_index(fields, fields->len - 1);
  if (g_ascii_strcasecmp(g_ptr_array_index(fields, 0), "ID_REF") != 0) {
    g_autofree char *shown = knnwb_formats_quote_field(g_ptr_array_index(fields, 0),
                                                       strlen(g_ptr_array_index(fields, 0)));
    knnwb_formats_parse_error(error, path, header_line, 1,
                              "expected the table header \"ID_REF\", then the sample names; "
                              "found %s",
                              shown);
    return FALSE;
  }
  if (fields->len < 2) {
    knnwb_formats_parse_error(error, path, header_line, 0,
                              "the table header names no samples after ID_REF");
    return FALSE;
  }
  return TRUE;
}

/* The rows up to !series_matrix_table_end (its line into *end_line), then nothing but blank
 * lines. */
static gboolean knnwb_geo_read_table(KnnwbTextInput *input, const char *path,
                                     const KnnwbDelimitedLayout *layout,
                                     KnnwbMatrixBuilder *builder, KnnwbReadInfo *info,
                                     size_t *end_line, GError **error)
{
  if (!knnwb_formats_read_delimited_rows(input, layout, builder, info, error))
    return FALSE;
  if (!*layout->end_marker_seen) {
    knnwb_formats_parse_error(error, path, input->line_number, 0,
                              "the file ends inside the data table: no %s line (truncated?)",
                              knnwb_geo_table_end);
    return FALSE;
  }
  *end_line = input->line_number;
  const char *line;
  size_t length;
  int got;
  while ((got = knnwb_text_input_next_line(input, &line, &length, error)) > 0)
    if (!knnwb_geo_is_blank(line, length)) {
      knnwb_formats_parse_error(error, path, input->line_number, 1,
                                "text after %s (line %zu): one table per file", knnwb_geo_table_end,
                                *end_line);
      return FALSE;
    }
  if (got < 0)
    return FALSE;
  if (builder->n_rows == 0) {
    knnwb_formats_parse_error(error, path, *end_line, 0, "the data table has no rows");
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_formats_read_geo(const char *path, const KnnwbReadOptions *options,
                                KnnwbMatrix **out, KnnwbReadInfo *info, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return FALSE;
  knnwb_text_input_watch(&input, options);
  gboolean ok = FALSE;
  KnnwbMatrixBuilder builder = {0};
  g_autoptr(GPtrArray) sample_lines = g_ptr_array_new_with_free_func(knnwb_geo_sample_line_free);
  g_autoptr(GPtrArray) fields = g_ptr_array_new_with_free_func(g_free);
  g_autofree guint8 *kinds = NULL;
  if (!knnwb_geo_read_header_lines(&input, path, sample_lines, error) ||
      !knnwb_geo_read_table_header(&input, path, fields, error))
    goto out;
  size_t n_fields = fields->len;
  kinds = g_new0(guint8, n_fields);
  kinds[0] = KNNWB_COLUMN_LABEL;
  knnwb_matrix_builder_init(&builder, n_fields - 1, TRUE);
  if (options->rank_rows)
    knnwb_matrix_builder_keep_ranks(&builder, options->transpose);
  builder.col_labels = g_ptr_array_new_with_free_func(g_free);
  for (guint f = 1; f < n_fields; f++)
    g_ptr_array_add(builder.col_labels, g_strdup(g_ptr_array_index(fields, f)));
  gboolean end_seen = FALSE;
  KnnwbDelimitedLayout layout = {.delimiter = '\t',
                                 .kinds = kinds,
                                 .n_fields = n_fields,
                                 .missing = options->missing,
                                 .expected_rows = SIZE_MAX,
                                 .end_marker = knnwb_geo_table_end,
                                 .end_marker_seen = &end_seen,
                                 .trailing_empty = TRUE /* as in the header above */};
  size_t end_line = 0;
  if (!knnwb_geo_read_table(&input, path, &layout, &builder, info, &end_line, error) ||
      !knnwb_matrix_builder_finish_rows(&builder, path, end_line, info, out, error))
    goto out;
  if (!knnwb_geo_annotate(path, sample_lines, *out, error)) {
    g_clear_pointer(out, knnwb_matrix_free);
    goto out;
  }
  ok = TRUE;
out:
  knnwb_matrix_builder_clear(&builder);
  knnwb_text_input_close(&input);
  return ok;
}
