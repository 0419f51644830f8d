/* Class labels of rows: from an annotation table column, or the matrix's own row classes. */
#include <string.h>
#include <knnwb/classify.h>
#include <knnwb/error.h>
#include <knnwb/text_fields.h>

void knnwb_classes_free(KnnwbClasses *classes)
{
  if (classes == NULL)
    return;
  g_strfreev(classes->names);
  g_free(classes->of);
  g_free(classes);
}

static gboolean knnwb_classes_unknown(const char *value)
{
  return value == NULL || *value == '\0' || g_ascii_strcasecmp(value, "NA") == 0 ||
         g_ascii_strcasecmp(value, "N/A") == 0 || g_ascii_strcasecmp(value, "NaN") == 0;
}

static gint knnwb_classes_compare(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Class ids from one name per row (NULL or NA = unknown): names sorted, so ids do not depend on
 * the row order. */
static KnnwbClasses *knnwb_classes_build(const char *const *values, size_t n)
{
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  g_autoptr(GPtrArray) names = g_ptr_array_new();
  for (size_t i = 0; i < n; i++)
    if (!knnwb_classes_unknown(values[i]) && g_hash_table_add(seen, (gpointer)values[i]))
      g_ptr_array_add(names, (gpointer)values[i]);
  g_ptr_array_sort(names, knnwb_classes_compare);
  KnnwbClasses *classes = g_new0(KnnwbClasses, 1);
  classes->n_rows = n;
  classes->n_classes = names->len;
  classes->names = g_new0(char *, names->len + 1);
  g_autoptr(GHashTable) id = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint c = 0; c < names->len; c++) {
    classes->names[c] = g_strdup(g_ptr_array_index(names, c));
    g_hash_table_insert(id, g_ptr_array_index(names, c), GUINT_TO_POINTER(c + 1));
  }
  classes->of = g_new(int32_t, MAX(n, (size_t)1));
  for (size_t i = 0; i < n; i++)
    classes->of[i] = knnwb_classes_unknown(values[i])
                         ? -1
                         : (int32_t)GPOINTER_TO_UINT(g_hash_table_lookup(id, values[i])) - 1;
  return classes;
}

gboolean knnwb_classes_from_rows(const KnnwbMatrix *data, KnnwbClasses **classes, GError **error)
{
  if (data->row_classes == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the matrix has no class labels: give a table (--classes TABLE:COLUMN), or read a "
                "CIBM file with <SamplesClasses> transposed (--transpose)");
    return FALSE;
  }
  *classes = knnwb_classes_build((const char *const *)data->row_classes, data->n_rows);
  return TRUE;
}

gboolean knnwb_classes_from_table(const KnnwbMatrix *data, const KnnwbAnnotationTable *table,
                                  const char *id_column, const char *class_column,
                                  KnnwbClasses **classes, GError **error)
{
  if (data->row_labels == NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: the matrix has no row labels to match the table to (samples as rows: "
                "--transpose)",
                table->path);
    return FALSE;
  }
  size_t id, column;
  if (!knnwb_annotation_column(table, id_column, &id, error) ||
      !knnwb_annotation_column(table, class_column, &column, error))
    return FALSE;
  const size_t n = data->n_rows;
  g_autoptr(GHashTable) rows = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = n; i-- > 0;)
    if (data->row_labels[i] != NULL)
      g_hash_table_insert(rows, data->row_labels[i], GSIZE_TO_POINTER(i + 1));
  g_autofree size_t *record_of = g_new0(size_t, MAX(n, (size_t)1));
  g_autofree const char **values = g_new0(const char *, MAX(n, (size_t)1));
  g_autoptr(GString) problems = g_string_new(NULL);
  size_t n_problems = 0, n_extra = 0;
  const char *first_extra = NULL;
  size_t first_extra_line = 0;
  for (size_t r = 0; r < table->n_records; r++) {
    const char *name = knnwb_annotation_field(table, r, id);
    gpointer hit = g_hash_table_lookup(rows, name);
    if (hit == NULL) {
      if (n_extra++ == 0) {
        first_extra = name;
        first_extra_line = table->line[r];
      }
      continue;
    }
    size_t i = GPOINTER_TO_SIZE(hit) - 1;
    if (record_of[i] != 0) {
      if (n_problems++ < 40)
        g_string_append_printf(problems, "\n%s:%zu: '%s' is listed twice (first on line %zu)",
                               table->path, table->line[r], name, table->line[record_of[i] - 1]);
      continue;
    }
    record_of[i] = r + 1;
    values[i] = knnwb_annotation_field(table, r, column);
  }
  size_t matched = 0;
  for (size_t i = 0; i < n; i++)
    matched += record_of[i] != 0;
  if (matched == 0 && n > 0 && table->n_records > 0) {
    /* Nothing matches: one sentence with both sides' names, not a line per row (a GEO matrix's
     * GSM ids against a sheet of sample titles said the same thing 100 times). */
    const char *first = knnwb_matrix_row_label(data, 0);
    const char *second = n > 1 ? knnwb_matrix_row_label(data, 1) : NULL;
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "%s: none of the matrix's %zu rows is named in the table's column '%s': the "
                "rows are named like '%s'%s%s%s, the column holds '%s'%s%s%s (another column of "
                "names: --classes-id; samples as rows: --transpose)",
                table->path, n, table->header[id], first ? first : "", n > 1 ? ", '" : "",
                second ? second : "", n > 1 ? "'" : "", knnwb_annotation_field(table, 0, id),
                table->n_records > 1 ? ", '" : "",
                table->n_records > 1 ? knnwb_annotation_field(table, 1, id) : "",
                table->n_records > 1 ? "'" : "");
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    if (record_of[i] == 0 && n_problems++ < 40)
      g_string_append_printf(problems, "\n%s: row '%s' is not in the table's column '%s'",
                             table->path, data->row_labels[i] ? data->row_labels[i] : "",
                             table->header[id]);
  if (n_problems > 0) {
    if (n_problems > 40)
      g_string_append_printf(problems, "\n%s: ... and %zu more", table->path, n_problems - 40);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "the class table does not match the rows (%zu problem%s; a row of unknown class "
                "is listed with an empty or NA class):%s",
                n_problems, KNNWB_PLURAL(n_problems), problems->str);
    return FALSE;
  }
  if (n_extra > 0)
    g_warning("%zu name%s of the class table %s not rows of the matrix and ignored (the first: "
              "%s:%zu: '%s')",
              n_extra, KNNWB_PLURAL(n_extra), n_extra == 1 ? "is" : "are", table->path,
              first_extra_line, first_extra);
  *classes = knnwb_classes_build(values, n);
  size_t n_unknown = 0;
  for (size_t i = 0; i < n; i++)
    n_unknown += (*classes)->of[i] < 0;
  if (n_unknown > 0 && n_unknown < n)
    g_warning("%s: %zu of the %zu rows have no class in column '%s' (NA, empty or NaN): they are "
              "predicted from the labelled rows and not scored",
              table->path, n_unknown, n, table->header[column]);
  return TRUE;
}

void knnwb_classes_match_by_label(const KnnwbMatrix *query, const KnnwbMatrix *labelled,
                                  const KnnwbClasses *classes, int32_t *out)
{
  g_autoptr(GHashTable) rows = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = labelled->n_rows; labelled->row_labels != NULL && i-- > 0;)
    if (labelled->row_labels[i] != NULL)
      g_hash_table_insert(rows, labelled->row_labels[i], GSIZE_TO_POINTER(i + 1));
  for (size_t i = 0; i < query->n_rows; i++) {
    const char *label = knnwb_matrix_row_label(query, i);
    gpointer hit = label ? g_hash_table_lookup(rows, label) : NULL;
    out[i] = hit ? classes->of[GPOINTER_TO_SIZE(hit) - 1] : -1;
  }
}

gboolean knnwb_classes_match_table(const KnnwbMatrix *query, const KnnwbAnnotationTable *table,
                                   const char *id_column, const char *class_column,
                                   const KnnwbClasses *classes, int32_t *out, size_t *n_unseen,
                                   GError **error)
{
  size_t id, column;
  if (!knnwb_annotation_column(table, id_column, &id, error) ||
      !knnwb_annotation_column(table, class_column, &column, error))
    return FALSE;
  g_autoptr(GHashTable) value_of = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t r = table->n_records; r-- > 0;)
    g_hash_table_insert(value_of, (gpointer)knnwb_annotation_field(table, r, id),
                        (gpointer)knnwb_annotation_field(table, r, column));
  g_autoptr(GHashTable) class_of = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t c = 0; c < classes->n_classes; c++)
    g_hash_table_insert(class_of, classes->names[c], GSIZE_TO_POINTER(c + 1));
  size_t unseen = 0;
  for (size_t i = 0; i < query->n_rows; i++) {
    const char *label = knnwb_matrix_row_label(query, i);
    const char *value = label ? g_hash_table_lookup(value_of, label) : NULL;
    out[i] = -1;
    if (knnwb_classes_unknown(value))
      continue;
    gpointer hit = g_hash_table_lookup(class_of, value);
    if (hit == NULL)
      unseen++;
    else
      out[i] = (int32_t)GPOINTER_TO_SIZE(hit) - 1;
  }
  if (n_unseen != NULL)
    *n_unseen = unseen;
  return TRUE;
}

void knnwb_classes_warn_single(const KnnwbClasses *classes)
{
  g_autofree size_t *count = g_new0(size_t, MAX(classes->n_classes, (size_t)1));
  for (size_t i = 0; i < classes->n_rows; i++)
    if (classes->of[i] >= 0)
      count[classes->of[i]]++;
  g_autoptr(GString) single = g_string_new(NULL);
  size_t n_single = 0;
  for (size_t c = 0; c < classes->n_classes; c++)
    if (count[c] == 1 && n_single++ < 10) {
      /* Class names come from the data: quoted, controls escaped. */
      g_autofree char *shown =
          knnwb_formats_quote_field(classes->names[c], strlen(classes->names[c]));
      g_string_append_printf(single, "%s%s", single->len ? ", " : "", shown);
    }
  if (n_single > 0)
    g_warning("%zu class%s with one labelled row (%s%s): a row is never predicted as a class "
              "that has no other row, so cross-validation scores such a row wrong",
              n_single, n_single == 1 ? "" : "es", single->str, n_single > 10 ? ", ..." : "");
}
