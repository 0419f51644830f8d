/* Where a command's sample annotations come from: a table's column (TABLE:COLUMN) or, by a bare
 * name, the input's own annotation (GEO characteristics, AnnData obs columns). */
#include <string.h>
#include <knnwb/error.h>
#include "options.h"

gboolean knnwb_host_annotation_is_bare(const char *spec, const KnnwbMatrix *data,
                                       KnnwbMatrixAxis axis)
{
  return strchr(spec, ':') == NULL ||
         (data != NULL && knnwb_matrix_annotation(data, axis, spec) != NULL);
}

gboolean knnwb_host_annotation_table(const char *spec, const char *option, const KnnwbMatrix *data,
                                     KnnwbMatrixAxis axis, const char *input_name,
                                     KnnwbAnnotationTable **table, char **column, GError **error)
{
  if (spec == NULL || *spec == '\0') {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "%s: give TABLE:COLUMN or the name of a sample annotation of the input", option);
    return FALSE;
  }
  if (knnwb_host_annotation_is_bare(spec, data, axis)) {
    *table =
        knnwb_annotation_from_matrix(data, axis, spec, input_name ? input_name : "INPUT", error);
    if (*table == NULL) {
      g_prefix_error(error, "%s: ", option);
      return FALSE;
    }
    *column = g_strdup(spec);
    return TRUE;
  }
  g_autofree char *path = NULL;
  if (!knnwb_annotation_parse_spec(spec, &path, column, error)) {
    g_prefix_error(error, "%s: ", option);
    return FALSE;
  }
  *table = knnwb_annotation_read(path, error);
  if (*table == NULL) {
    g_clear_pointer(column, g_free);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_host_sample_labels(KnnwbMatrix *data, KnnwbMatrixAxis axis, const char *key,
                                  const char *input_name, GError **error)
{
  const char *const *values = knnwb_matrix_annotation(data, axis, key);
  if (values == NULL) {
    g_autoptr(KnnwbAnnotationTable) none =
        knnwb_annotation_from_matrix(data, axis, key, input_name, error);
    g_prefix_error(error, "--sample-labels: ");
    return FALSE;
  }
  const size_t n = axis == KNNWB_MATRIX_ROWS ? data->n_rows : data->n_cols;
  g_autoptr(GHashTable) seen = g_hash_table_new(g_str_hash, g_str_equal);
  for (size_t i = 0; i < n; i++) {
    if (values[i] == NULL || *values[i] == '\0') {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "--sample-labels: %s: sample %zu has no '%s' to be labelled by", input_name, i,
                  key);
      return FALSE;
    }
    if (!g_hash_table_add(seen, (gpointer)values[i])) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "--sample-labels: %s: '%s' is the '%s' of two samples (the second: sample %zu); "
                  "labels must name one sample each",
                  input_name, values[i], key, i);
      return FALSE;
    }
  }
  for (size_t i = 0; i < n; i++)
    if (axis == KNNWB_MATRIX_ROWS)
      knnwb_matrix_set_row_label(data, i, values[i]);
    else
      knnwb_matrix_set_col_label(data, i, values[i]);
  return TRUE;
}

/* The sentence of a table that names none of the points: both sides' first names. */
static void knnwb_host_annotation_no_match(const KnnwbAnnotationTable *table, size_t id,
                                           const KnnwbMatrix *data, const char *id_option,
                                           GError **error)
{
  const size_t n = data->n_rows;
  const char *first = n > 0 ? knnwb_matrix_row_label(data, 0) : NULL;
  const char *second = n > 1 ? knnwb_matrix_row_label(data, 1) : NULL;
  g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
              "%s: none of the matrix's %zu rows is named in the table's column '%s': the rows "
              "are named like '%s'%s%s%s, the column holds '%s'%s%s%s (another column of names: "
              "%s; samples as rows: --transpose)",
              table->path, n, table->header[id], first ? first : "0", n > 1 ? ", '" : "",
              n > 1 ? (second ? second : "1") : "", n > 1 ? "'" : "",
              table->n_records > 0 ? knnwb_annotation_field(table, 0, id) : "",
              table->n_records > 1 ? ", '" : "",
              table->n_records > 1 ? knnwb_annotation_field(table, 1, id) : "",
              table->n_records > 1 ? "'" : "", id_option);
}

gboolean knnwb_host_annotation_classes(const char *spec, const char *id_column, const char *option,
                                       const char *id_option, const KnnwbMatrix *data,
                                       const char *input_name, igraph_vector_int_t *classes,
                                       char ***class_names, GError **error)
{
  g_autoptr(KnnwbAnnotationTable) table = NULL;
  g_autofree char *column = NULL;
  if (!knnwb_host_annotation_table(spec, option, data, KNNWB_MATRIX_ROWS, input_name, &table,
                                   &column, error))
    return FALSE;
  const gboolean bare = knnwb_host_annotation_is_bare(spec, data, KNNWB_MATRIX_ROWS);
  size_t id = 0, matched = 0, named = 0;
  if (!knnwb_annotation_column(table, bare ? NULL : id_column, &id, error) ||
      !knnwb_formats_annotation_classes(table, bare ? NULL : id_column, column,
                                        (const char *const *)data->row_labels, data->n_rows,
                                        classes, class_names, &matched, &named, error))
    return FALSE;
  if (named == 0 && data->n_rows > 0) {
    knnwb_host_annotation_no_match(table, id, data, id_option, error);
    g_clear_pointer(class_names, g_strfreev);
    return FALSE;
  }
  if (matched < data->n_rows)
    g_warning("%s: %zu of the %zu rows have no value in column '%s' (not in the table, or NA, "
              "empty or NaN): they are left out of the comparison with the clusters",
              table->path, data->n_rows - matched, data->n_rows, column);
  return TRUE;
}
