/* Known classes for the points: one column of an annotation table, rows matched by label. */
#include <string.h>
#include <knnwb/annotation.h>
#include <knnwb/error.h>
#include <knnwb/text_fields.h>
#include "read_internal.h"

gboolean knnwb_formats_read_annotation(const char *path, const char *column,
                                       const char *const *labels, size_t n,
                                       igraph_vector_int_t *classes, char ***class_names,
                                       size_t *n_matched, GError **error)
{
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(path, error);
  return table != NULL && knnwb_formats_annotation_classes(table, NULL, column, labels, n, classes,
                                                           class_names, n_matched, NULL, error);
}

/* The table's column index of name: a header name or a 1-based number; the names' column is not
 * one of values. */
static gboolean knnwb_annotation_value_column(const KnnwbAnnotationTable *table, const char *column,
                                              size_t id, size_t *wanted, GError **error)
{
  guint64 number = 0;
  g_autoptr(GError) by_name = NULL;
  if (!knnwb_annotation_column(table, column, wanted, &by_name)) {
    if (!g_ascii_string_to_unsigned(column, 10, 1, table->n_columns, &number, NULL)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s:%zu: no annotation column '%s' (give a header name or a number from 2 to "
                  "%zu; the first column holds the row names)",
                  table->path, table->header_line, column, table->n_columns);
      return FALSE;
    }
    *wanted = (size_t)number - 1;
  }
  if (*wanted == id) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s:%zu: column '%s' holds the row names, not classes", table->path,
                table->header_line, column);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_formats_annotation_classes(const KnnwbAnnotationTable *table, const char *id_column,
                                          const char *column, const char *const *labels, size_t n,
                                          igraph_vector_int_t *classes, char ***class_names,
                                          size_t *n_matched, size_t *n_named, GError **error)
{
  size_t wanted = 0, id = 0;
  if (!knnwb_annotation_column(table, id_column, &id, error) ||
      !knnwb_annotation_value_column(table, column, id, &wanted, error))
    return FALSE;
  g_autoptr(GHashTable) value_of = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < table->n_records; i++) {
    const char *name = knnwb_annotation_field(table, i, id);
    if (g_hash_table_contains(value_of, name)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: row name '%s' appears twice",
                  table->path, table->line[i], name);
      return FALSE;
    }
    g_hash_table_insert(value_of, (gpointer)name,
                        (gpointer)knnwb_annotation_field(table, i, wanted));
  }
  if (igraph_vector_int_resize(classes, (igraph_integer_t)n) != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %zu classes", n);
    return FALSE;
  }
  g_autoptr(GHashTable) id_of = g_hash_table_new(g_str_hash, g_str_equal);
  GPtrArray *names = g_ptr_array_new();
  size_t matched = 0, named = 0;
  for (size_t v = 0; v < n; v++) {
    char scratch[32];
    const char *label = labels ? labels[v] : NULL;
    if (!label) {
      g_snprintf(scratch, sizeof scratch, "%zu", v);
      label = scratch;
    }
    const char *value = g_hash_table_lookup(value_of, label);
    named += value != NULL;
    /* NA, N/A, NaN, null and empty: no class (the point is left out of the comparison). */
    if (!value || knnwb_formats_is_missing_token(value, strlen(value))) {
      VECTOR(*classes)[v] = -1;
      continue;
    }
    gpointer class_id;
    if (!g_hash_table_lookup_extended(id_of, value, NULL, &class_id)) {
      class_id = GINT_TO_POINTER(names->len);
      g_hash_table_insert(id_of, (gpointer)value, class_id);
      g_ptr_array_add(names, g_strdup(value));
    }
    VECTOR(*classes)[v] = GPOINTER_TO_INT(class_id);
    matched++;
  }
  g_ptr_array_add(names, NULL);
  char **owned = (char **)g_ptr_array_free(names, FALSE);
  if (class_names)
    *class_names = owned;
  else
    g_strfreev(owned);
  if (n_matched)
    *n_matched = matched;
  if (n_named)
    *n_named = named;
  return TRUE;
}
