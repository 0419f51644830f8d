/* One column of an annotation table (row name -> class), matched to the points by label. */
#include <string.h>
#include "formats_internal.h"

/* Splits one line into fields at delimiter, honouring double quotes ("" inside quotes is a quote).
 * Returns a GPtrArray of new strings. */
static GPtrArray *knnwb_annotation_split(const char *line, char delimiter)
{
  GPtrArray *fields = g_ptr_array_new_with_free_func(g_free);
  GString *field = g_string_new(NULL);
  gboolean quoted = FALSE;
  for (const char *p = line;; p++) {
    if (*p == '\0' || (!quoted && *p == delimiter)) {
      g_ptr_array_add(fields, g_strdup(g_strstrip(field->str)));
      g_string_truncate(field, 0);
      if (*p == '\0')
        break;
    } else if (*p == '"') {
      if (quoted && p[1] == '"') {
        g_string_append_c(field, '"');
        p++;
      } else
        quoted = !quoted;
    } else
      g_string_append_c(field, *p);
  }
  g_string_free(field, TRUE);
  return fields;
}

gboolean knnwb_formats_read_annotation(const char *path, const char *column,
                                       const char *const *labels, size_t n,
                                       igraph_vector_int_t *classes, char ***class_names,
                                       size_t *n_matched, GError **error)
{
  g_autofree char *text = NULL;
  g_autoptr(GError) local = NULL;
  if (!g_file_get_contents(path, &text, NULL, &local)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_IO, "%s: %s", path, local->message);
    return FALSE;
  }
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int header_line = -1;
  for (int i = 0; lines[i]; i++) {
    g_strchomp(lines[i]);
    if (header_line < 0 && lines[i][0] != '\0')
      header_line = i;
  }
  if (header_line < 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:1: empty annotation table", path);
    return FALSE;
  }
  char delimiter = strchr(lines[header_line], '\t') ? '\t' : ',';
  g_autoptr(GPtrArray) header = knnwb_annotation_split(lines[header_line], delimiter);
  /* The column: a header name, else a 1-based number. */
  int wanted = -1;
  for (guint c = 0; c < header->len; c++)
    if (g_str_equal(g_ptr_array_index(header, c), column)) {
      wanted = (int)c;
      break;
    }
  guint64 number = 0;
  gboolean by_number =
      wanted < 0 && g_ascii_string_to_unsigned(column, 10, 1, G_MAXINT, &number, NULL);
  g_autoptr(GHashTable) value_of = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  int data_fields = -1;
  for (int i = header_line + 1; lines[i]; i++) {
    if (lines[i][0] == '\0')
      continue;
    g_autoptr(GPtrArray) fields = knnwb_annotation_split(lines[i], delimiter);
    if (data_fields < 0) {
      data_fields = (int)fields->len;
      /* R's write.table: the header lacks the row-name column. */
      int shift = data_fields == (int)header->len + 1 ? 1 : 0;
      if (shift == 0 && data_fields != (int)header->len) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%d: %d fields, the header has %u",
                    path, i + 1, data_fields, header->len);
        return FALSE;
      }
      if (wanted >= 0)
        wanted += shift;
      else if (by_number)
        wanted = (int)number - 1;
      if (wanted < 1 || wanted >= data_fields) {
        g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE,
                    "%s:%d: no annotation column '%s' (the header has %u columns; the first "
                    "holds the row names)",
                    path, header_line + 1, column, header->len);
        return FALSE;
      }
    } else if ((int)fields->len != data_fields) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%d: %u fields, expected %d", path,
                  i + 1, fields->len, data_fields);
      return FALSE;
    }
    const char *name = g_ptr_array_index(fields, 0);
    if (g_hash_table_contains(value_of, name)) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%d: row name '%s' appears twice", path,
                  i + 1, name);
      return FALSE;
    }
    g_hash_table_insert(value_of, g_strdup(name),
                        g_strdup((const char *)g_ptr_array_index(fields, wanted)));
  }
  if (data_fields < 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_PARSE, "%s:%d: no rows after the header", path,
                header_line + 1);
    return FALSE;
  }
  igraph_error_t code = igraph_vector_int_resize(classes, (igraph_integer_t)n);
  if (code != IGRAPH_SUCCESS) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY, "cannot allocate %zu classes", n);
    return FALSE;
  }
  g_autoptr(GHashTable) id_of = g_hash_table_new(g_str_hash, g_str_equal);
  GPtrArray *names = g_ptr_array_new();
  size_t matched = 0;
  for (size_t v = 0; v < n; v++) {
    char scratch[32];
    const char *label = labels && labels[v] ? labels[v] : NULL;
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
