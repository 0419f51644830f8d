/* Annotation tables (TSV/CSV with a header): sample sheets, phenotypes, class labels. */
#include <string.h>
#include <knnwb/annotation.h>
#include <knnwb/error.h>
#include <knnwb/matrix.h>
#include <knnwb/text_fields.h>
#include "read_internal.h"

void knnwb_annotation_free(KnnwbAnnotationTable *table)
{
  if (table == NULL)
    return;
  g_free(table->path);
  g_free(table->header);
  g_free(table->fields);
  g_free(table->line);
  if (table->strings != NULL)
    g_string_chunk_free(table->strings);
  g_free(table);
}

/* Blank lines separate nothing in a table: skip them (a line of only blanks counts as blank).
 * Lines that start with '#' are comments (Biobase's pData files describe their columns so), except
 * before the header a '#' line with a tab, which is the header (QIIME's "#SampleID\t..."). */
static int knnwb_annotation_next_record(KnnwbTextInput *input, gboolean header, const char **line,
                                        size_t *length, GError **error)
{
  for (;;) {
    int got = knnwb_text_input_next_line(input, line, length, error);
    if (got <= 0)
      return got;
    if (*length > 0 && (*line)[0] == '#' && (!header || memchr(*line, '\t', *length) == NULL))
      continue;
    for (size_t i = 0; i < *length; i++)
      if ((*line)[i] != ' ' && (*line)[i] != '\t' && (*line)[i] != '\r')
        return 1;
  }
}

/* Splits the current record into trimmed fields stored in the table's chunk. */
static gboolean knnwb_annotation_split(KnnwbTextInput *input, char delimiter,
                                       KnnwbAnnotationTable *table, const char **line,
                                       size_t *length, GPtrArray *fields, GError **error)
{
  size_t line_number = input->line_number;
  g_ptr_array_set_size(fields, 0);
  g_autoptr(GPtrArray) raw = g_ptr_array_new_with_free_func(g_free);
  if (!knnwb_formats_split_record(input, delimiter, line, length, raw, error))
    return FALSE;
  if (memchr(*line, '\0', *length) != NULL) {
    knnwb_formats_parse_error(error, input->path, line_number, 0,
                              "NUL byte in the table (binary file?)");
    return FALSE;
  }
  for (guint i = 0; i < raw->len; i++) {
    char *field = g_strstrip((char *)g_ptr_array_index(raw, i));
    if (!g_utf8_validate(field, -1, NULL)) {
      knnwb_formats_parse_error(error, input->path, line_number, 0, "field %u is not valid UTF-8",
                                i + 1);
      return FALSE;
    }
    g_ptr_array_add(fields, g_string_chunk_insert(table->strings, field));
  }
  return TRUE;
}

KnnwbAnnotationTable *knnwb_annotation_read(const char *path, GError **error)
{
  KnnwbTextInput input;
  if (!knnwb_text_input_open(&input, path, error))
    return NULL;
  g_autoptr(KnnwbAnnotationTable) table = g_new0(KnnwbAnnotationTable, 1);
  table->path = g_strdup(path);
  table->strings = g_string_chunk_new(64 * 1024);
  g_autoptr(GPtrArray) fields = g_ptr_array_new();
  g_autoptr(GPtrArray) all = g_ptr_array_new();
  g_autoptr(GArray) lines = g_array_new(FALSE, FALSE, sizeof(size_t));
  gboolean ok = FALSE;
  const char *line;
  size_t length;
  int got = knnwb_annotation_next_record(&input, TRUE, &line, &length, error);
  if (got <= 0) {
    if (got == 0)
      knnwb_formats_parse_error(error, path, MAX(input.line_number, 1), 0,
                                "the table is empty (expected a header line, then one line per "
                                "sample)");
    goto out;
  }
  /* The header decides the delimiter: a sample sheet with a tab is TSV whatever its name. */
  char delimiter = memchr(line, '\t', length) != NULL ? '\t' : ',';
  /* A header of one name (R's write.table of a one-column data frame) leaves it to the first
   * line of values. */
  gboolean delimiter_open = delimiter == ',' && memchr(line, ',', length) == NULL;
  table->header_line = input.line_number;
  if (!knnwb_annotation_split(&input, delimiter, table, &line, &length, fields, error))
    goto out;
  table->n_columns = fields->len;
  table->header = g_new(char *, table->n_columns);
  for (size_t j = 0; j < table->n_columns; j++) {
    table->header[j] = g_ptr_array_index(fields, j);
    /* The first column (the names) may be unnamed, as R writes it. */
    if (j > 0 && *table->header[j] == '\0') {
      knnwb_formats_parse_error(error, path, table->header_line, 0, "column %zu has no name",
                                j + 1);
      goto out;
    }
    for (size_t i = 0; i < j; i++)
      if (*table->header[j] != '\0' && strcmp(table->header[i], table->header[j]) == 0) {
        knnwb_formats_parse_error(error, path, table->header_line, 0,
                                  "column name '%s' appears twice (columns %zu and %zu)",
                                  table->header[j], i + 1, j + 1);
        goto out;
      }
  }
  for (;;) {
    got = knnwb_annotation_next_record(&input, FALSE, &line, &length, error);
    if (got < 0)
      goto out;
    if (got == 0)
      break;
    size_t record_line = input.line_number;
    if (delimiter_open)
      delimiter = memchr(line, '\t', length) != NULL ? '\t' : ',';
    delimiter_open = FALSE;
    if (!knnwb_annotation_split(&input, delimiter, table, &line, &length, fields, error))
      goto out;
    if (lines->len == 0 && fields->len == table->n_columns + 1) {
      /* R's write.table (row.names = TRUE, the default) leaves the row names' column out of the
       * header: every line has one field more (a one-column data frame has a one-name header).
       * That column is the names, as the first is. */
      char **header = g_new(char *, table->n_columns + 1);
      header[0] = g_string_chunk_insert(table->strings, "");
      memcpy(header + 1, table->header, table->n_columns * sizeof *header);
      g_free(table->header);
      table->header = header;
      table->n_columns++;
    }
    if (fields->len != table->n_columns) {
      knnwb_formats_parse_error(error, path, record_line, 0,
                                "the line has %u fields, the header on line %zu has %zu",
                                fields->len, table->header_line, table->n_columns);
      goto out;
    }
    for (guint j = 0; j < fields->len; j++)
      g_ptr_array_add(all, g_ptr_array_index(fields, j));
    g_array_append_val(lines, record_line);
  }
  if (table->n_columns < 2) {
    knnwb_formats_parse_error(error, path, table->header_line, 0,
                              "the header has %zu column; a table needs a column of names and at "
                              "least one column of values (tab- or comma-separated)",
                              table->n_columns);
    goto out;
  }
  table->n_records = lines->len;
  table->line = (size_t *)(void *)g_array_free(g_steal_pointer(&lines), FALSE);
  table->fields = (char **)g_ptr_array_free(g_steal_pointer(&all), FALSE);
  ok = TRUE;
out:
  knnwb_text_input_close(&input);
  return ok ? g_steal_pointer(&table) : NULL;
}

gboolean knnwb_annotation_column(const KnnwbAnnotationTable *table, const char *name,
                                 size_t *column, GError **error)
{
  if (name == NULL || *name == '\0') {
    *column = 0;
    return TRUE;
  }
  for (size_t j = 0; j < table->n_columns; j++)
    if (strcmp(table->header[j], name) == 0) {
      *column = j;
      return TRUE;
    }
  g_autoptr(GString) names = g_string_new(NULL);
  for (size_t j = 0; j < table->n_columns && j < 20; j++)
    g_string_append_printf(names, "%s'%s'", j ? ", " : "", table->header[j]);
  if (table->n_columns > 20)
    g_string_append(names, ", ...");
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
              "%s:%zu: no column '%s' in the header (columns: %s)", table->path, table->header_line,
              name, names->str);
  return FALSE;
}

gboolean knnwb_annotation_parse_spec(const char *spec, char **path, char **column, GError **error)
{
  const char *colon = spec ? strrchr(spec, ':') : NULL;
  if (colon == NULL || colon == spec || colon[1] == '\0') {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "'%s' is not TABLE:COLUMN (a table file, a colon, a column name of its header)",
                spec ? spec : "");
    return FALSE;
  }
  *path = g_strndup(spec, (gsize)(colon - spec));
  *column = g_strdup(colon + 1);
  return TRUE;
}

KnnwbAnnotationTable *knnwb_annotation_from_matrix(const KnnwbMatrix *matrix, KnnwbMatrixAxis axis,
                                                   const char *key, const char *name,
                                                   GError **error)
{
  const char *const *values = knnwb_matrix_annotation(matrix, axis, key);
  if (values == NULL) {
    g_autofree const char **keys = knnwb_matrix_annotation_keys(matrix, axis);
    g_autoptr(GString) names = g_string_new(NULL);
    for (size_t k = 0; keys[k] != NULL; k++)
      if (k < 40) {
        /* Names come from the file: shown quoted, controls escaped. */
        g_autofree char *shown = knnwb_formats_quote_field(keys[k], strlen(keys[k]));
        g_string_append_printf(names, "%s%s", k ? ", " : "", shown);
      } else if (k == 40)
        g_string_append(names, ", ...");
    g_autofree char *shown = knnwb_formats_quote_field(key, strlen(key));
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: no sample annotation %s %s (%s%s); a table's column is TABLE:COLUMN", name,
                shown, axis == KNNWB_MATRIX_ROWS ? "on the rows" : "on the columns",
                names->len ? "available: " : "the input has none", names->str);
    return NULL;
  }
  const size_t n = axis == KNNWB_MATRIX_ROWS ? matrix->n_rows : matrix->n_cols;
  char *const *labels = axis == KNNWB_MATRIX_ROWS ? matrix->row_labels : matrix->col_labels;
  g_autoptr(KnnwbAnnotationTable) table = g_new0(KnnwbAnnotationTable, 1);
  table->path = g_strdup(name);
  table->strings = g_string_chunk_new(4096);
  table->n_columns = 2;
  table->n_records = n;
  table->header = g_new(char *, 2);
  table->header[0] = g_string_chunk_insert(table->strings, "");
  table->header[1] = g_string_chunk_insert(table->strings, key);
  table->fields = g_new(char *, MAX(2 * n, (size_t)1));
  table->line = g_new(size_t, MAX(n, (size_t)1));
  for (size_t i = 0; i < n; i++) {
    char scratch[32];
    const char *label = labels != NULL ? labels[i] : NULL;
    if (label == NULL) {
      g_snprintf(scratch, sizeof scratch, "%zu", i);
      label = scratch;
    }
    table->fields[2 * i] = g_string_chunk_insert(table->strings, label);
    /* The surrounding blanks go, as a table's fields lose them. */
    g_autofree char *value = g_strstrip(g_strdup(values[i] ? values[i] : ""));
    table->fields[2 * i + 1] = g_string_chunk_insert(table->strings, value);
    table->line[i] = i + 1; /* the sample's number, counted from 1, for messages */
  }
  return g_steal_pointer(&table);
}
