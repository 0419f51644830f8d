/* Known classes for the points: one column of an annotation table, rows matched by label. */
#include <knnwb/annotation.h>
#include "read_internal.h"

gboolean knnwb_formats_read_annotation(const char *path, const char *column,
                                       const char *const *labels, size_t n,
                                       igraph_vector_int_t *classes, char ***class_names,
                                       size_t *n_matched, GError **error)
{
  g_autoptr(KnnwbAnnotationTable) table = knnwb_annotation_read(path, error);
  if (!table)
    return FALSE;
  size_t wanted = 0;
  guint64 number = 0;
  g_autoptr(GError) by_name = NULL;
  if (!knnwb_annotation_column(table, column, &wanted, &by_name)) {
    if (!g_ascii_string_to_unsigned(column, 10, 1, table->n_columns, &number, NULL)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                  "%s:%zu: no annotation column '%s' (give a header name or a number from 2 to "
                  "%zu; the first column holds the row names)",
                  path, table->header_line, column, table->n_columns);
      return FALSE;
    }
    wanted = (size_t)number - 1;
  }
  if (wanted == 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                "%s:%zu: column '%s' holds the row names, not classes", path, table->header_line,
                column);
    return FALSE;
  }
  g_autoptr(GHashTable) value_of = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < table->n_records; i++) {
    const char *name = knnwb_annotation_field(table, i, 0);
    if (g_hash_table_contains(value_of, name)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%zu: row name '%s' appears twice",
                  path, table->line[i], name);
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
  size_t matched = 0;
  for (size_t v = 0; v < n; v++) {
    char scratch[32];
    const char *label = labels ? labels[v] : NULL;
    if (!label) {
      g_snprintf(scratch, sizeof scratch, "%zu", v);
      label = scratch;
    }
    const char *value = g_hash_table_lookup(value_of, label);
    if (!value || value[0] == '\0' || g_str_equal(value, "NA")) {
      VECTOR(*classes)[v] = -1;
      continue;
    }
    gpointer id;
    if (!g_hash_table_lookup_extended(id_of, value, NULL, &id)) {
      id = GINT_TO_POINTER(names->len);
      g_hash_table_insert(id_of, (gpointer)value, id);
      g_ptr_array_add(names, g_strdup(value));
    }
    VECTOR(*classes)[v] = GPOINTER_TO_INT(id);
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
  return TRUE;
}
